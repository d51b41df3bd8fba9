#!/bin/bash
# Written in session 48 for one GPU (~300 s with a cold start): where the fused kernel's P = 1 gap to the
# lookup comes from. Run 2026-12-05_nvidia-h100-x1_571244b-fkpool (one H100, bf16, P = 1): impl 1 (the
# fused lean kernel) trails impl 0 (the lean lookup alone, straight into out) by 2.5–7.3 µs on every
# workload, long bags included (ragged 65536/8/64/8 223.9 vs 217.9, even 215.6 vs 212.7, 262144/4/16/2
# 100.1 vs 93.0) — at one rank both are one kernel. (1) ncu of both kernels on workloads 1 (even
# 65536/8/64/8), 8 (ragged), 4 (65536/8/64/1), 6 (262144/4/16/2): duration, launch shape, registers,
# occupancy, instructions, DRAM bytes, active cycles; (2) FCO_EA_PROFILE=1: the fused kernel's block
# timeline (start / pools done / end) on workloads 1, 4, 8; (3) fco-bench impl 0 / 1 with B divided by
# 1, 16, 256 (FCO_BENCH_EA_BATCH_DIV) on workloads 1, 4, 8, two rounds: the gap's fixed part.
# Tree: main as committed; build/obj carried as build/carry.tgz (built at the commit run).
# Run: FCO_COMMIT=<commit> bash cmd.sh; copy this script into the run's folder.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O/div $O/prof; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }  # the device tool returns at most 8 files
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
el build
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.avg,gpc__cycles_elapsed.max,lts__t_sectors_op_read.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum
for w in 1 8 4 6; do
  FCO_BENCH_EA_WORKLOADS=$w timeout 120 ncu --clock-control none -k regex:'ea_kernel_lean_stream|ea_kernel_fused_lean' \
    -c 4 --metrics $M --csv --page details \
    build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0,1 > $O/ncu-w$w.csv 2> $O/ncu-w$w.err
  el "ncu w$w rc=$?"; pack
done
for w in 1 4 8; do
  FCO_EA_PROFILE=1 FCO_BENCH_EA_WORKLOADS=$w timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 \
    -G 0 -n 3 -w 1 -d bf16 -D 1 > $O/prof/w$w.txt 2> $O/prof/w$w.err
  el "profile w$w rc=$?"
done
pack
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1 -d bf16"
for round in 1 2; do
  for div in 1 16 256; do
    [ $(( $(date +%s) - T0 )) -gt 500 ] && { el "time up at round $round div $div"; break 2; }
    FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,4,8 timeout 60 $B -J $O/div/d$div-$round.json \
      > $O/div/d$div-$round.txt 2>&1
    el "round $round div $div rc=$?"
  done
  pack
done
python3 - $O <<'PY' | tee $O/table.txt
import csv, glob, io, json, statistics, sys
O = sys.argv[1]
for f in sorted(glob.glob(O + "/ncu-*.csv")):
    txt = open(f).read(); i = txt.find('"ID"')
    if i < 0: print(f, "no data"); continue
    print("==", f.split("/")[-1])
    cols = {}
    for r in csv.DictReader(io.StringIO(txt[i:])):
        k = "%s %s" % (r.get("ID"), r.get("Kernel Name", "")[:22])
        cols.setdefault(k, {})[r.get("Metric Name", "")] = r.get("Metric Value", "")
    names = sorted({n for c in cols.values() for n in c})
    print("  %-58s" % "" + "".join(k[:24].rjust(26) for k in cols))
    for n in names:
        print("  %-58s" % n + "".join(c.get(n, "-").rjust(26) for c in cols.values()))
for f in sorted(glob.glob(O + "/prof/*.err")):
    print("==", f.split("/")[-1])
    for l in open(f):
        if "ea-prof" in l: print("  " + l.strip()[:180])
rows = {}
for f in sorted(glob.glob(O + "/div/*.json")):
    d = f.split("/")[-1].split("-")[0]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]; k = "%s %d/%d/%d/%d %s impl%s" % (d, s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["impl"])
        rows.setdefault(k, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("== fco-bench P = 1, bf16, graphs: median of rounds, us")
for k, v in sorted(rows.items()):
    print("  %-50s %9.2f   (%s)" % (k, statistics.median(v), " ".join("%.2f" % x for x in v)))
PY
pack
