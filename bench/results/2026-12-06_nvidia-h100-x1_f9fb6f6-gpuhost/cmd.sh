#!/bin/bash
# Session 55, one GPU, one call: regression after the GPU-host audit's fixes (symmetric slots
# taken oldest first, fco_comm_reserve above 2^50 refused, nccl destroy reading the failure after
# its sync) and the cpu-exact reference checks in the gemv / gemm fixtures.
#   PART=tests: build, kernel checks, the local C suite (P 1..4) and seven tests on nccl at P = 1
#     (quick): test_lifecycle, test_bad_args, test_group, test_mem_alloc, test_timeout,
#     test_gemm_alltoall_checks, test_mixed_ops  (~330 s cold)
#   PART=pytest: pytest -m gpu -k "not test_gemm_tma"  (~300 s)
# Carry: build/obj at the commit, stripped (tar czf build/carry.tgz build/obj).
# Run: FCO_COMMIT=<commit> PART=tests|pytest bash cmd.sh   (ran as FCO_COMMIT=f9fb6f6 PART=tests)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export FCO_COMMIT=${FCO_COMMIT:-unknown}
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
O=/tmp/o1
mkdir -p $O
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
if [ "${PART:-tests}" = tests ]; then
  NT="test_lifecycle test_bad_args test_group test_mem_alloc test_timeout"
  NT="$NT test_gemm_alltoall_checks test_mixed_ops"
  OUT=$O FCO_GPU_SUITES=local FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 \
    FCO_GPU_PREBUILT=1 FCO_GPU_BUDGET=420 \
    FCO_GPU_EXTRA="env FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=100 VERBOSE=1 FCO_TEST_QUICK=1 tests/run.sh $NT" \
    bash tests/gpu/run.sh > $O/run.txt 2>&1
  echo "tests run.sh rc=$?"
  cp -r build/tests/logs $O/test-logs 2>/dev/null
else
  OUT=$O FCO_GPU_TESTS=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 FCO_GPU_BUDGET=520 \
    FCO_GPU_PYTEST_K="not test_gemm_tma" bash tests/gpu/run.sh > $O/run.txt 2>&1
  echo "pytest run.sh rc=$?"
fi
tar czf $OUT/out.tgz -C $O .
cat $O/gpu.txt
sed -n '/^step /,$p' $O/run.txt | cut -c1-200 | tail -20
grep -hE "^(PASS|FAIL|SKIP)|^# (local|nccl)" $O/extra.log 2>/dev/null
grep -hE "passed|failed" $O/pytest-gpu.log 2>/dev/null | tail -3
grep -hE "^(FAILED|ERROR)" $O/pytest-gpu.log 2>/dev/null | head -10
