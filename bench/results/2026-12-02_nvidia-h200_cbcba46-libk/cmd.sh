#!/bin/bash
# Session 22: gemv_group_probe (commit cbcba46, built here, carried), the library rows only: GroupWgmma (the operator's
# M 33..64 tile) with 1 / 2 / 3 / 4 64-k slabs a ring stage (lib, lib k2, k3, k4), cuBLAS and the pure W read beside.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_LIB_ONLY=1 timeout 200 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -v "^#   " $OUT/probe.txt
