#!/bin/bash
# Session 21 run 1 (1 H200, commit 4790d7f): gemv_rs_probe — the RS-wgmma GEMV tile (W from
# registers, x^T from shared memory) against cuBLAS at M = 64 / 48, one GPU, no communication.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 300 build/probe/gemv_rs_probe 30 > $OUT/probe.txt 2>&1; echo rc $?
cat $OUT/probe.txt | cut -c1-150
