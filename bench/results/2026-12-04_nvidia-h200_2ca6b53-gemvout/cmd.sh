#!/bin/bash
# Session 36 (one H200, the last device minutes): fco.gemv_allreduce's new out= on CUDA —
# tests/python/test_gpu_ops.py::test_gemv_allreduce_vs_torch (every impl and dtype; then one NaN-poisoned
# buffer reused by every impl).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
timeout 110 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -k gemv_allreduce_vs_torch -rs -q -p no:cacheprovider > $O/pytest.txt 2>&1; echo "pytest rc=$?"
tail -4 $O/pytest.txt; cp $O/pytest.txt $OUT/
