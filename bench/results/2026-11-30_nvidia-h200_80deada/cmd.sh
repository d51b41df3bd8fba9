#!/bin/bash
# Session 6, one call on nvidia-h200 (1 GPU) at commit 80deada (tree c6ae0d7: the library headers are
# SASS-identical to 3e88e17): the gather probe with the library's streaming lookup rows.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p build/probe && nvcc -O3 -std=c++17 -arch=sm_90 -Isrc/cuda -Iinclude bench/probe/ea_gather_probe.cu -o build/probe/ea_gather_probe && timeout 150 build/probe/ea_gather_probe > $OUT/probe-ea_gather_probe.log 2>&1
