#!/bin/bash
# Session 21 run 4 (1 H200, commit d382d47): gemv_group_probe, lib rows only — GroupWgmma as the
# operator runs it and with the slab loop's fence.proxy.async left out (timing; y checked).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_LIB_ONLY=1 timeout 200 build/probe/gemv_group_probe 30 > $OUT/probe.txt 2>&1; echo rc $?
FCO_PROBE_LIB_ONLY=1 FCO_PROBE_RANDOM=1 timeout 200 build/probe/gemv_group_probe 30 > $OUT/probe-random.txt 2>&1; echo rc $?
cat $OUT/probe.txt $OUT/probe-random.txt
