#!/bin/bash
# Session 21 run 7 (1 H200, commit 1c4863f): gemv_group_probe's tmaws rows (TMA + producer warp,
# clusters multicasting x): the consumers' remote release as .release.cluster (fco::tile's
# helper) and with the default CTA-scope release ("cta" rows, as CUTLASS's ClusterBarrier).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
FCO_PROBE_TMAWS_ONLY=1 timeout 300 build/probe/gemv_group_probe 30 > $OUT/probe.txt 2>&1; echo rc $?
cat $OUT/probe.txt
