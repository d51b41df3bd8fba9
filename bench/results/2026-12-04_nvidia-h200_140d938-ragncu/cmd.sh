#!/bin/bash
# Session 39 (one H200, HEAD 140d938: the row split): where ragged bags cost impl 0's lean lookup (ea_kernel_lean_stream) its time.
# ncu on workload 1 (65536/8/64/8 uniform) and 8 (same, bag lengths uniform 0..16), bf16, P = 1:
# speed of light, warp states (stall reasons), scheduler (issue slots), instruction stats and
# source counters (active threads an instruction: divergence).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o2; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for w in 1 8; do
  FCO_BENCH_EA_WORKLOADS=$w timeout 200 ncu --clock-control none -k regex:'ea_kernel_lean_stream' -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters -f -o $O/w$w \
    build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0 > $O/ncu-run-$w.txt 2>&1
  echo "ncu w$w rc=$?"; tail -2 $O/ncu-run-$w.txt
  ncu -i $O/w$w.ncu-rep --page details --print-details all > $O/details-$w.txt 2>&1
  ncu -i $O/w$w.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $O/sass-$w.csv.gz
  ncu -i $O/w$w.ncu-rep --page raw --csv 2>/dev/null | gzip > $O/raw-$w.csv.gz
done
pack
for w in 1 8; do echo "=== w$w"; grep -E "Duration|DRAM Throughput|Issue Slots Busy|Issued Ipc|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Avg. Active Threads|Avg. Not Predicated|Executed Instructions  |Branch Instructions|Divergent|Achieved Occupancy|Registers Per" $O/details-$w.txt | head -30; done
