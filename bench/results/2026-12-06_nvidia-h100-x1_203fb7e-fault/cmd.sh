#!/bin/bash
# Session 58 on one GPU (~6 min with a cold start):
# 1. the local embedding tests with the failed-resolve fix (test_embedding_alltoall_direct's new
#    fault part: FCO_FAULT_EA_RESOLVE=0, rank 1 must report its own error) and the other
#    embedding tests, test_timeout;
# 2. the same fault part against a mutant lean kernel object (build/mutant.tgz: lean_signal
#    ignoring b->rfail — the old signalling): it must FAIL (rank 1 silent, rows stale);
# 3. A/B of session 57's protocol changes (the embedding's direct word, gemm's held mask) against
#    59d4cef (build/src59.tgz: `git archive 59d4cef Makefile include src tools`, built here in the
#    background while the tests run: its libfco.so and fco-bench), local P = 2, bf16, CUDA graphs,
#    symmetric and ordinary outs, old / new alternating twice.
# Carry: build/carry.tgz (make -j2 && make_carry.sh), build/mutant.tgz, build/src59.tgz (the
# 64 MiB carry limit holds no prebuilt old library beside the tracked tree).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o58; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
make -j16 NCCL_HOME="$NCCL_HOME" > $O/build.log 2>&1
echo "make rc=$? ($(grep -c nvcc $O/build.log) nvcc lines)"
mkdir -p /tmp/old59 && tar xzf build/src59.tgz -C /tmp/old59
(cd /tmp/old59 && make -j14 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so build/bin/fco-bench \
  > $O/build-old.log 2>&1; echo "old make rc=$?" >> $O/build-old.log) &
OLDPID=$!
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=160 tests/run.sh test_embedding_alltoall_direct \
  test_embedding_alltoall test_embedding_alltoall_bad test_timeout > $O/tests.txt 2>&1
echo "tests rc=$?"; tail -n 6 $O/tests.txt
cp build/tests/logs/local/test_embedding_alltoall_direct.log $O/ 2>/dev/null
# 2. the mutant
L=build/obj/src/cuda/embedding_alltoall_fused_lean.o
cp $L /tmp/lean-good.o
tar xzf build/mutant.tgz -C /tmp && cp /tmp/mutant/embedding_alltoall_fused_lean.o $L && touch $L
make -j16 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so > $O/build-mutant.log 2>&1
FCO_TRANSPORT=local timeout 120 build/tests/test_embedding_alltoall_direct fault > $O/mutant.txt 2>&1
echo "mutant fault part rc=$? (must not be 0)"; tail -n 4 $O/mutant.txt
cp /tmp/lean-good.o $L && touch $L
make -j16 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so > $O/build-back.log 2>&1
FCO_TRANSPORT=local timeout 120 build/tests/test_embedding_alltoall_direct fault > $O/fixed.txt 2>&1
echo "fixed fault part rc=$?"; tail -n 3 $O/fixed.txt
# 3. A/B old (59d4cef) / new
wait $OLDPID; tail -n 1 $O/build-old.log
ab() { # $1 = old|new, $2 = tag; the rest: fco-bench args
  local w=$1 tag=$2; shift 2
  if [ $w = old ]; then
    /tmp/old59/build/bin/fco-bench "$@" > $O/$tag.txt 2>&1
  else
    build/bin/fco-bench "$@" > $O/$tag.txt 2>&1
  fi
  echo "$tag rc=$?"
}
export FCO_BENCH_EA_WORKLOADS=1,5,6 FCO_BENCH_GA_SHAPES="512,2048,7168,32,8;128,2048,7168,32,8"
for pass in 1 2; do
  for w in old new; do
    for sym in 1 0; do
      FCO_BENCH_SYM=$sym ab $w ea-$w-sym$sym-$pass embedding_alltoall -t local -g 2 -d bf16 -D 1 -G 1 -n 20 -w 3
      FCO_BENCH_SYM=$sym ab $w ga-$w-sym$sym-$pass gemm_alltoall -t local -g 2 -d bf16 -D 1 -G 1 -n 20 -w 3
    done
  done
done
tar czf $OUT/out.tgz -C $O .
for f in $O/ea-*.txt $O/ga-*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-150; done
