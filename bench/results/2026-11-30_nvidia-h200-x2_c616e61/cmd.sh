#!/bin/bash
# Session 10 run 13 (2xH200, commit c616e61): closing run of the grouped gemv tiles (wgmma, sm_90a build of
# gemv_allreduce.cu): the whole gemv test (quick) on local and nccl,
# the embedding test (quick, local),
# fco-bench gemv_allreduce at every listed M (impls 0, 1, 3, auto), FCO_GEMV_GROUP=0 for M = 64.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=c616e61
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
B="build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -D 0,1,3,auto"
el bench; timeout 120 $B > $OUT/gemv.txt 2>&1; echo rc=$?
el "bench group=0 M=64"; FCO_GEMV_GROUP=0 FCO_BENCH_GEMV_M=64 timeout 60 $B > $OUT/gemv-g0.txt 2>&1; echo rc=$?
for t in local nccl; do
  el "test gemv $t"; FCO_TEST_QUICK=1 FCO_TRANSPORT=$t timeout 200 build/tests/test_gemv_allreduce > $OUT/test-gemv-$t.txt 2>&1; echo rc=$?; tail -2 $OUT/test-gemv-$t.txt
done
el "test embedding local"; FCO_TEST_QUICK=1 FCO_TRANSPORT=local timeout 120 build/tests/test_embedding_alltoall > $OUT/test-ea-local.txt 2>&1; echo rc=$?; tail -2 $OUT/test-ea-local.txt
el all done
for f in gemv gemv-g0; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|^#.*N ' $OUT/$f.txt | cut -c1-180; done
