#!/bin/bash
# Session 22: gemv_group_probe (commit cba2172, built here, carried): the traced tmaws rows with one producer thread (tr), the same with 32-bit counters and no division (i32),
# producer + consumers spinning (spin2), x issued by a second producer warp (2prod), no x loads (nox, timing only).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_TMAWS_ONLY=1 timeout 200 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -E "cublas|tr |blocks \(glob|wrong:" $OUT/probe.txt | grep "block 0\|blocks (glob\|cublas\|tmaws4 S=8 tr\|wrong" | grep -v "mean period" | cut -c1-200
