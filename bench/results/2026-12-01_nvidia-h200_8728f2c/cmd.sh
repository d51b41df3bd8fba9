#!/bin/bash
# Session 13 run 1 (1 H200, commit 8728f2c): 93a3ca8's moved gemv impls 0 / 3 (never run) —
# test_gemv_allreduce on local (P 1..4) first; then the gemv_group_probe's new "cublas bf16" row
# and tests/gpu/run.sh's never-run P = 1 steps (each fused op at nccl -g 1 -D 0,1, plus the local
# P = 2 bench) with bench/targets.py's one-rank targets.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=8728f2c
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 VERBOSE=1 timeout 200 tests/run.sh test_gemv_allreduce > $OUT/tests.txt 2>&1
grep -E "^(PASS|FAIL)|passed" $OUT/tests.txt
FCO_GPU_BUDGET=330 FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 \
  FCO_GPU_EXTRA="build/probe/gemv_group_probe 30" OUT=$OUT/gpu bash tests/gpu/run.sh > $OUT/gpu.txt 2>&1
sed -n '/=== targets ===/,$p' $OUT/gpu.txt | cut -c1-150
grep -E "cublas|lib |read" $OUT/gpu/extra.log | head -30
