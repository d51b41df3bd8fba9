#!/bin/bash
# Session 60 (one GPU; an H200 wanted for step 3): the gate's kernel check (step 0), then what
# sessions 53 and 59 left pending.
# 1. The tree under test (carried objects, 8352f90): on local test_gemm_alltoall_freed and
#    test_mem_alloc (not run on session 59's tree), while ae09cd6 (before fc5395b) builds.
# 2. The mutant with ae09cd6's whole library (gemm's kernels read their plan through the host's
#    ws pointer; the captured workspace freed at a growth) and the new test_mixed_ops: must fail.
# 3. session53-gemvlocal: gemv AUTO's local N <= 8192 bound on local P = 2, 4, 8 (16384², 8192²,
#    M 1 / 4 / 16, -D all) and the AUTO column with FCO_GEMV_AR_FUSED_MAX_N=16384 beside.
# 4. gemm impls 1 / 2 A/B ae09cd6 against the tree (local P = 2, bf16, graphs, sym 1 / 0, 2 passes).
# Carry: build/carry.tgz (make_carry.sh), build/srcold.tgz (git archive ae09cd6 Makefile include
# src tools | gzip). Run: FCO_COMMIT=<commit> bash cmd.sh
# S60_ONLY3=1: the build and step 3 only (what session 62's run left; steps 0-2 and 4 passed there,
# run 2026-12-07_nvidia-h100-x1_2485d96-gate), no build/srcold.tgz needed.
set -u
export FCO_TEST_QUICK=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o60; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME="$NCCL_HOME" > $O/build.log 2>&1
echo "make rc=$? ($(grep -c nvcc $O/build.log) nvcc lines) ${SECONDS}s"
pack() { mkdir -p $O/logs && cp -r build/tests/logs/* $O/logs/ 2>/dev/null; tar czf $OUT/out.tgz -C $O .; }
ONLY3=${S60_ONLY3:-0}
if [ "$ONLY3" != 1 ]; then
# 0. the gate's kernel check (session 60: src/cuda/gate.cu, the nccl transport's bounded entry
#    to growth and fco_mem_alloc; virtual ranks on one GPU) and nccl P = 1 growth on the new tree;
#    the growth policy (test_grow_policy: after a capture a growth at least doubles) on nccl P = 1
#    and local
nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -o /tmp/gate_check tests/gpu/gate_check.cu -Lbuild/lib \
  -lfco -Xlinker -rpath=$PWD/build/lib > $O/gate_check.txt 2>&1 && timeout 120 /tmp/gate_check \
  >> $O/gate_check.txt 2>&1
echo "gate_check rc=$? ${SECONDS}s"; tail -n 8 $O/gate_check.txt
FCO_TEST_MAX_RANKS=1 FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=200 tests/run.sh test_mixed_ops \
  test_mem_alloc test_grow_gate test_grow_policy > $O/tests-nccl1.txt 2>&1
echo "nccl P=1 tests rc=$? ${SECONDS}s"; tail -n 5 $O/tests-nccl1.txt; pack
# session 60's growth policy (a growth after a capture at least doubles: test_grow_policy) on local
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 tests/run.sh test_grow_policy test_leaks \
  > $O/tests-local-policy.txt 2>&1
echo "local policy tests rc=$? ${SECONDS}s"; tail -n 3 $O/tests-local-policy.txt; pack
[ "${S60_MIN:-0}" = 1 ] && { echo "S60_MIN=1: stop after step 0 (${SECONDS}s)"; exit 0; }
mkdir -p /tmp/old && tar xzf build/srcold.tgz -C /tmp/old && cp -r tests /tmp/old/
(cd /tmp/old && make -j12 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so build/bin/fco-bench \
  build/tests/test_mixed_ops > $O/build-old.log 2>&1; echo "old make rc=$?" >> $O/build-old.log) &
OLDPID=$!
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 tests/run.sh test_gemm_alltoall_freed \
  test_mem_alloc > $O/tests-local.txt 2>&1
echo "local tests rc=$? ${SECONDS}s"; tail -n 3 $O/tests-local.txt; pack
wait $OLDPID; tail -n 1 $O/build-old.log; echo "old build done ${SECONDS}s"
(cd /tmp/old && FCO_TRANSPORT=local timeout 200 build/tests/test_mixed_ops > $O/mutant.txt 2>&1
 echo "mutant test_mixed_ops rc=$? (must not be 0)")
tail -n 4 $O/mutant.txt | cut -c1-400; pack
fi # steps 0-2
B=build/bin/fco-bench
GV="2 4 8"; grep -q H200 $O/gpu.txt || { GV=""; echo "gemvlocal skipped: not an H200"; }
for P in $GV; do
  FCO_BENCH_GEMV_NK=16384x16384,8192x8192 FCO_BENCH_GEMV_M=1,4,16 $B gemv_allreduce -t local \
    -g $P -d bf16 -D all -R 4 -n 20 -w 3 -J $O/gemv-p$P.json > $O/gemv-p$P.txt 2>&1
  echo "gemv P=$P rc=$?"
  FCO_BENCH_GEMV_NK=16384x16384,8192x8192 FCO_BENCH_GEMV_M=1,4,16 FCO_GEMV_AR_FUSED_MAX_N=16384 \
    $B gemv_allreduce -t local -g $P -d bf16 -D 0,auto -R 4 -n 20 -w 3 \
    -J $O/gemv-p$P-max16k.json > $O/gemv-p$P-max16k.txt 2>&1
  echo "gemv P=$P max16k rc=$? ${SECONDS}s"; pack
done
[ "$ONLY3" = 1 ] && echo "S60_ONLY3=1: step 4 skipped"
[ "$ONLY3" = 1 ] || {
export FCO_BENCH_GA_SHAPES="512,2048,7168,32,8;128,2048,7168,32,8"
for pass in 1 2; do
  [ $SECONDS -gt $((pass == 1 ? 450 : 480)) ] && { echo "pass $pass skipped (${SECONDS}s)"; break; }
  for w in old new; do
    B=build/bin/fco-bench; [ $w = old ] && B=/tmp/old/build/bin/fco-bench
    for sym in 1 0; do
      FCO_BENCH_SYM=$sym $B gemm_alltoall -t local -g 2 -d bf16 -D 1,2 -G 1 -n 20 -w 3 \
        > $O/ga-$w-sym$sym-$pass.txt 2>&1
      echo "ga-$w-sym$sym-$pass rc=$?"; pack
    done
  done
done
} # step 4
echo "done ${SECONDS}s"
for f in $O/gemv-p*.txt; do echo "== $(basename $f)"
  grep -E "^ +(16384|8192) |auto ran|wrong" $f | cut -c1-200; done
for f in $O/ga-*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-160; done
