#!/bin/bash
# Session 22: gemv_group_probe (commit 54736e7, built here, carried) tmaws rows traced: consumers' full wait try_wait / spin,
# and (spin2) the producer's empty wait spinning too; warpgroup 1's release lag behind warpgroup 0.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_TMAWS_ONLY=1 timeout 200 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -E "tr |wrong:" $OUT/probe.txt | grep -v "trace block 0: 1\|mean period" | cut -c1-220
