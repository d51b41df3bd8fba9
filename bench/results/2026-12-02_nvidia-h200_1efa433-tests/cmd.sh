#!/bin/bash
# Session 22 (one H200, commit 1efa433): after the grouped reduce's simplification (one load helper for both formats) —
# as run f2863d0-tests: test_gemv_allreduce_kernels and test_gemv_allreduce on local P = 1..4 (quick).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=1efa433
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-local.txt 2>&1; echo rc=$?
cp -r build/tests/logs $O/; rm -f $O/build.log; pack
tail -n 4 $O/tests-local.txt
