#!/bin/bash
# PENDING (session 41: written, the device was not lent again). To run: save HEAD's build/obj/src/cuda/
# embedding_alltoall.o and embedding_alltoall_fused_lean.o as build-old/ea_old.o and build-old/eafl_old.o,
# `git apply bench/results/pending/session41-ragpath/take-index.diff`, `make -j2 lib tools tests` on the CPU
# machine (both embedding TUs rebuild, ~5 min), strip, `tar czf build/carry.tgz build/obj build-old`, then copy
# this script to bench/results/<date>_nvidia-h200_<commit>-ragpath/cmd.sh and run it there (~170 s + start).
# Land the patch only if the table says so (ragged rows the point; the rest within noise).
# Session 41 (one H200): lean_tile's take() gets the weights' ring index instead of its address, so the address
# is computed only with weights (SASS: 9 instructions fewer a chunk in the ragged path, 7 in the even one; a whole
# chunk summed without per-row bounds in the ragged path was tried first and dropped unrun: 28-76 B of spills).
# Both kernels (impl 0's lookup, impl 1's fused lean kernel) share the tile. (1) tests:
# test_embedding_alltoall on local (P = 1..4) and nccl (one rank), test_embedding_alltoall_bad on local; (2)
# fco-bench, libraries `old` (HEAD's embedding_alltoall.o and embedding_alltoall_fused_lean.o, carried in
# build-old/) and `new` (this tree), two interleaved rounds: P = 1 impl 0 and 1, bf16 all nine workloads, f32
# 0,1,5,7,8; local P = 2 bf16 impl 0 and 1, one round. build/obj carried as build/carry.tgz.
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
E=build/obj/src/cuda/embedding_alltoall.o; F=build/obj/src/cuda/embedding_alltoall_fused_lean.o
cp $E /tmp/ea_new.o; cp $F /tmp/fl_new.o
mkdir -p /tmp/lib-old /tmp/lib-new
cp build-old/ea_old.o $E; cp build-old/eafl_old.o $F; touch $E $F
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { echo "link old failed"; tail -5 $O/build.log; }
cp build/lib/libfco.so /tmp/lib-old/
cp /tmp/ea_new.o $E; cp /tmp/fl_new.o $F; touch $E $F
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
cp build/lib/libfco.so /tmp/lib-new/
el builds
FCO_TRANSPORT=local timeout 60 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-local.log 2>&1; el "test_embedding_alltoall_bad local rc=$?"
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr rc=$?"; grep -E "PASS|FAIL" $O/test-ea-$tr.log | head -3
done
pack
mkdir -p $O/ab
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1"
for round in 1 2; do
  for v in old new; do
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 120 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1; r1=$?
    LD_LIBRARY_PATH=/tmp/lib-$v FCO_BENCH_EA_WORKLOADS=0,1,5,7,8 timeout 90 $B -d f32 -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    el "round $round $v rc=$r1,$?"; pack
  done
done
for v in old new; do
  LD_LIBRARY_PATH=/tmp/lib-$v timeout 150 build/bin/fco-bench embedding_alltoall -t local -g 2 -R 3 -n 10 -w 3 -D 0,1 -d bf16 -J $O/ab/$v-local2-1.json > $O/ab/$v-local2-1.txt 2>&1
  el "local P=2 $v rc=$?"; pack
done
python3 - $O <<'PY' | tee $O/table.txt
import json, sys, glob, statistics
O = sys.argv[1]
rows = {}
for f in sorted(glob.glob(O + "/ab/*.json")):
    v, kind = f.split("/")[-1].split("-")[:2]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]; k = ("P2" if kind == "local2" else "P1", s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"], "impl%s" % r["impl"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("median us (P1: two rounds; P2 local: one)".ljust(52) + "     old     new  old/new")
for k, m in sorted(rows.items()):
    if "old" in m and "new" in m:
        a, b = statistics.median(m["old"]), statistics.median(m["new"])
        print(" ".join(str(x) for x in k).ljust(52), f"{a:8.1f}{b:8.1f}{a / b:9.3f}")
PY
pack
