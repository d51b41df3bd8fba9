#!/bin/bash
# Session 14 run 10 (1 H200, commit 831171e): the session's last code on the suites — tests/gpu/run.sh
# (quick): kernel checks, the C suite on local (gemm_alltoall's kernels now share call_plan;
# gemv's split groups and one kernel per grouped tile), and pytest -m gpu (test_gemm_tma's
# pairwise cover, 480 s bound). No bench, no torch scripts.
set -u
export FCO_COMMIT=831171e FCO_TIMEOUT_MS=15000
mkdir -p /tmp/o
FCO_GPU_BUDGET=575 FCO_GPU_QUICK=1 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 OUT=/tmp/o \
  bash tests/gpu/run.sh > /tmp/o/run.txt 2>&1; echo "run.sh rc $?"
tar czf $OUT/out.tgz -C /tmp/o .
sed -n '/=== summary ===/,$p' /tmp/o/run.txt
grep -E "passed|failed" /tmp/o/pytest-gpu.log | tail -3
