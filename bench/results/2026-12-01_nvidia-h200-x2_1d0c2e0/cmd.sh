#!/bin/bash
# Session 11 run 3 (2xH200): gemm_alltoall with the new 'both' column (GEMM alone ∥ all-to-all
# alone on two streams), in rounds; clocks logged (smi.csv); push-block sweep for chunks.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=1d0c2e0
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
{
  B="build/bin/fco-bench gemm_alltoall -t nccl -g 2 -d bf16 -G 1 -w 2"
  el "all five workloads, -R 5 -n 10, every impl"
  $B -R 5 -n 10 -D 0,1,2,auto -J $OUT/ga.json 2>&1 | grep -E '^ +[0-9]|^# (op|tok)'
  for pb in 8 32 64; do
    el "chunks push blocks $pb, 4096 tokens"
    FCO_GA_PUSH_BLOCKS=$pb FCO_BENCH_GA_SHAPES="4096,14336,4096,8,2" $B -R 3 -n 10 -D 0,2 2>&1 | grep -E '^ +[0-9]'
  done
  el done
} > $OUT/ga.txt 2>&1
kill $SMI
el all done
cat $OUT/ga.txt
