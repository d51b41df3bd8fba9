#!/bin/bash
# Session 43, one H200: pending/session41-ragpath (the A/B of take-index.diff) and pending/session41-locality (ncu
# on the lookup at HEAD = the "old" library) in one call. Tree: 2209dd5 + take-index.diff (working tree);
# build/obj built on the CPU machine from that tree, build-old/ = 2209dd5's two embedding objects; carried
# as build/carry.tgz. The two scripts as written in session 41 (at 2209dd5: bench/results/pending/
# session41-ragpath/cmd.sh, session41-locality/cmd.sh), except: pytest -m gpu (a subset, see
# below) runs on the old library between them; the locality half runs with LD_LIBRARY_PATH=/tmp/lib-old (HEAD)
# and stops once 555 s have passed.
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
for v in old new; do LD_LIBRARY_PATH=/tmp/lib-$v ldd build/bin/fco-bench | grep libfco; done; readelf -d build/bin/fco-bench | grep -i path
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
# ---- pytest -m gpu on the old (HEAD = 2209dd5) library, without test_gemm_tma and test_op_impl_triton_vs_torch
# (~190 s of Triton compiling, code unchanged since their last GPU pass) ----
left=$(( 420 - ($(date +%s) - T0) )); [ $left -gt 280 ] && left=280
if [ $left -gt 60 ]; then
  FCO_LIB=/tmp/lib-old/libfco.so FCO_TEST_QUICK=1 timeout $left python3 -m pytest tests/python -m gpu -rs -q -p no:cacheprovider \
    --durations=10 -k "not test_gemm_tma and not test_op_impl_triton_vs_torch" > $O/pytest-gpu.log 2>&1
  el "pytest -m gpu rc=$?"; tail -3 $O/pytest-gpu.log
else el "pytest: no time left"; fi
pack
# ---- locality (pending/session41-locality) on the old (HEAD) library ----
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_op_read_hit_rate.pct,lts__t_sectors_op_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active
for v in 1c4 1c8 1c16 1c32 0c8 0c16 0c32 3c16 3c32; do
  [ $(( $(date +%s) - T0 )) -gt 555 ] && { el "locality: time up before $v"; break; }
  w=${v%c*}; c=${v#*c}
  LD_LIBRARY_PATH=/tmp/lib-old FCO_EA_LEAN_CHUNKS=$c FCO_BENCH_EA_WORKLOADS=$w timeout 60 ncu --clock-control none -k regex:'ea_kernel_lean_stream' -c 1 \
    --metrics $M --csv build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0 > $O/ncu-$v.csv 2> $O/ncu-$v.err
  el "ncu $v rc=$?"
  pack
done
python3 - $O <<'PY' | tee $O/locality.txt
import csv, glob, sys, io
O = sys.argv[1]
print(f"{'run':6} {'us':>8} {'DRAM rd MB':>11} {'L2 rd hit %':>11} {'L2 rd MB':>9} {'inst M':>8} {'warps %':>8}")
for f in sorted(glob.glob(O + "/ncu-*.csv")):
    txt = open(f).read()
    i = txt.find('"ID"')
    if i < 0: print(f, "no data"); continue
    rows = list(csv.DictReader(io.StringIO(txt[i:])))
    m = {r["Metric Name"]: (r["Metric Value"].replace(",", ""), r["Metric Unit"]) for r in rows}
    def val(k, scale_to=None):
        v, u = m.get(k, ("nan", ""))
        x = float(v)
        mult = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1e-3, "usecond": 1, "msecond": 1e3}.get(u, 1)
        return x * mult
    name = f.split("ncu-")[-1][:-4]
    print(f"{name:6} {val('gpu__time_duration.sum'):8.1f} {val('dram__bytes_read.sum')/1e6:11.1f} "
          f"{val('lts__t_sector_op_read_hit_rate.pct'):11.1f} {val('lts__t_sectors_op_read.sum')*32/1e6:9.1f} "
          f"{val('smsp__inst_executed.sum')/1e6:8.1f} {val('sm__warps_active.avg.pct_of_peak_sustained_active'):8.1f}")
PY
pack
