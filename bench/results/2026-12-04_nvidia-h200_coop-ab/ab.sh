#!/bin/bash
# Second call on the warm machine (cmd.sh ran out of its 600 s in the builds): the A/B rounds and
# local P = 2 with cmd.sh's builds, packing after every step.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
O=/tmp/o7; mkdir -p $O/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
ls /tmp/t-old/build/bin/fco-bench build/bin/fco-bench || { echo "builds gone"; exit 3; }
for round in 1 2 3; do
  for v in old new; do
    B="build-$v/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1"
    [ -f $O/ab/$v-bf16-$round.json ] && continue
    timeout 60 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1; r1=$?
    FCO_BENCH_EA_WORKLOADS=0,1,5,7,8 timeout 60 $B -d f32 -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    el "round $round $v rc=$r1,$?"; pack
  done
done
timeout 100 build/bin/fco-bench embedding_alltoall -R 3 -n 10 -w 3 -t local -g 2 -d bf16 -D 0,1 -J $O/local2.json > $O/local2.txt 2>&1; el "local2 rc=$?"
pack
python3 - $O/ab <<'PY'
import json, sys, glob, statistics
O = sys.argv[1]
rows = {}
for f in sorted(glob.glob(O + "/*-*-*.json")):
    v = f.split("/")[-1].split("-")[0]
    for r in json.load(open(f))["results"]:
        s = r["shape"]; k = (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"], r["impl"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("P = 1, median µs over the rounds (impl nccl = the lookup alone at P = 1):   old      new  old/new")
for k in rows:
    m = {v: statistics.median(x) for v, x in rows[k].items()}
    print(" ".join(str(x) for x in k).ljust(46), " ".join(f"{m.get(v, 0):8.1f}" for v in ("old", "new")), f"{m['old']/m['new']:6.2f}")
PY
echo "== local2"; grep -v "^#  " $O/local2.txt | grep "^ \|wrong" | cut -c1-150
