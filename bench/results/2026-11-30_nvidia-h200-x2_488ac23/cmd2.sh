#!/bin/bash
# Session 10 run 4 (2xH200, commit 488ac23): ncu of the gemv fused kernel at P = 1 (local),
# bf16 8192x8192 M = 64, impl 1, grouped tiles (FCO_GEMV_GROUP=4) vs the one-tile kernel (0).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=488ac23
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for gk in 4 0; do
  FCO_GEMV_GROUP=$gk FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=64 timeout 200 ncu --clock-control none -k regex:gemv_allreduce_kernel -c 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
    build/bin/fco-bench gemv_allreduce -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 1 > $OUT/ncu-g$gk.txt 2>&1
  echo "== group $gk rc=$?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Dynamic Shared|Block Limit|Eligible Warps|Issued Warp|No Eligible|Stall|Theoretical Occ|Waves|L1/TEX Cache Throughput|L2 Cache Throughput|Grid Size|Executed Ipc|Mem Pipes|Compute \(SM\)|Shared Memory|Bank|Warp Cycles|One or More|cycles being stalled|est\. speedup|OPT|Mem Busy|Max Bandwidth" $OUT/ncu-g$gk.txt | sed -E 's/ +/ /g' | cut -c1-230 | head -70
done
