#!/bin/bash
# Session 40 (one H200): the fused lean kernel (impl 1) with session 40's bag store (lean_tile's running output
# pointer) against 837aa28's (its embedding_alltoall_fused_lean.o, carried as build-old/fl_old.o; the rest of the
# library the same), side by side: fco-bench embedding_alltoall impl 1 at P = 1 (nccl, one rank) and on local P = 2,
# bf16 all nine workloads, f32 five; two interleaved rounds. build/obj and build-old carried as build/carry.tgz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=/tmp/o; rm -rf $O; mkdir -p $O/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
F=build/obj/src/cuda/embedding_alltoall_fused_lean.o
mkdir -p /tmp/lib-new /tmp/lib-old; cp build/lib/libfco.so /tmp/lib-new/
cp $F /tmp/fl_new.o; cp build-old/fl_old.o $F; touch $F
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
cp build/lib/libfco.so /tmp/lib-old/
el builds
for round in 1 2; do
  for v in old new; do
    B="build/bin/fco-bench embedding_alltoall -G 1 -R 3 -n 10 -w 3 -D 1"
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 100 $B -t nccl -g 1 -d bf16 -J $O/ab/$v-p1-bf16-$round.json > $O/ab/$v-p1-bf16-$round.txt 2>&1; r1=$?
    LD_LIBRARY_PATH=/tmp/lib-$v FCO_BENCH_EA_WORKLOADS=0,1,5,7,8 timeout 80 $B -t nccl -g 1 -d f32 -J $O/ab/$v-p1-f32-$round.json > $O/ab/$v-p1-f32-$round.txt 2>&1; r2=$?
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 150 $B -t local -g 2 -d bf16 -J $O/ab/$v-l2-bf16-$round.json > $O/ab/$v-l2-bf16-$round.txt 2>&1
    el "round $round $v rc=$r1,$r2,$?"; pack
  done
done
python3 - $O/ab <<'PY'
import json, sys, glob, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    n = f.split("/")[-1].split("-"); v, where = n[0], n[1]
    for r in json.load(open(f))["results"]:
        if r["impl"] != "fused": continue
        s = r["shape"]; k = (where, s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("impl 1 (fused), median us of two rounds                      old      new  old/new")
for k, m in rows.items():
    o, n = statistics.median(m["old"]), statistics.median(m["new"])
    print(" ".join(str(x) for x in k).ljust(56), f"{o:8.1f} {n:8.1f} {o / n:8.3f}")
PY
# Then (same call, what time is left): a dry run of bench/results/pending/x2-session15.sh on one H200 — the two-GPU
# commands on the local transport (-t local -g 2), fewer iterations, the nccl C suite left out, the examples at one
# rank — to find commands that no longer parse or knobs that no longer exist before nvidia-h200-x2 is lent.
# Its archive: $OUT/dry/out.tgz.
sed -e 's/-t nccl -g 2/-t local -g 2/g' -e 's/-n [0-9][0-9]*/-n 2/g' -e 's/-w [0-9]/-w 1/g' -e 's/-R [0-9]/-R 1/g' \
    -e '/tests\/run.sh/d' -e 's/--nproc-per-node 2/--nproc-per-node 1/' bench/results/pending/x2-session15.sh > /tmp/x2dry.sh
mkdir -p $OUT/dry
OUT=$OUT/dry FCO_COMMIT=${FCO_COMMIT:-unknown} timeout 330 bash /tmp/x2dry.sh > /tmp/x2dry.txt 2>&1; echo "dry run rc=$?"
cp /tmp/x2dry.txt /tmp/x2dry.sh /tmp/o/ 2>/dev/null; tar czf $OUT/dry/out.tgz -C /tmp/o . 2>/dev/null
grep -E "rc=|^\[|rror|nknown|invalid" /tmp/x2dry.txt | head -60
