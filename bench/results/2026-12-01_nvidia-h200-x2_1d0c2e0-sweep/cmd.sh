#!/bin/bash
# Session 11 run 4 (2xH200, commit 1d0c2e0): gemm_alltoall chunks, push blocks × chunk rows sweep at
# K 14336 (FCO_GA_PUSH_BLOCKS, FCO_GA_CHUNK_ROWS), in rounds.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=1d0c2e0
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
{
  export FCO_BENCH_GA_SHAPES="4096,14336,4096,8,2;1024,14336,4096,8,2;1024,14336,4096,8,2,4"
  B="build/bin/fco-bench gemm_alltoall -t nccl -g 2 -d bf16 -G 1 -w 2 -R 3 -n 10 -D 0,2"
  for pb in 48 64 96 132; do
    for cr in 0 1024 512; do
      el "push blocks $pb chunk rows $cr"
      if [ $cr = 0 ]; then FCO_GA_PUSH_BLOCKS=$pb $B 2>&1 | grep -E '^ +[0-9]'
      else FCO_GA_PUSH_BLOCKS=$pb FCO_GA_CHUNK_ROWS=$cr $B 2>&1 | grep -E '^ +[0-9]'; fi
    done
  done
  el done
} > $OUT/ga.txt 2>&1
el all done
cat $OUT/ga.txt
