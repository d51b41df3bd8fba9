#!/bin/bash
# Session 40 (one H200, HEAD 5d2becc: the lookup claims its tiles at bags of >= 8 rows): run 140d938-ragncu again —
# ncu on impl 0's lean lookup (ea_kernel_lean_stream, now its claimed variant on these workloads), workload 1
# (65536/8/64/8 uniform) and 8 (the same, bag lengths uniform 0..16), bf16, P = 1, and workload 8 again at
# FCO_EA_LEAN_CHUNKS=16 (w8c16): where the ragged tile's remaining time goes. build/obj carried as build/carry.tgz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=/tmp/o2; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for v in 1 8 8c16; do
  w=${v%c16}; c=8; [ $v = 8c16 ] && c=16
  FCO_EA_LEAN_CHUNKS=$c FCO_BENCH_EA_WORKLOADS=$w timeout 200 ncu --clock-control none -k regex:'ea_kernel_lean_stream' -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters -f -o $O/w$v \
    build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0 > $O/ncu-run-$v.txt 2>&1
  echo "ncu w$v rc=$?"; tail -2 $O/ncu-run-$v.txt
  ncu -i $O/w$v.ncu-rep --page details --print-details all > $O/details-$v.txt 2>&1
  ncu -i $O/w$v.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $O/sass-$v.csv.gz
  ncu -i $O/w$v.ncu-rep --page raw --csv 2>/dev/null | gzip > $O/raw-$v.csv.gz
  rm -f $O/w$v.ncu-rep
  pack
done
for v in 1 8 8c16; do echo "=== w$v"; grep -E "Duration|DRAM Throughput|Issue Slots Busy|Issued Ipc|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Avg. Active Threads|Avg. Not Predicated|Executed Instructions  |Achieved Occupancy|Registers Per|Function Name|Grid Size" $O/details-$v.txt | head -30; done
