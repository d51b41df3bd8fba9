#!/bin/bash
# Session 13 run 4 (1 H200, commit 0b0b1f7): the LL one-shot's single store path — test_gemv_allreduce
# (full, not quick) on local, P 1..4; then ncu at P = 1 of 8192x8192 M = 64: impl 1's grouped
# wgmma kernel against impl 0's cuBLAS kernel (why the grouped tile is ~1.4x cuBLAS there).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=0b0b1f7
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p /tmp/o; O=/tmp/o
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 VERBOSE=1 timeout 280 tests/run.sh test_gemv_allreduce > $O/tests.txt 2>&1
grep -E "^(PASS|FAIL)|passed" $O/tests.txt
FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=64 timeout 200 ncu --clock-control none -k regex:. -c 10 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats -f -o $O/m64 \
  build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 0 -d bf16 -n 1 -w 0 -D 0,1 > $O/ncu-run.txt 2>&1
echo "ncu rc=$?"
ncu -i $O/m64.ncu-rep --page details --print-details all > $O/details.txt 2>&1; rm -f $O/m64.ncu-rep
tar czf $OUT/out.tgz -C $O .
grep -E "^  [A-Za-z_].*\(|^    (Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|L1TEX Hit Rate For Global Loads|L2 Hit Rate|Stall Long Scoreboard|Stall Barrier|Stall Math|Stall Wait|Stall Short|Stall Not Selected|Issued Warp Per Scheduler|No Eligible|Achieved Occupancy|Registers Per Thread|Grid Size|Block Size|Dynamic Shared) " $O/details.txt | sed -E 's/ +/ /g' | cut -c1-150 | head -150
