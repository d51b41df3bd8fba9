#!/bin/bash
# Session 21 run 15 (1 H200, commit ca0df16): gemv_group_probe's tmaws rows with the per-slab trace
# (blocks 0 and grid/2): the producer's wait for a free stage and its issue time per slab.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_TMAWS_ONLY=1 timeout 200 build/probe/gemv_group_probe 10 > $OUT/probe.txt 2>&1; echo rc $?
grep -E "producer|period|tmaws4 S=8  |cublas bf16|wrong:" $OUT/probe.txt
