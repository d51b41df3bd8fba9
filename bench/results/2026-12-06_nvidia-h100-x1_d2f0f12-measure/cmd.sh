#!/bin/bash
# Session 53, one GPU, one call (~250 s with a cold start). Measures on whatever GPU comes
# (out/gpu.txt says which; an H200 is what both questions below want):
#   1. fco_embedding_alltoall f32 and bf16 at P = 1 (nccl, CUDA graphs, -D 0,1) and on local P = 2
#      (eager): on an H200, the f32 ragged rows with session 47's kPool in the claimed lookup and
#      the shipped library as one build (asked since session 48; H100s came);
#   2. fco_gemv_allreduce on local P = 2 at 16384×16384 M 1 / 4 and 8192×8192 M 16, bf16, -D all,
#      -R 4: AUTO's local rules (LL only where N ≤ 8192; the TMA tile at M 16), set on an H200,
#      against LL, which beat them on one H100 (run 2026-12-06_nvidia-h100-x1_26a5db8).
# Carry: build/obj at the commit, stripped (tar czf build/carry.tgz build/obj).
# Run: FCO_COMMIT=<commit> bash bench/results/pending/session53/measure.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export FCO_COMMIT=${FCO_COMMIT:-unknown}
tar xzf build/carry.tgz
O=/tmp/o3
mkdir -p $O
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $O/gpu.txt 2>&1
cat > /tmp/extra.sh <<'EOS'
set -u
O=/tmp/o3 B=build/bin/fco-bench
echo "# 1. embedding P = 1, f32 then bf16"
$B embedding_alltoall -t nccl -g 1 -G 1 -d f32,bf16 -D 0,1 -n 10 -w 3 -J $O/ea-p1.json > $O/ea-p1.txt 2>&1
echo "rc=$?"
echo "# 1. embedding local P = 2, f32 then bf16"
$B embedding_alltoall -t local -g 2 -d f32,bf16 -n 20 -w 3 -J $O/ea-local.json > $O/ea-local.txt 2>&1
echo "rc=$?"
echo "# 2. gemv local P = 2"
FCO_BENCH_GEMV_NK=16384x16384,8192x8192 FCO_BENCH_GEMV_M=1,4,16 \
  $B gemv_allreduce -t local -g 2 -d bf16 -D all -R 4 -n 20 -w 3 -J $O/gemv-local.json > $O/gemv-local.txt 2>&1
echo "rc=$?"
python3 bench/targets.py $O/ea-p1.json > $O/targets.txt 2>&1
echo "targets rc=$?"
EOS
OUT=$O FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 \
  FCO_GPU_BUDGET=400 FCO_GPU_EXTRA="bash /tmp/extra.sh" bash tests/gpu/run.sh > $O/run.txt 2>&1
echo "run.sh rc=$?"
tar czf $OUT/out.tgz -C $O .
cat $O/gpu.txt
sed -n '/^step /,$p' $O/run.txt
cat $O/extra.log
grep -E "^#|wrong" $O/ea-p1.txt | head -5
grep -E "ragged|^# embedding" $O/ea-p1.txt | cut -c1-200
grep -E "^# gemv|16384|8192" $O/gemv-local.txt | cut -c1-220 | head -30
grep -c MISSED $O/targets.txt; grep -E "met|MISSED" $O/targets.txt | cut -c1-150 | head -30
