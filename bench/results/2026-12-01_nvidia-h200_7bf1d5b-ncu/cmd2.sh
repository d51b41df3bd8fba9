#!/bin/bash
# Session 12 run 3 (1 H200): run 2's ncu matched impl 0's lookup twice (-c 2); this profiles the
# fused lean kernel alone (same Zipf workload, P = 1, same sections), and times P = 1 once more.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=7bf1d5b
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_BENCH_EA_WORKLOADS=3 timeout 200 ncu --clock-control none -k regex:'ea_kernel_fused_lean' -c 1 \
  --section SourceCounters --section MemoryWorkloadAnalysis_Tables --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats -f -o $OUT/zipf-fused \
  build/bin/fco-bench embedding_alltoall -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0,1 > $OUT/ncu-run.txt 2>&1
echo "ncu rc=$?"; tail -3 $OUT/ncu-run.txt
ncu -i $OUT/zipf-fused.ncu-rep --page details --print-details all > $OUT/ncu-details-fused.txt 2>&1; echo "details rc=$?"
ncu -i $OUT/zipf-fused.ncu-rep --page source --print-source sass --csv > $OUT/ncu-sass-fused.csv 2>&1; echo "sass rc=$?"
ncu -i $OUT/zipf-fused.ncu-rep --page source --print-source cuda --csv > $OUT/ncu-cuda-fused.csv 2>&1; echo "cuda rc=$?"
gzip $OUT/ncu-sass-fused.csv; rm -f $OUT/zipf-fused.ncu-rep
grep -E "Duration|L2 Hit|L1TEX Hit Rate For Global Loads|L2 Theoretical Sectors Global |Registers|Achieved Occupancy|Block Limit" $OUT/ncu-details-fused.txt | head -30
