#!/bin/bash
# Session 21 run 8 (1 H200, commit e9f7aa4): fco::tile::mbar_arrive_cluster without .release.cluster —
# tests/gpu/wgmma_tile_check (checks + timing of every GEMM tile, the cluster pair "tma2" among
# them; built here with its header's nvcc line, carried in build/probe) and gemv_group_probe's
# tmaws rows (the cluster rows now use the library helper's new form in both variants).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 200 build/probe/wgmma_tile_check > $OUT/wgmma_tile_check.log 2>&1; echo tile rc $?
FCO_PROBE_TMAWS_ONLY=1 timeout 200 build/probe/gemv_group_probe 30 > $OUT/probe.txt 2>&1; echo probe rc $?
grep -vE "^PASS" $OUT/wgmma_tile_check.log | tail -14; grep -E "cl2|cl4|S=8  " $OUT/probe.txt | head -12
