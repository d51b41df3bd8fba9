#!/bin/bash
# Written in session 44 for one H200 (~330 s with a cold start): why the ragged lookup trails the even one.
# At 65536/8/64/8 bf16 (P = 1, impl 0's claimed lookup) the ragged bags (lengths uniform in 0..16) took
# 170 µs against 154 for even bags of 8 — the same gathered bytes (runs 2026-12-05_nvidia-h200_ragpath /
# _wididx) — and issue 4's 75 % of HBM needs ~166. (1) ncu on workloads 1 (even) and 8 (ragged): time,
# DRAM / L2 bytes, instructions, warps active, and the warp-state section (stall reasons a warp issue);
# (2) FCO_EA_LEAN_CHUNKS 4 / 8 (the default at a mean of 8) / 16 on workloads 1, 5, 8 in alternating
# invocations, two rounds, CUDA graphs (on one H100, run 2026-12-05_nvidia-h100-x1_c53ae55, 4 chunks
# were 2.7 % faster than 8 on the even bags and 1.5 % slower on the ragged ones; on the H200 the ncu of
# the ragpath run had 8 ahead). Tree: main as committed; build/obj carried as build/carry.tgz.
# Run: FCO_COMMIT=<commit> bash cmd.sh; copy this script into the run's folder.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O/chunks; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }  # the device tool returns at most 8 files
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
el build
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_op_read_hit_rate.pct,lts__t_sectors_op_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__thread_inst_executed_per_inst_executed.ratio
for w in 1 8; do
  FCO_BENCH_EA_WORKLOADS=$w timeout 90 ncu --clock-control none -k regex:'ea_kernel_lean_stream' -c 1 \
    --metrics $M --section WarpStateStats --section SchedulerStats --csv --page details \
    build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0 > $O/ncu-w$w.csv 2> $O/ncu-w$w.err
  el "ncu w$w rc=$?"; pack
done
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0 -d bf16"
for round in 1 2; do
  for c in 8 4 16; do
    [ $(( $(date +%s) - T0 )) -gt 540 ] && { el "time up at round $round c$c"; break 2; }
    FCO_EA_LEAN_CHUNKS=$c FCO_BENCH_EA_WORKLOADS=1,5,8 timeout 60 $B -J $O/chunks/c$c-$round.json \
      > $O/chunks/c$c-$round.txt 2>&1
    el "round $round chunks $c rc=$?"; pack
  done
done
python3 - $O <<'PY' | tee $O/table.txt
import csv, glob, io, json, statistics, sys
O = sys.argv[1]
for f in sorted(glob.glob(O + "/ncu-*.csv")):
    txt = open(f).read(); i = txt.find('"ID"')
    if i < 0: print(f, "no data"); continue
    print("==", f.split("/")[-1])
    for r in csv.DictReader(io.StringIO(txt[i:])):
        n = r.get("Metric Name", "")
        if n and (r.get("Section Name", "") in ("Warp State Statistics", "Scheduler Statistics", "Command line profiler metrics") or "." in n):
            print("  %-70s %14s %s" % (n, r.get("Metric Value", ""), r.get("Metric Unit", "")))
rows = {}
for f in sorted(glob.glob(O + "/chunks/*.json")):
    c = f.split("/")[-1].split("-")[0]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]; k = "%d/%d/%d/%d %s" % (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4])
        rows.setdefault(k, {}).setdefault(c, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
cs = ["c4", "c8", "c16"]
print("lookup us (median of rounds)".ljust(28) + "".join(c.rjust(9) for c in cs))
for k, m in sorted(rows.items()):
    print(k.ljust(28) + "".join(("%9.1f" % statistics.median(m[c])) if c in m else "        -" for c in cs))
PY
pack
