#!/bin/bash
# Session 21 run 11 (1 H200, commit ce29dff): the whole gemv_group_probe after the session's changes
# with tmawk's K split sized by co-resident blocks (small rings: 2–3 a SM) and tmawk4 / tmawk8 S=4.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 300 build/probe/gemv_group_probe 30 > $OUT/probe.txt 2>&1; echo probe rc $?
cat $OUT/probe.txt
