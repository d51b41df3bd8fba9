#!/bin/bash
# Session 53, one GPU, one call (~250 s with a cold start): the embedding knobs read once a call by
# the op layer (read_knobs, fco_ea_knobs_t in the record; the launchers read no environment).
#   tests on local (P 1..4) and nccl (P = 1): test_embedding_alltoall (its knobs part: every knob
#   on the GPU kernels, plans read back; knobs_at_call: changed before fco_group_end, the call's
#   values run), test_embedding_alltoall_bad, test_ea_plan, test_config_env; then fco-bench
#   embedding_alltoall bf16 at P = 1 (graphs, -D 0,1) and local P = 2, beside run
#   2026-12-06_nvidia-h100-x1_d2f0f12-measure's (same kernels: the times should not move).
# Carry: build/obj at the commit, stripped (tar czf build/carry.tgz build/obj).
# Run: FCO_COMMIT=<commit> bash bench/results/pending/session53/ea-knobs.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export FCO_COMMIT=${FCO_COMMIT:-unknown}
tar xzf build/carry.tgz
O=/tmp/o4
mkdir -p $O
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
cat > /tmp/extra4.sh <<'EOS'
set -u
O=/tmp/o4 B=build/bin/fco-bench
T="test_embedding_alltoall test_embedding_alltoall_bad test_ea_plan test_config_env"
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=150 VERBOSE=1 tests/run.sh $T > $O/tests-local.log 2>&1
echo "local rc=$?"
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 VERBOSE=1 tests/run.sh $T > $O/tests-nccl.log 2>&1
echo "nccl rc=$?"
cp -r build/tests/logs $O/test-logs
$B embedding_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 10 -w 3 -J $O/ea-p1.json > $O/ea-p1.txt 2>&1
echo "bench p1 rc=$?"
$B embedding_alltoall -t local -g 2 -d bf16 -n 20 -w 3 -J $O/ea-local.json > $O/ea-local.txt 2>&1
echo "bench local rc=$?"
EOS
OUT=$O FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 \
  FCO_GPU_BUDGET=330 FCO_GPU_EXTRA="bash /tmp/extra4.sh" bash tests/gpu/run.sh > $O/run.txt 2>&1
echo "run.sh rc=$?"
tar czf $OUT/out.tgz -C $O .
cat $O/gpu.txt
sed -n '/^step /,$p' $O/run.txt
cat $O/extra.log
grep -hE "^(PASS|FAIL|SKIP)|^# (local|nccl):" $O/tests-local.log $O/tests-nccl.log
grep -E " (unif|zipf|rag) |wrong" $O/ea-p1.txt $O/ea-local.txt | cut -c1-200
