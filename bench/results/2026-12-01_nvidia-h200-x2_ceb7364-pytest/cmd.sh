#!/bin/bash
# Session 11 run 8 (2xH200): the Triton operators with fl.epoch_guard and the per-call error
# poll under their GPU tests (pytest -m gpu -k triton), P = 2.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=ceb7364
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
timeout 270 python3 -m pytest tests/python/test_triton_gpu.py -m gpu -q -p no:cacheprovider -x 2>&1 | tail -8 | tee $OUT/pytest.txt
