#!/bin/bash
# Session 11 run 1 (2xH200): verify the embedding impl 0 barrier (823b213) on nccl P = 2,
# re-measure embedding impl 0 / fused (bf16), and a timeline of gemm_alltoall impl 2 at K 14336
# (trace.patch: FCO_GA_TRACE=1, uncommitted diagnostic).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=86c73ab-trace
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
{
  B="build/bin/fco-bench gemm_alltoall -t nccl -g 2 -d bf16"
  el "trace chunks 4096"
  FCO_BENCH_GA_SHAPES="4096,14336,4096,8,2" FCO_GA_TRACE=1 $B -G 0 -n 4 -w 1 -D 2 2>&1 | grep -E 'TRACE|^ +[0-9]'
  el "trace chunks 1024 skew"
  FCO_BENCH_GA_SHAPES="1024,14336,4096,8,2,4" FCO_GA_TRACE=1 $B -G 0 -n 4 -w 1 -D 2 2>&1 | grep -E 'TRACE|^ +[0-9]'
  el "plain K 14336 -n 20"
  FCO_BENCH_GA_SHAPES="4096,14336,4096,8,2;1024,14336,4096,8,2;1024,14336,4096,8,2,4" $B -G 1 -n 20 -w 2 -D 0,1,2,auto 2>&1 | grep -E '^ +[0-9]|^#.*(tokens|gemm)'
  el done
} > $OUT/ga.txt 2>&1
{
  for t in nccl local; do
    el "embedding test $t"
    FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=0 tests/run.sh test_embedding_alltoall 2>&1 | tail -4
  done
} > $OUT/tests.txt 2>&1
{
  el "embedding bf16 -D 0,1"
  build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -D 0,1 2>&1 | grep -v '^# progress' | tail -12
  el done
} > $OUT/ea.txt 2>&1
el all done
for f in tests ga ea; do echo "== $f"; tail -30 $OUT/$f.txt; done
