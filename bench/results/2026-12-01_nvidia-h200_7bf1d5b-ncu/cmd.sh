#!/bin/bash
# Session 12 run 2 (1 H200): why is the fused lean embedding kernel slower than impl 0's lookup
# at P = 1 on Zipf bags (302 vs 222 µs bf16, run c32d1a1; ncu there: ~30 % more L2 sector requests
# for the same DRAM bytes)? (1) P = 1 (nccl, one rank: no communication) impl 0 vs fused on Zipf
# and uniform long bags with the fused kernel's knobs; (2) ncu SourceCounters of both kernels on
# Zipf: per-SASS-instruction executions and L2 sectors, to see where the extra requests come from.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=7bf1d5b
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 10 -w 3"
{
  for kv in "X=0" "FCO_EA_LEAN_BLOCKS=3" "FCO_EA_LEAN_DYN=1" "FCO_EA_LEAN_STAGES=4"; do
    el "P=1 $kv"
    env $kv FCO_BENCH_EA_WORKLOADS=0,3 timeout 60 $B 2>&1 | grep -E "^ +[0-9]"
  done
} > $OUT/p1.txt 2>&1
cat $OUT/p1.txt
el "ncu source counters zipf"
FCO_BENCH_EA_WORKLOADS=3 timeout 200 ncu --clock-control none -k regex:'ea_kernel_(lean_stream|fused_lean)' -c 2 \
  --section SourceCounters --section MemoryWorkloadAnalysis_Tables --section SpeedOfLight -f -o $OUT/zipf \
  build/bin/fco-bench embedding_alltoall -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0,1 > $OUT/ncu-run.txt 2>&1
echo "ncu rc=$?"; tail -3 $OUT/ncu-run.txt
ncu -i $OUT/zipf.ncu-rep --page details --print-details all > $OUT/ncu-details.txt 2>&1; echo "details rc=$?"
ncu -i $OUT/zipf.ncu-rep --page source --print-source sass --csv > $OUT/ncu-sass.csv 2>$OUT/ncu-sass.err; echo "sass rc=$?"; head -c 600 $OUT/ncu-sass.err
ncu -i $OUT/zipf.ncu-rep --page source --print-source cuda --csv > $OUT/ncu-cuda.csv 2>$OUT/ncu-cuda.err; echo "cuda rc=$?"; head -c 600 $OUT/ncu-cuda.err
ls -la $OUT; head -c 1500 $OUT/ncu-sass.csv; echo
gzip -k $OUT/ncu-sass.csv $OUT/ncu-cuda.csv 2>/dev/null
grep -E "L2|Hit|Sectors|Duration|Throughput" $OUT/ncu-details.txt | head -60
el all done
