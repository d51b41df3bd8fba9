#!/bin/bash
# Session 9 run 5 (2xH200, commit 5d02c14 + two older trees from git archive): which commit made
# gemm_alltoall impl 2 (chunks) slower — c32d1a1 (before this session) and ca68d4e (early in
# session 6) built beside HEAD, their gemm benches (-D 0,2) in one run.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j8 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for c in c32d1a1 ca68d4e; do
  (cd build/old-$c && make -j12 NCCL_HOME=$NCCL_HOME lib tools > $OUT/build-$c.log 2>&1; echo "$c rc=$?") &
done
wait
el built
G="gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 -D 0,2"
for c in HEAD c32d1a1 ca68d4e HEAD; do
  B=build/bin/fco-bench; [ $c != HEAD ] && B=build/old-$c/build/bin/fco-bench
  el "chunks $c"; FCO_COMMIT=$c timeout 90 $B $G 2>&1 | grep -E '^ +[0-9]|rror' | cut -c1-110
done
el all done
