#!/bin/bash
# Session 53's gemm knob change, not yet run on a GPU (one call, ~250 s with a cold start; any one
# GPU): fco_gemm_alltoall's launch knobs (FCO_GA_*, FCO_GEMM_A2A_AUTO) read once a call by the op
# layer into the record (fco_ga_knobs_t; read_knobs), the launchers and AUTO's rule reading no
# environment — as 5832d9e did for the embedding (run 2026-12-06_nvidia-h100-x1_5832d9e-eaknobs).
# First, on the CPU machine: `git apply bench/results/pending/session53-gaknobs/gaknobs.diff`,
# make, commit, build the carry at that commit (tar czf build/carry.tgz build/obj, stripped).
#   tests on local (P 1..4) and nccl (P = 1): test_gemm_alltoall, test_gemm_alltoall_checks
#   (knob_readback: every knob read back from the plans; knobs_at_call: changed before
#   fco_group_end, the call's values run; one_rank_auto_rule: FCO_GA_BLAS=loop), test_streams,
#   test_mixed_ops, test_random_shapes; then fco-bench gemm_alltoall bf16 at P = 1 (graphs,
#   -D 0,1) and local P = 2 (-D all), to set beside the last runs' (the kernels are the same).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export FCO_COMMIT=${FCO_COMMIT:-unknown}
tar xzf build/carry.tgz
O=/tmp/o5
mkdir -p $O
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
cat > /tmp/extra5.sh <<'EOS'
set -u
O=/tmp/o5 B=build/bin/fco-bench
T="test_gemm_alltoall test_gemm_alltoall_checks test_streams test_mixed_ops test_random_shapes"
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=150 VERBOSE=1 tests/run.sh $T > $O/tests-local.log 2>&1
echo "local rc=$?"
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 VERBOSE=1 tests/run.sh $T > $O/tests-nccl.log 2>&1
echo "nccl rc=$?"
cp -r build/tests/logs $O/test-logs
$B gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 10 -w 3 -J $O/ga-p1.json > $O/ga-p1.txt 2>&1
echo "bench p1 rc=$?"
$B gemm_alltoall -t local -g 2 -d bf16 -n 20 -w 3 -J $O/ga-local.json > $O/ga-local.txt 2>&1
echo "bench local rc=$?"
EOS
OUT=$O FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 \
  FCO_GPU_BUDGET=400 FCO_GPU_EXTRA="bash /tmp/extra5.sh" bash tests/gpu/run.sh > $O/run.txt 2>&1
echo "run.sh rc=$?"
tar czf $OUT/out.tgz -C $O .
cat $O/gpu.txt
sed -n '/^step /,$p' $O/run.txt
cat $O/extra.log
grep -hE "^(PASS|FAIL|SKIP)|^# (local|nccl):" $O/tests-local.log $O/tests-nccl.log
grep -E "wrong|auto ran" $O/ga-p1.txt $O/ga-local.txt | cut -c1-200
