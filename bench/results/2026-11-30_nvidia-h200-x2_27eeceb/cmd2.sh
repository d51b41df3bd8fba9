#!/bin/bash
# Session 8 run 7 (2xH200, same commit 27eeceb): one rank (P = 1: every tile local) — the fused
# lean kernel's pooling against impl 0's lookup kernel in one run, 3 and 4 blocks a SM.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=27eeceb
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
E="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -n 10 -w 2 -D 0,1"
{
  for d in bf16 f32; do echo "== $d P=1"; timeout 60 $E -d $d 2>&1 | grep -E '^ +[0-9]|^# +B'; done
  echo "== bf16 P=1 FCO_EA_LEAN_BLOCKS=4"; FCO_EA_LEAN_BLOCKS=4 timeout 60 $E -d bf16 2>&1 | grep -E '^ +[0-9]'
  echo "== bf16 P=1 FCO_EA_LEAN_DYN=0"; FCO_EA_LEAN_DYN=0 timeout 60 $E -d bf16 2>&1 | grep -E '^ +[0-9]'
} > $OUT/p1.txt 2>&1
cut -c1-140 $OUT/p1.txt
