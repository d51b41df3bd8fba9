#!/bin/bash
# Session 12 run 16 (1 H200, commit 93a3ca8): the unfused impls moved to gemv_allreduce_blas.cu —
# test_gemv_allreduce (quick) on local, P 1..4.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=93a3ca8
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=1 timeout 200 tests/run.sh test_gemv_allreduce > $OUT/tests.txt 2>&1
grep -E "^(PASS|FAIL)|P=[0-9]: |passed" $OUT/tests.txt
