#!/bin/bash
# Session 20 run 3 (one H200, commit f54323f, the machine warm from run 2, its build reused): the GPU pytest
# suite, quick (tests/gpu/run.sh's pytest step alone: pytest tests/python -m gpu) — the first GPU pytest
# run with the binding's version check at load (fco_get_version, fco.lib_version).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_COMMIT=f54323f FCO_TIMEOUT_MS=15000
rm -rf /tmp/o5; mkdir -p /tmp/o5
OUT_DEV=$OUT
OUT=/tmp/o5 FCO_GPU_TESTS=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 FCO_GPU_QUICK=1 FCO_GPU_BUDGET=575 \
  bash tests/gpu/run.sh > /tmp/o5/run.txt 2>&1; echo "run.sh rc $?"
tar czf $OUT_DEV/out.tgz -C /tmp/o5 .
tail -n 30 /tmp/o5/run.txt; grep -E "passed|failed" /tmp/o5/pytest-gpu.log | tail -3
