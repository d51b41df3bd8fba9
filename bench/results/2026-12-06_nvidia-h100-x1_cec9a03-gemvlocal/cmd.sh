#!/bin/bash
# For an H200 (one GPU, ~200 s with a cold start): gemv AUTO's local N ≤ 8192 bound
# (src/ops/gemv_allreduce.c, resolve_impl: fused only to FCO_GEMV_AR_FUSED_MAX_N = 8192 on local,
# set from H200 runs 8b9715b-local and 7a8c689-local8 with session-12 kernels). On two H100s' runs
# (2026-12-06_nvidia-h100-x1_26a5db8, ..._d2f0f12-measure) every fused impl beat impl 0 at 16384²
# M 1 / 4 / 16 on local P = 2 by 1.04–1.10× while AUTO kept impl 0. This reruns the rule's rows on
# an H200 at P = 2, 4, 8 with today's kernels: 16384² and 8192² (the bound's two sides), M 1, 4,
# 16, bf16, -D all, -R 4, eager (CUDA events) — and the same with FCO_GEMV_AR_FUSED_MAX_N=16384, so
# the auto column shows what AUTO would run with the bound raised. Raise the bound (for the P where
# AUTO then stays ≥ impl 0 at every row) only from an H200's numbers; record the run either way.
# Carry: build/obj at the commit, stripped (tar czf build/carry.tgz build/obj).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export FCO_COMMIT=${FCO_COMMIT:-unknown}
tar xzf build/carry.tgz
O=/tmp/o6
mkdir -p $O
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
cat > /tmp/extra6.sh <<'EOS'
set -u
O=/tmp/o6 B=build/bin/fco-bench
export FCO_BENCH_GEMV_NK=16384x16384,8192x8192 FCO_BENCH_GEMV_M=1,4,16
for P in 2 4 8; do
  $B gemv_allreduce -t local -g $P -d bf16 -D all -R 4 -n 20 -w 3 -J $O/gemv-p$P.json > $O/gemv-p$P.txt 2>&1
  echo "P=$P rc=$?"
  FCO_GEMV_AR_FUSED_MAX_N=16384 $B gemv_allreduce -t local -g $P -d bf16 -D 0,auto -R 4 -n 20 -w 3 \
    -J $O/gemv-p$P-max16k.json > $O/gemv-p$P-max16k.txt 2>&1
  echo "P=$P max16k rc=$?"
done
EOS
OUT=$O FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_PREBUILT=1 \
  FCO_GPU_BUDGET=400 FCO_GPU_EXTRA="bash /tmp/extra6.sh" bash tests/gpu/run.sh > $O/run.txt 2>&1
echo "run.sh rc=$?"
tar czf $OUT/out.tgz -C $O .
cat $O/gpu.txt
sed -n '/^step /,$p' $O/run.txt
cat $O/extra.log
for f in $O/gemv-p*.txt; do echo "== $f"; grep -E "^ +(16384|8192) |auto ran|wrong" $f | cut -c1-230; done
