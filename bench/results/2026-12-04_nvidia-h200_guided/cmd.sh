#!/bin/bash
# Session 41 (one H200): impl 0's claimed lookup with two tile sizes (coarse tiles of FCO_EA_LOOKUP_COARSE × the
# rule's W first, then about FCO_EA_LOOKUP_FINE fine tiles a resident warp; fco_ea_lookup_tiles) and lean_tile's
# bag split by the tile's own bags (⌈nb / groups⌉; the fused kernel shares it). (1) tests: test_ea_plan,
# test_embedding_alltoall_bad (session 40's pending case C: the claimed lookup on bad data) and
# test_embedding_alltoall on local (P = 1..4) and nccl (P = 1); (2) fco-bench P = 1, impl 0, the claimed
# workloads (bags of >= 8 rows: 0,1,2,3,7,8), bf16 and f32 (0,1,7,8): 3a81dfb's lookup (`old`, its
# embedding_alltoall.o carried as build-old/ea_base.o) and this tree at several (coarse, fine), two interleaved
# rounds. build/obj carried as build/carry.tgz. Packs $OUT after every step.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
E=build/obj/src/cuda/embedding_alltoall.o
cp $E /tmp/ea_new.o
mkdir -p /tmp/lib-old /tmp/lib-new
cp build-old/ea_base.o $E; touch $E
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { echo "link old failed"; tail -5 $O/build.log; }
cp build/lib/libfco.so /tmp/lib-old/
cp /tmp/ea_new.o $E; touch $E
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
cp build/lib/libfco.so /tmp/lib-new/
el builds
build/tests/test_ea_plan > $O/test-ea-plan.log 2>&1; el "test_ea_plan rc=$?"
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 100 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-$tr.log 2>&1; el "test_embedding_alltoall_bad $tr rc=$?"; tail -2 $O/test-ea-bad-$tr.log
done
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr rc=$?"; grep -E "PASS|FAIL" $O/test-ea-$tr.log | head -4
done
pack
mkdir -p $O/ab
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0"
VS="old c1f2 c2f2 c4f1 c4f2 c4f4 c8f2 c8f4"
for round in 1 2; do
  for v in $VS; do
    lib=new; c=1; f=2
    if [ $v = old ]; then lib=old; else c=${v#c}; c=${c%f*}; f=${v#*f}; fi
    LD_LIBRARY_PATH=/tmp/lib-$lib FCO_EA_LOOKUP_COARSE=$c FCO_EA_LOOKUP_FINE=$f FCO_BENCH_EA_WORKLOADS=0,1,2,3,7,8 timeout 90 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1; r1=$?
    LD_LIBRARY_PATH=/tmp/lib-$lib FCO_EA_LOOKUP_COARSE=$c FCO_EA_LOOKUP_FINE=$f FCO_BENCH_EA_WORKLOADS=0,1,7,8 timeout 90 $B -d f32 -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    el "round $round $v rc=$r1,$?"; pack
  done
done
grep -h "kernel" $O/ab/c4f2-bf16-1.txt | head -3
python3 - $O "$VS" <<'PY' | tee $O/table.txt
import json, sys, glob, statistics
O, vs = sys.argv[1], sys.argv[2].split()
rows = {}
for f in sorted(glob.glob(O + "/ab/*.json")):
    v = f.split("/")[-1].split("-")[0]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]; k = (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("P = 1, impl 0 (the lookup alone), median us of two rounds".ljust(44) + "".join(f"{v:>8}" for v in vs) + "   best/old")
for k, m in rows.items():
    med = {v: statistics.median(m[v]) for v in vs if v in m}
    best = min((med[v], v) for v in med if v != "old") if len(med) > 1 else (0, "-")
    print(" ".join(str(x) for x in k).ljust(44), "".join(f"{med.get(v, 0):8.1f}" for v in vs), f"{med.get('old', 0) / best[0] if best[0] else 0:7.3f} {best[1]}")
PY
pack
