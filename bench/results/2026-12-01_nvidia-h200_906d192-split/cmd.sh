#!/bin/bash
# Session 17 run 6 (one H200, commit 906d192): gemv_allreduce.cu split in two (the device side moved
# to gemv_allreduce_sched.cuh; the sm_90a cubin is byte-identical, checked on the CPU machine) and
# tests/gpu/run.sh's FCO_GPU_SUITES — run.sh with the local suite only (quick: build, kernel
# checks, C suite on local), then test_gemv_allreduce on nccl (one GPU: P = 1).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=906d192
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
rm -rf /tmp/o6; mkdir -p /tmp/o6
OUT_DEV=$OUT
OUT=/tmp/o6 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_SUITES=local FCO_GPU_PREBUILT=1 FCO_GPU_QUICK=1 FCO_GPU_BUDGET=250 \
  bash tests/gpu/run.sh > /tmp/o6/run.txt 2>&1; echo "run.sh rc $?"
FCO_TEST_QUICK=1 FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=100 tests/run.sh test_gemv_allreduce > /tmp/o6/test-gemv-nccl.txt 2>&1; echo "nccl rc $?"
tar czf $OUT_DEV/out.tgz -C /tmp/o6 .
tail -n 12 /tmp/o6/run.txt; tail -n 2 /tmp/o6/test-gemv-nccl.txt
