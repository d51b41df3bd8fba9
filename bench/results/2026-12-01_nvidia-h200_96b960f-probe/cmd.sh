#!/bin/bash
# Session 13 run 3 (1 H200, commit 96b960f): gemv_stream_probe with tile pairs (tile_mma kNT = 2:
# one x load feeds two 16-column tiles) — does halving x's L2 traffic close the M = 16 premium?
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
build/probe/gemv_stream_probe 30 > $OUT/probe.txt 2>&1; echo rc $?
grep -E "^\|" $OUT/probe.txt | cut -c1-150
