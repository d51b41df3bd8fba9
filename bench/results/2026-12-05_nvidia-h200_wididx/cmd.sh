#!/bin/bash
# Session 43, one H200: the landed form of take-index.diff (lean_tile's kWIdx: the index in the claimed
# lookup and the fused kernel, the address in the static lookup; SASS per kernel identical to run
# 2026-12-05_nvidia-h200_ragpath's new (claimed, fused) and old (static) objects) — its tests and one
# bench pass at P = 1. build/obj built on the CPU machine, carried as build/carry.tgz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=$OUT; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
el build
FCO_TRANSPORT=local timeout 60 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-local.log 2>&1; el "test_embedding_alltoall_bad local rc=$?"
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 120 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr rc=$?"
done
timeout 90 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1 -d bf16 -J $O/bench-bf16.json > $O/bench-bf16.txt 2>&1; el "bench rc=$?"
grep -E "^ +[0-9]|wrong" $O/bench-bf16.txt
