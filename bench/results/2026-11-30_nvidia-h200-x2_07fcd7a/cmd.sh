#!/bin/bash
# Session 8 run 3 (2xH200): FCO_EA_LEAN_DYN's SM split swept against the static default in one
# run (bf16, f32), DYN at 4 blocks a SM; no tests (kernels as run 1fc5c61 plus the 4-block kDyn).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
E="build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -n 10 -w 2 -D 1"
v() { # label env...
  local l=$1; shift; el "$l"; timeout 50 env "$@" 2>&1 | grep -v '^# progress'
}
{
  for d in bf16 f32; do
    v "$d static" $E -d $d
    for s in 50 60 70 80; do v "$d DYN SPLIT=$s" FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_SPLIT=$s $E -d $d; done
    v "$d DYN SPLIT=60 BLOCKS=4" FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_SPLIT=60 FCO_EA_LEAN_BLOCKS=4 $E -d $d
    v "$d static BLOCKS=4" FCO_EA_LEAN_BLOCKS=4 $E -d $d
  done
} > $OUT/ea.txt 2>&1
el all done
grep -E '^ +[0-9]|^\[' $OUT/ea.txt | cut -c1-135
