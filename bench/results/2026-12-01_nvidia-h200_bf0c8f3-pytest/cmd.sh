#!/bin/bash
# Session 14 run 1 (1 H200, commit bf0c8f3): the GPU pytest tests that sessions 12-13 never reached
# (pytest -m gpu stopped at its 300 s bound after 45 of 59), with per-test durations.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_COMMIT=bf0c8f3 FCO_TIMEOUT_MS=15000
mkdir -p /tmp/o
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > /tmp/o/build.log 2>&1; echo "make rc $?"
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)' 2>&1 | tee /tmp/o/versions.txt
T0=$(date +%s)
FCO_LIB=$PWD/build/lib/libfco.so PYTHONPATH=$PWD/python timeout -k 10 520 python3 -m pytest \
  tests/python/test_triton_gpu.py -m gpu -rs -q -p no:cacheprovider --durations=0 \
  -k "gemm_tma or gemm_many_calls or gemm_cuda_graph or bad_counts or gemm_lost or op_impl" \
  > /tmp/o/pytest.txt 2>&1; echo "pytest rc $? in $(($(date +%s) - T0)) s"
tar czf $OUT/out.tgz -C /tmp/o .
tail -n 45 /tmp/o/pytest.txt
