#!/bin/bash
# Session 21 run 6 (1 H200, commit d974607): gemv_group_probe's tmaws rows (TMA + producer warp,
# clusters of 1 / 2 / 4 multicasting x) after the producer warp converges before the closing
# .aligned cluster barrier (its lanes 1..31 used to reach it while lane 0 still produced).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_TMAWS_ONLY=1 timeout 300 build/probe/gemv_group_probe 30 > $OUT/probe.txt 2>&1; echo rc $?
cat $OUT/probe.txt
