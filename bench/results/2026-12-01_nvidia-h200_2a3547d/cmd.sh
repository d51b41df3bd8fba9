#!/bin/bash
# Session 13 run 7 (1 H200, commit 2a3547d): the session's last commit — the C suite (quick) on local
# and pytest -m gpu, through tests/gpu/run.sh (no bench, no torch scripts).
set -u
export FCO_COMMIT=2a3547d FCO_TIMEOUT_MS=15000
mkdir -p /tmp/o
FCO_GPU_BUDGET=540 FCO_GPU_QUICK=1 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 OUT=/tmp/o \
  bash tests/gpu/run.sh > /tmp/o/run.txt 2>&1; echo "run.sh rc $?"
tar czf $OUT/out.tgz -C /tmp/o .
sed -n '/=== summary ===/,$p' /tmp/o/run.txt
grep -E "passed|failed" /tmp/o/pytest-gpu.log | tail -3
