#!/bin/bash
# Session 38 (one H200): how the row-split lean tile consumes a chunk — four builds side by side,
# in two interleaved rounds (v1 left out: the 64 MiB carry limit): old = 5041c07's tile (equal bags a group; fast/slow chunk paths);
# v0 = 7900cd8 (row split; every chunk row by row, one ring read a row); v1 = row by row with the
# chunk's kU ring reads first (ptxas spills in the loop); v2 = a group whose chunk lies inside one
# bag sums it unrolled (reads first), else row by row. The variant objects were built on the CPU
# machine (nvcc -DFCO_EA_LEAN_CONSUME=1/2; old from 5041c07's header) and carried in build/var —
# embedding_alltoall.o only (impl 0's lookup; the 64 MiB carry limit): every build's fused kernel is v0's.
# fco-bench embedding_alltoall P = 1, impl 0 (its lookup alone), all nine workloads bf16, three f32.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o4; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
for v in old v2; do
  rm -rf build-$v; mkdir -p build-$v; cp -a build/obj build-$v/obj
  for o in embedding_alltoall; do cp build/var/${v}_$o.o build-$v/obj/src/cuda/$o.o; done
  find build-$v/obj -name '*.o' -exec touch {} +
  make -j16 BUILD=build-$v NCCL_HOME=$NCCL_HOME lib tools >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
done
rm -f $O/build.log; el builds
ln -sfn build build-v0
for round in 1 2; do
  for v in old v0 v2; do
    B="build-$v/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0"
    timeout 90 $B -d bf16 -J $O/$v-bf16-$round.json > $O/$v-bf16-$round.txt 2>&1; r1=$?
    FCO_BENCH_EA_WORKLOADS=1,5,8 timeout 60 $B -d f32 -J $O/$v-f32-$round.json > $O/$v-f32-$round.txt 2>&1
    el "round $round $v rc=$r1,$?"
  done
done
pack
python3 - $O <<'PY'
import json, sys, glob, statistics
O = sys.argv[1]
rows = {}
for f in sorted(glob.glob(O + "/*-*-*.json")):
    v = f.split("/")[-1].split("-")[0]
    for r in json.load(open(f))["results"]:
        s = r["shape"]; k = (s["B"], s.get("tables_per_gpu", s.get("T")), s["D"], s["L"], s["dist"][:4], r["dtype"], r["impl"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("workload (B T D L dist dtype impl): median µs over rounds, old / v0 / v1 / v2")
for k in rows:
    m = {v: statistics.median(x) for v, x in rows[k].items()}
    print(" ".join(str(x) for x in k[:6]), f"{k[6]:6s}", " ".join(f"{m.get(v, 0):8.1f}" for v in ("old", "v0", "v1", "v2")))
PY
