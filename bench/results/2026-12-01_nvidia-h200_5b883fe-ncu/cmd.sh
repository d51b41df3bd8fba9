#!/bin/bash
# Session 14 run 6 (1 H200, commit 5b883fe): ncu of the operator's grouped wgmma kernel (one kernel per
# tile since 033b296) at P = 1, 8192×8192 M = 64, next to cuBLAS's and the probe's lib_kernel (the
# same tile alone: 40.6 µs back to back against the operator's 50.0 per call, run 033b296).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=5b883fe
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p /tmp/o; O=/tmp/o
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats"
FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=64 timeout 200 ncu --clock-control none -k regex:. -c 10 $SEC -f -o $O/op \
  build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 0 -d bf16 -n 1 -w 0 -D 0,1 > $O/ncu-op.txt 2>&1
echo "ncu op rc=$?"
timeout 200 ncu --clock-control none -k regex:lib_kernel -c 1 $SEC -f -o $O/probe build/probe/gemv_group_probe 1 > $O/ncu-probe.txt 2>&1
echo "ncu probe rc=$?"
ncu -i $O/op.ncu-rep --page details --print-details all > $O/details-op.txt 2>&1
ncu -i $O/probe.ncu-rep --page details --print-details all > $O/details-probe.txt 2>&1
rm -f $O/*.ncu-rep
tar czf $OUT/out.tgz -C $O .
for f in $O/details-op.txt $O/details-probe.txt; do echo "==== $f"
grep -E "^  [A-Za-z_].*\(|^    (Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Stall Long Scoreboard|Stall Barrier|Stall Wait|Issued Warp Per Scheduler|No Eligible|Registers Per Thread|Grid Size|Block Size|Dynamic Shared) " $f | sed -E 's/ +/ /g' | cut -c1-150 | head -60
done
