#!/bin/bash
# Session 12 run 13 (1 H200, commit 9d040dc): why the gemv tile costs 2-3 µs more at M = 16 than at
# M = 1 (P = 1, 4096x7168: 20.74 vs 18.15 µs, run 5c6f398's gemv-p1): ncu of impl 1's kernel at
# M = 1, 4, 16 (throughputs, L1/L2 traffic, stalls).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=9d040dc
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_BENCH_GEMV_NK=4096x7168 FCO_BENCH_GEMV_M=1,4,16 timeout 200 ncu --clock-control none -k regex:gemv_allreduce_kernel -c 12 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section LaunchStats --section Occupancy -f -o $OUT/gemv \
  build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 0 -d bf16 -n 1 -w 0 -D 1 > $OUT/ncu-run.txt 2>&1
echo "ncu rc=$?"
ncu -i $OUT/gemv.ncu-rep --page details --print-details all > $OUT/details.txt 2>&1; rm -f $OUT/gemv.ncu-rep
grep -E "^  [a-z].*gemv_allreduce_kernel|^    (Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|L1TEX Hit Rate For Global Loads|L2 Hit Rate For Loads|Stall Long Scoreboard|Stall Math|Stall Wait|Stall Short|Stall Not Selected|Issued Warp Per Scheduler|Achieved Occupancy|Registers Per Thread|Grid Size|Block Size) " $OUT/details.txt | sed -E 's/ +/ /g' | cut -c1-150 | head -120
