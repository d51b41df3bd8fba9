#!/bin/bash
# Session 22: gemv_group_probe (commit e6bdc80's probe, built here, carried), every row: the library's GroupWgmma
# ("lib") beside the TMA tile's session-22 forms and cuBLAS in one run.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 300 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -v "^#   " $OUT/probe.txt | grep "cublas\|lib\|ks\|read W\|wrong\|rc"
