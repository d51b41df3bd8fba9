#!/bin/bash
# Session 45 on one H100 (nvidia-h200 failed to start): the local C suite at c95c171 — session 44's and 45's
# new tests on the local transport (bench/results/pending/README.md's item). build/obj carried as
# build/carry.tgz, built on the CPU machine at c95c171.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=$OUT
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} + &&
  OUT=/tmp/o FCO_COMMIT=c95c171 FCO_GPU_PREBUILT=1 FCO_GPU_QUICK=1 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 \
  FCO_GPU_TORCH=0 FCO_GPU_SUITES=local FCO_GPU_BUDGET=540 bash tests/gpu/run.sh > /tmp/run.log 2>&1
rc=$?
cp /tmp/run.log $D/; tar czf $D/out.tgz -C /tmp/o . 2>/dev/null; tail -45 /tmp/run.log; exit $rc
