#!/bin/bash
# Session 22: gemv_group_probe (commit b95acb8, built here, carried): the traced TMA tile with the 32-bit producer (i32) and
# stages of 1 / 2 / 4 64-k boxes, and (ks) each warpgroup on alternate boxes with all 64 columns (m64n64).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_TMAWS_ONLY=1 timeout 200 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -v "^#   " $OUT/probe.txt
grep -E "SM clock|blocks \(glob|block 0: [0-9]+ steady" $OUT/probe.txt | grep -v "4096   7168" | cut -c1-190 | head -60
