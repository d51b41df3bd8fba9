#!/bin/bash
# Session 39 (one H200): the standard GPU script's embedding bench and the torch steps at df76ec6 (the lean tile's
# trimmed copy issue) — fco-bench embedding_alltoall on local P = 2 and nccl P = 1 (CUDA graphs), targets.py on the
# P = 1 JSONs, the torch scripts and the examples at one rank; then impl 0's lookup alone (P = 1, bf16) at
# FCO_EA_LEAN_CHUNKS 4 / 8 / 16 / 32 on workloads 1 (65536/8/64/8), 3 (Zipf), 7 and 8 (ragged), two rounds.
# Tests: run ..._v2-ab (same kernels).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
find build/obj -name '*.o' -exec touch {} +
OUT1=$OUT
OUT=/tmp/o1 FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_PREBUILT=1 FCO_GPU_OPS=embedding_alltoall FCO_GPU_BUDGET=400 bash tests/gpu/run.sh > /tmp/run.txt 2>&1
echo "run.sh rc=$?"
cp /tmp/run.txt /tmp/o1/run.txt
tar czf $OUT1/out.tgz -C /tmp/o1 .
mkdir -p /tmp/o1/chunks
for round in 1 2; do
  for c in 4 8 16 32; do
    FCO_EA_LEAN_CHUNKS=$c FCO_BENCH_EA_WORKLOADS=1,3,7,8 timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 \
      -R 3 -n 10 -w 3 -D 0 -d bf16 -J /tmp/o1/chunks/c$c-$round.json > /tmp/o1/chunks/c$c-$round.txt 2>&1
  done
done
tar czf $OUT1/out.tgz -C /tmp/o1 .
sed -n '/=== targets ===/,$p' /tmp/run.txt | cut -c1-200 | tail -40
python3 - /tmp/o1/chunks <<'PY'
import json, sys, glob, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/c*-*.json")):
    c = int(f.split("/")[-1].split("-")[0][1:])
    for r in json.load(open(f))["results"]:
        s = r["shape"]; k = (s["B"], s["D"], s["L"], s["dist"][:4])
        rows.setdefault(k, {}).setdefault(c, []).append(r["time_us"])
print("impl 0 lookup, P = 1, bf16, median µs by FCO_EA_LEAN_CHUNKS:       4        8       16       32")
for k, m in rows.items():
    print(" ".join(str(x) for x in k).ljust(60), " ".join(f"{statistics.median(m.get(c, [0])):8.1f}" for c in (4, 8, 16, 32)))
PY
