#!/bin/bash
# Session 22: gemv_group_probe (commit 38d4cd6, built here, carried), every row; new: tmawk (wide groups, K split)
# with two 64-k boxes a stage (k2).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 300 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -v "^#   " $OUT/probe.txt | grep "cublas bf16\|lib \|k4 ks  \|tmawk8\|tmawk4 S=6\|read W\|wrong\|rc"
