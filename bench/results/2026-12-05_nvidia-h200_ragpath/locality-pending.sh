#!/bin/bash
# PENDING (session 41: written, not run; one H200, ~3 min after the start). Tests the hypothesis of run
# 2026-12-04_nvidia-h200_guided: larger lookup tiles are slower on uniform random rows because the warps in flight
# then cover more of the tables (warps × W bags of the table-major order), so fewer rows read twice hit in L2 — not
# because of the launch's tail. ncu (a few metrics, no replay-heavy sections) on impl 0's lean lookup, bf16, P = 1:
# workload 1 (65536/8/64/8, 128 MB tables) at FCO_EA_LEAN_CHUNKS 4 / 8 (default) / 16 / 32, workload 0
# (16384/8/128/32, 256 MB tables) at 8 / 16 (default) / 32, workload 3 (Zipf) at 16 / 32. Read per row: duration,
# DRAM bytes read against the gathered bytes (fco-bench's hbm% numerator: workload 1 bf16 537 MB, workload 0 1074
# MB), the L2 hit rate of the reads. Confirmed if DRAM bytes read and time grow together with the chunks while
# instructions fall. To run: build on the CPU machine at HEAD, strip, `tar czf build/carry.tgz build/obj`, copy this
# script to bench/results/<date>_nvidia-h200_<commit>-locality/cmd.sh and run it with carry build/carry.tgz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=/tmp/o; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_op_read_hit_rate.pct,lts__t_sectors_op_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active
for v in 1c4 1c8 1c16 1c32 0c8 0c16 0c32 3c16 3c32; do
  w=${v%c*}; c=${v#*c}
  FCO_EA_LEAN_CHUNKS=$c FCO_BENCH_EA_WORKLOADS=$w timeout 120 ncu --clock-control none -k regex:'ea_kernel_lean_stream' -c 1 \
    --metrics $M --csv build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0 > $O/ncu-$v.csv 2> $O/ncu-$v.err
  echo "ncu $v rc=$?"
  pack
done
python3 - $O <<'PY' | tee $O/table.txt
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
