#!/bin/bash
# Session 18 run 10 (one H200, commit 2dc9138): fco.triton.gemm_alltoall split into host and
# kernel modules (gemm_alltoall_kernel.py) — the Triton GPU tests (tests/python/test_triton_gpu.py,
# quick: test_gemm_tma's pairwise cover) and the GPU op tests' Triton cases.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=2dc9138
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o10; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
FCO_LIB=$PWD/build/lib/libfco.so FCO_TEST_QUICK=1 timeout 560 python3 -m pytest tests/python/test_triton_gpu.py -m gpu -rs -q -p no:cacheprovider --durations=10 > $O/pytest-triton-gpu.log 2>&1; echo "pytest rc=$?"
tail -15 $O/pytest-triton-gpu.log
rm -f $O/build.log; tar czf $OUT/out.tgz -C $O .
