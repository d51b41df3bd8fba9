#!/bin/bash
# Session 12 run 7 (1 H200, commit 5c6f398): where the fused lean kernel's extra time goes on
# short bags at P = 1 (65536/8/64/8 bf16: static order 172 µs vs the lookup's 161): ncu of both
# kernels (the fused one with FCO_EA_LEAN_DYN=0 and =1), per-instruction source counters.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=5c6f398
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
prof() { # name kernel-regex env...
  local n=$1 k=$2; shift 2
  env "$@" FCO_BENCH_EA_WORKLOADS=1 timeout 120 ncu --clock-control none -k regex:$k -c 1 \
    --section SourceCounters --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy -f -o $OUT/$n \
    build/bin/fco-bench embedding_alltoall -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0,1 > $OUT/$n-run.txt 2>&1
  ncu -i $OUT/$n.ncu-rep --page details --print-details all > $OUT/$n-details.txt 2>&1
  ncu -i $OUT/$n.ncu-rep --page source --print-source sass --csv 2>&1 | gzip > $OUT/$n-sass.csv.gz
  rm -f $OUT/$n.ncu-rep
  echo "== $n"; grep -E "^    (Duration|Registers Per Thread|Achieved Occupancy|Executed Instructions |Stall Long Scoreboard|Stall Barrier|Stall Wait|Stall Branch)" $OUT/$n-details.txt | head -12
}
prof lookup 'ea_kernel_lean_stream' X=0
prof static 'ea_kernel_fused_lean' FCO_EA_LEAN_DYN=0
prof claimed 'ea_kernel_fused_lean' FCO_EA_LEAN_DYN=1
