#!/bin/bash
# Session 40 (one H200): impl 0's claimed lookup with the next claim issued before a tile is pooled (pf: the atomic's
# latency hidden behind the tile; run 5d2becc-ragncu put ~5-8 % of the stall samples on the claim's SHFL / IMAD)
# against HEAD's claim-then-pool (base), side by side: fco-bench impl 0 at P = 1, bf16 all nine workloads and f32 five,
# the default rule (claimed at >= 8 rows) and FCO_EA_LOOKUP_DYN=1 everywhere (does pf make claims pay on small
# tiles too?), two interleaved rounds; then test_embedding_alltoall on local and nccl with pf. build/obj (HEAD) and
# pf's embedding_alltoall.o (build-old/ea_pf.o) carried as build/carry.tgz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=/tmp/o; rm -rf $O; mkdir -p $O/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
E=build/obj/src/cuda/embedding_alltoall.o
mkdir -p /tmp/lib-base /tmp/lib-pf; cp build/lib/libfco.so /tmp/lib-base/
cp build-old/ea_pf.o $E; touch $E
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
cp build/lib/libfco.so /tmp/lib-pf/
el builds
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0"
for round in 1 2; do
  for v in base pf; do
    for d in rule 1; do
      dv=$d; [ $d = rule ] && dv=-1
      LD_LIBRARY_PATH=/tmp/lib-$v FCO_EA_LOOKUP_DYN=$dv timeout 60 $B -d bf16 -J $O/ab/$v-$d-bf16-$round.json > $O/ab/$v-$d-bf16-$round.txt 2>&1; r1=$?
      LD_LIBRARY_PATH=/tmp/lib-$v FCO_EA_LOOKUP_DYN=$dv FCO_BENCH_EA_WORKLOADS=0,1,5,7,8 timeout 60 $B -d f32 -J $O/ab/$v-$d-f32-$round.json > $O/ab/$v-$d-f32-$round.txt 2>&1
      el "round $round $v $d rc=$r1,$?"
    done
  done
  pack
done
python3 - $O/ab <<'PY'
import json, sys, glob, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    n = f.split("/")[-1].split("-"); v = n[0] + "-" + n[1]
    for r in json.load(open(f))["results"]:
        s = r["shape"]; k = (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
vs = ["base-rule", "pf-rule", "base-1", "pf-1"]
print("impl 0 lookup, P = 1, median us of two rounds              " + "".join(f"{v:>10}" for v in vs) + "  rule b/pf")
for k, m in rows.items():
    med = {v: statistics.median(m[v]) for v in vs if v in m}
    print(" ".join(str(x) for x in k).ljust(52), "".join(f"{med.get(v, 0):10.1f}" for v in vs), f"{med['base-rule'] / med['pf-rule']:8.3f}")
PY
for tr in local nccl; do
  LD_LIBRARY_PATH=/tmp/lib-pf FCO_EA_LOOKUP_DYN=1 FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr (pf, claimed everywhere) rc=$?"; grep -E "^P=|PASS|FAIL" $O/test-ea-$tr.log | head -6
done
pack
