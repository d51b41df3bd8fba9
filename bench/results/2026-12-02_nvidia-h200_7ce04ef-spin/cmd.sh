#!/bin/bash
# Session 22: the spin experiment prepared in session 21 (commit 7ce04ef probe, built here).
# (blocks 0 and grid/2): the consumers' full wait as try_wait (fco::tile::mbar_wait) or a test_wait spin, timed and traced.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_TMAWS_ONLY=1 timeout 200 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -E "tr |producer|medians|cublas bf16|wrong:" $OUT/probe.txt
