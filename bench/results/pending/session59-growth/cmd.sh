#!/bin/bash
# Session 59: a CUDA graph captured before a workspace growth, replayed after it. The transports
# now keep a captured call's workspace until destroy, and gemm's fused kernels (impls 1, 2) reach
# their own plan / segment table through the peer table instead of the host's ws pointer.
# 1. The tree under test (carried objects): on local, test_mixed_ops (its new growth_round: every
#    operator and impl captured, replayed after two growths and back to back with eager calls),
#    test_leaks (a growth after a capture: destroy frees the kept workspace), the gemm tests;
#    on nccl P = 1 test_mixed_ops, test_leaks, test_gemm_alltoall; pytest's CUDA-graph test (nccl,
#    one process: graphs of every op replayed after two growths).
# 2. The mutant: HEAD~ (ae09cd6, built here) with the new tests: test_mixed_ops must fail.
# 3. gemm A/B old / new (impl 1 tiles, impl 2 chunks; local P = 2, bf16, graphs, 2 passes).
# Carry: build/carry.tgz (make_carry.sh), build/srcold.tgz (git archive ae09cd6 Makefile include src tools).
set -u
export FCO_TEST_QUICK=1 # the growth rounds are the same; fewer random eager rounds (device time)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o59; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME="$NCCL_HOME" > $O/build.log 2>&1
echo "make rc=$? ($(grep -c nvcc $O/build.log) nvcc lines)"
if [ "${S59_MIN:-0}" = 1 ]; then # little device time left: the new tree's growth tests only
  FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 tests/run.sh test_mixed_ops test_leaks \
    > $O/tests-local.txt 2>&1
  echo "local tests rc=$?"; tail -n 3 $O/tests-local.txt
  cp -r build/tests/logs $O/ 2>/dev/null; tar czf $OUT/out.tgz -C $O .; exit 0
fi
mkdir -p /tmp/old && tar xzf build/srcold.tgz -C /tmp/old && cp -r tests /tmp/old/
(cd /tmp/old && make -j12 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so build/bin/fco-bench \
  build/tests/test_mixed_ops > $O/build-old.log 2>&1; echo "old make rc=$?" >> $O/build-old.log) &
OLDPID=$!
pack() { mkdir -p $O/logs && cp -r build/tests/logs/* $O/logs/ 2>/dev/null; tar czf $OUT/out.tgz -C $O .; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=300 tests/run.sh test_mixed_ops test_leaks \
  > $O/tests-local.txt 2>&1
echo "local tests rc=$?"; tail -n 3 $O/tests-local.txt; pack
FCO_TEST_MAX_RANKS=1 FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=300 tests/run.sh test_mixed_ops \
  test_leaks > $O/tests-nccl1.txt 2>&1
echo "nccl P=1 tests rc=$?"; tail -n 3 $O/tests-nccl1.txt; pack
wait $OLDPID; tail -n 1 $O/build-old.log
(cd /tmp/old && FCO_TRANSPORT=local timeout 300 build/tests/test_mixed_ops > $O/mutant.txt 2>&1
 echo "mutant test_mixed_ops rc=$? (must not be 0)")
tail -n 5 $O/mutant.txt | cut -c1-400
pack
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=300 tests/run.sh test_gemm_alltoall \
  test_gemm_alltoall_tiles test_gemm_alltoall_freed test_gemm_alltoall_stale_plan test_mem_alloc \
  > $O/tests-local-gemm.txt 2>&1
echo "local gemm tests rc=$?"; tail -n 6 $O/tests-local-gemm.txt; pack
FCO_LIB="$PWD/build/lib/libfco.so" PYTHONPATH="$PWD/python" timeout 300 python3 -m pytest \
  tests/python/test_gpu_ops.py -m gpu -rs -q -p no:cacheprovider -k cuda_graph > $O/pytest.txt 2>&1
echo "pytest cuda_graph rc=$?"; tail -n 3 $O/pytest.txt
pack
export FCO_BENCH_GA_SHAPES="512,2048,7168,32,8;128,2048,7168,32,8"
for pass in 1 2; do
  [ $pass = 2 ] && [ $SECONDS -gt 330 ] && { echo "pass 2 skipped (${SECONDS}s)"; break; }
  for w in old new; do
    B=build/bin/fco-bench; [ $w = old ] && B=/tmp/old/build/bin/fco-bench
    for sym in 1 0; do
      FCO_BENCH_SYM=$sym $B gemm_alltoall -t local -g 2 -d bf16 -D 1,2 -G 1 -n 20 -w 3 \
        > $O/ga-$w-sym$sym-$pass.txt 2>&1
      echo "ga-$w-sym$sym-$pass rc=$?"; pack
    done
  done
done
pack
for f in $O/ga-*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-160; done
