#!/bin/bash
# Session 40 (one H200): impl 0's lean lookup with claimed tiles (FCO_EA_LOOKUP_DYN, a queue in the rank's
# device state set back to 0 by the launch's last claim) and the bag store's running output pointer
# (lean_tile's flush: no multiply, no shared-memory read for sum pooling), against the lookup before (837aa28's
# embedding_alltoall.o, carried as build-old/ea_old.o) and the flush with the multiply (build-old/ea_v2.o, same
# tree, the header without the running pointer). (1) session 39's pending tests (test_embedding_alltoall_bad on
# local and nccl: a bad index's own weight NaN / Inf) and test_embedding_alltoall on local (P = 1..4) and nccl,
# claimed (the default) and static; (2) fco-bench P = 1, impl 0 (and impl 1: its tile has the new flush too),
# libraries old / v2 / new static / new claimed, two interleaved rounds; (3) FCO_EA_LEAN_CHUNKS 8 / 16 on
# 65536/8/64/8 even and ragged with the claimed order. build/obj carried (built on the CPU machine). Packs $OUT
# after every step.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
E=build/obj/src/cuda/embedding_alltoall.o
cp $E /tmp/ea_new.o
for v in old v2; do
  mkdir -p /tmp/lib-$v; cp build-old/ea_$v.o $E; touch $E
  make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { echo "link $v failed"; tail -5 $O/build.log; }
  cp build/lib/libfco.so /tmp/lib-$v/
done
cp /tmp/ea_new.o $E; touch $E
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
mkdir -p /tmp/lib-new; cp build/lib/libfco.so /tmp/lib-new/
el builds
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 100 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-$tr.log 2>&1; el "test_embedding_alltoall_bad $tr rc=$?"; tail -2 $O/test-ea-bad-$tr.log
done
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr rc=$?"; grep -E "^P=|PASS|FAIL" $O/test-ea-$tr.log | head -8
done
FCO_EA_LOOKUP_DYN=0 FCO_TRANSPORT=local timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-local-static.log 2>&1; el "test_embedding_alltoall local static rc=$?"; tail -2 $O/test-ea-local-static.log
pack
mkdir -p $O/ab
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3"
for round in 1 2; do
  for v in old v2 new0 new1; do
    lib=${v%[01]}; dyn=1; [ $v = new0 ] && dyn=0
    LD_LIBRARY_PATH=/tmp/lib-$lib FCO_EA_LOOKUP_DYN=$dyn timeout 120 $B -D 0,1 -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1; r1=$?
    LD_LIBRARY_PATH=/tmp/lib-$lib FCO_EA_LOOKUP_DYN=$dyn FCO_BENCH_EA_WORKLOADS=0,1,5,7,8 timeout 90 $B -D 0 -d f32 -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    el "round $round $v rc=$r1,$?"; pack
  done
done
grep -h "kernel" $O/ab/new1-bf16-1.txt | head -3
mkdir -p $O/chunks
for round in 1 2; do
  for c in 8 16; do
    for dyn in 0 1; do
      FCO_EA_LOOKUP_DYN=$dyn FCO_EA_LEAN_CHUNKS=$c FCO_BENCH_EA_WORKLOADS=1,8 timeout 60 $B -D 0 -d bf16 -J $O/chunks/c$c-d$dyn-$round.json > $O/chunks/c$c-d$dyn-$round.txt 2>&1
    done
  done
done
el chunks; pack
python3 - $O <<'PY'
import json, sys, glob, statistics
O = sys.argv[1]
def load(pat, keyf):
    rows = {}
    for f in sorted(glob.glob(O + pat)):
        v = keyf(f.split("/")[-1])
        for r in json.load(open(f))["results"]:
            s = r["shape"]; k = (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"], r["impl"])
            rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
            if r.get("wrong"): print("WRONG", f, k, r["wrong"])
    return rows
vs = ["old", "v2", "new0", "new1"]
rows = load("/ab/*.json", lambda n: n.split("-")[0])
print("P = 1, median us of two rounds; impl 0 = the lookup alone      " + "".join(f"{v:>9}" for v in vs) + "  old/new1")
for k, m in rows.items():
    med = {v: statistics.median(m[v]) for v in vs if v in m}
    print(" ".join(str(x) for x in k).ljust(60), "".join(f"{med.get(v, 0):9.1f}" for v in vs), f"{med['old'] / med['new1']:8.3f}" if 'old' in med and 'new1' in med else "")
ch = load("/chunks/*.json", lambda n: n.split("-")[0] + "-" + n.split("-")[1])
cs = ["c8-d0", "c8-d1", "c16-d0", "c16-d1"]
print("impl 0, bf16, chunks / claimed                                 " + "".join(f"{v:>9}" for v in cs))
for k, m in ch.items():
    print(" ".join(str(x) for x in k).ljust(60), "".join(f"{statistics.median(m[v]) if v in m else 0:9.1f}" for v in cs))
PY
