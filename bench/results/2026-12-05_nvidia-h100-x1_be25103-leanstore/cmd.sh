#!/bin/bash
# Session 46, one H200: A/B of the lookup kernel's lean_tile with its pooling a compile-time mode
# (kPool: sum / mean; lean_store: no length, no test at a sum's bag end) against HEAD, and ncu with
# source counters of the new claimed lookup at 65536/8/64/8 bf16, even (workload 1) and ragged (8)
# bags. Tree: main + the change (`git apply lean_store.diff`, in this folder, if main lacks it); on
# the CPU machine: build-old/ = the two embedding objects built before applying it
# (build-old/ea_old.o = embedding_alltoall.o, eafl_old.o = embedding_alltoall_fused_lean.o),
# build/obj = `make lib tools tests` after; both stripped (strip --strip-debug) and carried as
# build/carry.tgz (tar czf build/carry.tgz build/obj build-old). Run: FCO_COMMIT=<commit> bash
# cmd.sh.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=/tmp/o; rm -rf $O; mkdir -p $O/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }  # the device tool returns at most 8 files
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
cmp -s /tmp/lib-old/libfco.so /tmp/lib-new/libfco.so && echo "WARNING: old and new libraries identical"
el builds
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1
  el "test_embedding_alltoall $tr rc=$?"; grep -E "PASS|FAIL" $O/test-ea-$tr.log | head -3
done
FCO_TRANSPORT=local timeout 60 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-local.log 2>&1
el "test_embedding_alltoall_bad local rc=$?"
pack
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1"
for round in 1 2; do
  for v in old new; do
    [ $(( $(date +%s) - T0 )) -gt 420 ] && { el "A/B: time up at round $round $v"; break 2; }
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 120 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1; r1=$?
    LD_LIBRARY_PATH=/tmp/lib-$v FCO_BENCH_EA_WORKLOADS=0,1,7,8 timeout 90 $B -d f32 \
      -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    el "round $round $v rc=$r1,$?"; pack
  done
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
        s = r["shape"]; k = (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"], "impl%s" % r["impl"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("median us of the rounds (P = 1)".ljust(44) + "     old     new  old/new")
for k, m in sorted(rows.items()):
    if "old" in m and "new" in m:
        a, b = statistics.median(m["old"]), statistics.median(m["new"])
        print(" ".join(str(x) for x in k).ljust(44), f"{a:8.1f}{b:8.1f}{a / b:9.3f}")
PY
pack
for w in 1 8; do
  [ $(( $(date +%s) - T0 )) -gt 530 ] && { el "ncu: time up before w$w"; break; }
  FCO_BENCH_EA_WORKLOADS=$w LD_LIBRARY_PATH=/tmp/lib-new timeout 60 ncu --clock-control none \
    -k regex:'ea_kernel_lean_stream' -c 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section InstructionStats --section SourceCounters -f -o $O/w$w \
    build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0 > $O/ncu-run-$w.txt 2>&1
  el "ncu w$w rc=$?"
  ncu -i $O/w$w.ncu-rep --page details --print-details all > $O/details-$w.txt 2>&1
  ncu -i $O/w$w.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $O/sass-$w.csv.gz
  rm -f $O/w$w.ncu-rep; pack
done
for w in 1 8; do echo "=== w$w"; grep -E "Duration|DRAM Throughput|Executed Instructions  |Avg. Active Threads|No Eligible" $O/details-$w.txt | head -8; done
pack
