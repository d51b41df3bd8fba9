#!/bin/bash
# Session 9 run 9 (2xH200, commit 1fd1c6f): the nccl transport's shared collective_register (workspace
# growth, fco_mem_alloc) — test_lifecycle, test_mem_alloc, test_gemm_alltoall (quick) on nccl.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=1fd1c6f
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for t in test_lifecycle test_mem_alloc test_gemm_alltoall; do
  FCO_TEST_QUICK=1 FCO_TRANSPORT=nccl timeout 120 build/tests/$t > $OUT/$t.log 2>&1; echo "$t rc=$?"; tail -1 $OUT/$t.log
done
