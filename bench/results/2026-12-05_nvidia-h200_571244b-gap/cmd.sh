#!/bin/bash
# Session 48, second call (~120 s warm): the fixed part of the fused kernel's P = 1 gap at B / 256
# (run 1 of this folder: 256/8/64/1 fused 8.53 vs lookup 3.76 µs, ragged 256/8/64/8 15.20 vs 8.17).
# (1) ncu duration / launch shape of both kernels at B / 256, workloads 4 and 8; (2) FCO_EA_PROFILE=1
# timeline there; (3) fco-bench at B / 256 and B / 16 with the fused kernel's static order
# (FCO_EA_LEAN_DYN=0) and 3 / 4 blocks a SM (FCO_EA_LEAN_BLOCKS) beside the default, two rounds.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o2; rm -rf $O; mkdir -p $O/knob $O/prof; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
if [ ! -x build/bin/fco-bench ]; then
  tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
  make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
fi
el build
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,sm__cycles_active.avg,gpc__cycles_elapsed.max,smsp__inst_executed.sum,lts__t_sectors_op_atom.sum
for w in 4 8; do
  FCO_BENCH_EA_BATCH_DIV=256 FCO_BENCH_EA_WORKLOADS=$w timeout 120 ncu --clock-control none \
    -k regex:'ea_kernel_lean_stream|ea_kernel_fused_lean' -c 4 --metrics $M --csv --page details \
    build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0,1 > $O/ncu-w$w.csv 2> $O/ncu-w$w.err
  el "ncu w$w rc=$?"
  FCO_EA_PROFILE=1 FCO_BENCH_EA_BATCH_DIV=256 FCO_BENCH_EA_WORKLOADS=$w timeout 60 build/bin/fco-bench \
    embedding_alltoall -t nccl -g 1 -G 0 -n 3 -w 1 -d bf16 -D 1 > $O/prof/w$w.txt 2> $O/prof/w$w.err
  el "profile w$w rc=$?"
done
pack
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 20 -w 3 -d bf16"
for round in 1 2; do
  for div in 256 16; do
    for k in def dyn0 blk3 blk4; do
      case $k in def) E="";; dyn0) E="FCO_EA_LEAN_DYN=0";; blk3) E="FCO_EA_LEAN_BLOCKS=3";; blk4) E="FCO_EA_LEAN_BLOCKS=4";; esac
      D=1; [ $k = def ] && D=0,1
      env $E FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,4,8 timeout 60 $B -D $D \
        -J $O/knob/$k-d$div-$round.json > $O/knob/$k-d$div-$round.txt 2>&1
      el "round $round div $div $k rc=$?"
    done
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
    for n in sorted({n for c in cols.values() for n in c}):
        print("  %-40s" % n + "".join(c.get(n, "-").rjust(16) for c in cols.values()))
for f in sorted(glob.glob(O + "/prof/*.err")):
    print("==", f.split("/")[-1])
    for l in open(f):
        if "ea-prof" in l: print("  " + l.strip()[:180])
rows = {}
for f in sorted(glob.glob(O + "/knob/*.json")):
    kn, d = f.split("/")[-1].split("-")[:2]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]; k = "%s %d/%d/%d/%d %s %s %s" % (d, s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["impl"], kn)
        rows.setdefault(k, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("== fco-bench P = 1, bf16, graphs: median of rounds, us")
for k, v in sorted(rows.items()):
    print("  %-50s %9.2f   (%s)" % (k, statistics.median(v), " ".join("%.2f" % x for x in v)))
PY
pack
