#!/bin/bash
# Session 21 run 10 (1 H200, commit 816787e): the whole gemv_group_probe after the session's changes
# (cluster arrivals' fix, lib nofence, tmaws4 S=12): every M = 64 / 48 tile design side by side.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 300 build/probe/gemv_group_probe 30 > $OUT/probe.txt 2>&1; echo probe rc $?
cat $OUT/probe.txt
