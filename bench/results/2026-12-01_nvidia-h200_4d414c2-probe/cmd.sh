#!/bin/bash
# Session 13 run 8 (1 H200, commit 4d414c2): gemv_group_probe with the warp-specialized TMA tile
# (tmaws: a producer warp; clusters of 2 and 4 blocks multicasting x) beside lib (the library's cp.async GroupWgmma) (the first tma kernel removed),
# cuBLAS (fp32 y and the operator's bf16 call) and a pure read of W.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
build/probe/gemv_group_probe 30 > $OUT/probe.txt 2>&1; echo rc $?
cat $OUT/probe.txt | cut -c1-150
