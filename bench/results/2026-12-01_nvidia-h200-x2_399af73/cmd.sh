#!/bin/bash
# Session 11 run 5 (2xH200): gemm_alltoall with the new chunk defaults — test (quick, nccl and
# local), the plain bench in rounds (ordinary and symmetric outs), every impl + AUTO.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=399af73
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
{
  B="build/bin/fco-bench gemm_alltoall -t nccl -g 2 -d bf16 -G 1 -w 2 -R 5 -n 10 -D 0,1,2,auto"
  el "ordinary out"
  $B -J $OUT/ga-sym0.json 2>&1 | grep -E '^ +[0-9]|^# (op|tok)'
  el "symmetric out"
  FCO_BENCH_SYM=1 $B -J $OUT/ga-sym1.json 2>&1 | grep -E '^ +[0-9]|^# (op|tok)'
  el done
} > $OUT/ga.txt 2>&1
{
  for t in nccl local; do
    el "gemm test $t"
    FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=0 tests/run.sh test_gemm_alltoall 2>&1 | tail -3
  done
} > $OUT/tests.txt 2>&1
el all done
cat $OUT/ga.txt $OUT/tests.txt
