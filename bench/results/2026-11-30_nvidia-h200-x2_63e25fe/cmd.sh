#!/bin/bash
# Session 9 run 7 (2xH200, commit 63e25fe): the Python side of symmetric outputs —
# pytest test_gpu_ops (symmetric outputs, and the embedding / gemm tests against torch) on 2
# GPUs (nccl), test_symmetric.py; then test_gemm_alltoall (quick) and test_mem_alloc on local.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=63e25fe
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el pytest
FCO_LIB=$PWD/build/lib/libfco.so timeout 280 python3 -m pytest tests/python/test_gpu_ops.py tests/python/test_symmetric.py -k "symmetric or embedding_alltoall_vs or gemm_alltoall_vs or alloc or out_" -rs -q -p no:cacheprovider > $OUT/pytest.log 2>&1; echo "rc=$?"
tail -5 $OUT/pytest.log
el "local tests"
FCO_TRANSPORT=local timeout 60 build/tests/test_mem_alloc > $OUT/mem-local.log 2>&1; echo "mem rc=$?"
el all done
