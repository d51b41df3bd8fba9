#!/bin/bash
# Session 49, one GPU: the standard GPU script's bench and torch steps at HEAD (as run 2026-12-04_nvidia-h200_5b746d6
# -bench): fco-bench for all four ops on local P = 2 and nccl P = 1 (graphs, -D 0,1), now with the card's own HBM
# rate in the floors and bench/targets.py; the torch scripts and the three examples at one rank. Tests: the local C
# suite ran at this code in runs ..._6828bb2-ar (plus 892286d's two fco-bench lines, run ..._d891ac0-env).
# Carry: build/obj at the commit, stripped (tar czf build/carry.tgz build/obj). Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
OUT=/tmp/o1 FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_PREBUILT=1 FCO_GPU_BUDGET=320 bash tests/gpu/run.sh > /tmp/run.txt 2>&1
echo "run.sh rc=$?"
cp /tmp/run.txt /tmp/o1/run.txt; nvidia-smi --query-gpu=name --format=csv > /tmp/o1/gpu.txt 2>&1
tar czf $OUT/out.tgz -C /tmp/o1 .
sed -n '/=== targets ===/,$p' /tmp/run.txt | cut -c1-200 | tail -70
