#!/bin/bash
# Session 54, one GPU, one call (~450 s with a cold start), at HEAD after sessions 53-54's knob
# changes landed (5832d9e: the embedding's knobs read once a call; 6398cf0: the gemm's): the
# regression check of the tree.
#   1. build, kernel checks, the local C suite (P 1..4) and, as FCO_GPU_EXTRA, seven tests on nccl
#      at P = 1 (quick): test_lifecycle, test_bad_args, test_random_shapes,
#      test_gemm_alltoall_checks, test_embedding_alltoall_bad, test_gemv_allreduce_kernels,
#      test_mixed_ops  (out/tests/)
#   2. pytest -m gpu -k "not test_triton_gpu": the torch ops through libfco (test_gpu.py,
#      test_gpu_ops.py; 19 tests) — the Triton kernels' 40 tests call no changed C code (out/pytest/)
# Carry: build/obj at the commit, stripped (tar czf build/carry.tgz build/obj).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export FCO_COMMIT=${FCO_COMMIT:-unknown}
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
O=/tmp/o1
mkdir -p $O/tests $O/pytest
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
NT="test_lifecycle test_bad_args test_random_shapes test_gemm_alltoall_checks"
NT="$NT test_embedding_alltoall_bad test_gemv_allreduce_kernels test_mixed_ops"
OUT=$O/tests FCO_GPU_SUITES=local FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 \
  FCO_GPU_BUDGET=360 \
  FCO_GPU_EXTRA="env FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=100 VERBOSE=1 FCO_TEST_QUICK=1 tests/run.sh $NT" \
  bash tests/gpu/run.sh > $O/tests/run.txt 2>&1
echo "tests run.sh rc=$?"
cp -r build/tests/logs $O/tests/test-logs 2>/dev/null
OUT=$O/pytest FCO_GPU_TESTS=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 FCO_GPU_BUDGET=200 \
  FCO_GPU_PYTEST_K="not test_triton_gpu" bash tests/gpu/run.sh > $O/pytest/run.txt 2>&1
echo "pytest run.sh rc=$?"
tar czf $OUT/out.tgz -C $O .
cat $O/gpu.txt
sed -n '/^step /,$p' $O/tests/run.txt | cut -c1-200 | tail -20
grep -hE "^(PASS|FAIL|SKIP)|^# (local|nccl)" $O/tests/extra.log 2>/dev/null
grep -E '^# (local|nccl|cpu):' $O/tests/run.txt
sed -n '/^step /,$p' $O/pytest/run.txt | cut -c1-200 | tail -8
grep -hE "passed|failed" $O/pytest/*.log 2>/dev/null | tail -3
