#!/bin/bash
# Session 15 run 7 (one H200, commit af043b0): the GPU pytest suite, quick (tests/gpu/run.sh's pytest
# step alone: pytest tests/python -m gpu; fco.last_plan, the new knobs and AUTO rules on a GPU).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_COMMIT=af043b0 FCO_TIMEOUT_MS=15000
mkdir -p /tmp/o
OUT_DEV=$OUT
OUT=/tmp/o FCO_GPU_TESTS=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 FCO_GPU_QUICK=1 FCO_GPU_BUDGET=575 \
  bash tests/gpu/run.sh > /tmp/o/run.txt 2>&1; echo "run.sh rc $?"
tar czf $OUT_DEV/out.tgz -C /tmp/o .
tail -n 30 /tmp/o/run.txt; grep -E "passed|failed" /tmp/o/pytest-gpu.log | tail -3
