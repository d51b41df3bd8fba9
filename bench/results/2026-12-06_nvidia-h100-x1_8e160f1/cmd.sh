#!/bin/bash
# Session 53 (copy of session 52's cmd.sh, run 2026-12-06_nvidia-h100-x1_26a5db8), one GPU, two calls on one warm machine:
#   PART=tests: the local C suite at the commit (apply ../session50-lanes/lanes.diff and commit first;
#     session 50's id-by-memcpy fix, session 51's test_random_shapes) and, as FCO_GPU_EXTRA, six tests on nccl at P = 1 (quick; session 53 added the last three):
#     test_lifecycle (c42e822's one line in transport/nccl.cu; the id at an odd address), test_bad_args,
#     test_random_shapes, test_gemm_alltoall_checks, test_embedding_alltoall_bad, test_gemv_allreduce_kernels;
#   PART=bench: session 49's bench step — fco-bench for all four ops on local P = 2 and nccl P = 1
#     (graphs, -D 0,1), bench/targets.py, the torch scripts and the examples at one rank.
# Carry: build/obj at the commit, stripped (tar czf build/carry.tgz build/obj).
#   PART=short: the tests part's changed code only (below), for a call with little device time left.
# Run: FCO_COMMIT=<commit> PART=tests|bench|short bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
if [ "${PART:-tests}" = short ]; then
  # the tests part's changes only (when little device time is left): on local, test_lifecycle, test_bad_args,
  # test_embedding_alltoall (lean_lanes), test_random_shapes; on nccl at P = 1 test_lifecycle and test_random_shapes
  # logs straight under $OUT (7 files and run.txt: the tool returns 8), so a call cut short still returns them
  FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 \
    FCO_GPU_BUDGET=${FCO_GPU_BUDGET:-330} FCO_GPU_EXTRA="bash bench/results/pending/session51/short.sh" \
    bash tests/gpu/run.sh > $OUT/run.txt 2>&1
  echo "run.sh rc=$?"
  grep -E '^(== |   \|)' $OUT/run.txt | cut -c1-160 | head -40
  sed -n '/^step /,$p' $OUT/run.txt | cut -c1-200 | tail -20
  grep -E "^(PASS|FAIL|SKIP)|^# " $OUT/extra.log
  exit 0
elif [ "${PART:-tests}" = tests ]; then
  OUT=/tmp/o1 FCO_GPU_SUITES=local FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 \
    FCO_GPU_BUDGET=${FCO_GPU_BUDGET:-470} \
    FCO_GPU_EXTRA="env FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=100 VERBOSE=1 FCO_TEST_QUICK=1 tests/run.sh test_lifecycle test_bad_args test_random_shapes test_gemm_alltoall_checks test_embedding_alltoall_bad test_gemv_allreduce_kernels" \
    bash tests/gpu/run.sh > /tmp/run.txt 2>&1
else
  OUT=/tmp/o1 FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_PREBUILT=1 FCO_GPU_BUDGET=540 \
    bash tests/gpu/run.sh > /tmp/run.txt 2>&1
fi
echo "run.sh rc=$?"
cp /tmp/run.txt /tmp/o1/run.txt; nvidia-smi --query-gpu=name --format=csv > /tmp/o1/gpu.txt 2>&1
cp -r build/tests/logs /tmp/o1/test-logs 2>/dev/null
tar czf $OUT/out.tgz -C /tmp/o1 .
grep -E '^(== |   \|)' /tmp/run.txt | cut -c1-160 | head -40
sed -n '/^step /,$p;/=== targets ===/,$p' /tmp/run.txt | cut -c1-200 | tail -80
