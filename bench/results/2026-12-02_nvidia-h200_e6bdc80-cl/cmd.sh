#!/bin/bash
# Session 22: gemv_group_probe (commit e6bdc80, built here, carried): the k-split TMA tile (i32 producer, 2 / 4 boxes a stage)
# as is, without x loads (nox, timing only: is x's L2 traffic the limit?) and with x multicast over clusters of 2 (cl2).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_TMAWS_ONLY=1 timeout 200 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -v "^#   \|S=12\|S=4 cl4\|S=8 cl2\|tmaws4 S=8  \|tmaws4 S=4  " $OUT/probe.txt
grep -E "blocks \(glob|block 0: [0-9]+ steady" $OUT/probe.txt | grep "ks" | cut -c1-200 | head -40
