#!/bin/bash
# Session 38 (one H200): the standard GPU script's embedding bench and the torch steps at HEAD (the lean tile's row
# split for ragged tiles) — fco-bench embedding_alltoall on local P = 2 and nccl P = 1 (CUDA graphs), targets.py on the
# P = 1 JSONs, the torch scripts and the three examples at one rank. Tests: run ..._2a0ceda-even.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
find build/obj -name '*.o' -exec touch {} +
OUT=/tmp/o1 FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_PREBUILT=1 FCO_GPU_OPS=embedding_alltoall FCO_GPU_BUDGET=570 bash tests/gpu/run.sh > /tmp/run.txt 2>&1
echo "run.sh rc=$?"
cp /tmp/run.txt /tmp/o1/run.txt
tar czf $OUT/out.tgz -C /tmp/o1 .
sed -n '/=== targets ===/,$p' /tmp/run.txt | cut -c1-200 | tail -80
