#!/bin/bash
# Session 43, one H200 (nvidia-h200), tree 2209dd5; build/obj built at 2209dd5 on the CPU machine, stripped,
# carried as build/carry.tgz. The device tool ran this line in the repository root:
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} + && \
FCO_COMMIT=2209dd5 FCO_GPU_PREBUILT=1 FCO_GPU_BENCH=0 FCO_GPU_PYTEST=0 FCO_GPU_TORCH=0 FCO_GPU_BUDGET=560 \
FCO_GPU_EXTRA='for op in gemm_alltoall embedding_alltoall; do for L in 4300 1000; do echo "== $op -L $L"; timeout 60 build/bin/fco-bench $op -t local -g 2 -n 3 -w 1 -L $L 2>&1 | tail -14; done; done' \
bash tests/gpu/run.sh
