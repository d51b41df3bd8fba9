#!/bin/bash
# Session 11 run 7 (2xH200): the epoch-limit guard and the per-call error poll on nccl — the
# quick C suite on nccl (test_epoch_limit included), then gemv (M 1, 16) and embedding benches in
# rounds, against the session's earlier numbers.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=ceb7364
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
{
  el "C tests nccl"
  FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=0 timeout 300 tests/run.sh 2>&1 | grep -E "^(PASS|FAIL|SKIP)|passed|failed"
} > $OUT/tests.txt 2>&1
{
  el "gemv bf16 M 1,16 (R 3)"
  FCO_BENCH_GEMV_M=1,16 build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 5 -R 3 2>&1 | grep -v "^# progress" | tail -11
  el "embedding bf16 (R 3)"
  build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -R 3 -D 0,1 2>&1 | grep -v '^# progress' | tail -9
  el done
} > $OUT/bench.txt 2>&1
el all done
cat $OUT/tests.txt $OUT/bench.txt
