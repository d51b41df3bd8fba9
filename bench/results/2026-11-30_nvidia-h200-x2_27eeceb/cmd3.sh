#!/bin/bash
# Session 8 run 8 (2xH200, commit 27eeceb + no code change): ncu of impl 0's lean lookup kernel
# against the fused lean kernel at P = 1 (local transport, one rank: every tile local), bf16,
# workloads 0 (16384/8/128/32) and 3 (zipf).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=27eeceb
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_BENCH_EA_WORKLOADS=0,3 timeout 250 ncu --clock-control none -k regex:'ea_kernel_(lean_stream|fused_lean)' -c 8 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats \
  build/bin/fco-bench embedding_alltoall -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0,1 > $OUT/ncu.txt 2>&1
echo rc=$?
grep -E "ea_kernel|Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Dynamic Shared|Block Limit|Eligible Warps|Issued Warp|No Eligible|Stall|Theoretical Occ|Waves|L1/TEX Cache Throughput|L2 Cache Throughput|Shared Memory Configuration" $OUT/ncu.txt | sed -E 's/ +/ /g' | cut -c1-150 | head -120
