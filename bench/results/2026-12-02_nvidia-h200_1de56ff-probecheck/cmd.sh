#!/bin/bash
# Session 21 run 12 (1 H200, commit 1de56ff): the two GEMV probes after their read-W row moved into
# probe.h (probe_read_w_us): they build (here) and run, 0 wrong, read W as before.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 120 build/probe/gemv_rs_probe 10 > $OUT/rs.txt 2>&1; echo rs rc $?
FCO_PROBE_LIB_ONLY=1 timeout 120 build/probe/gemv_group_probe 10 > $OUT/group.txt 2>&1; echo group rc $?
grep -E "read W|wrong:" $OUT/rs.txt $OUT/group.txt
