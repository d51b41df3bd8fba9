#!/bin/bash
# Session 11 run 6 (1 H200: nvidia-h200-x2 was not lent at this point): the epoch-limit guard touches every kernel's prologue and every
# call's submission: the whole quick C suite on local (P virtual ranks on one GPU) (test_epoch_limit included), the
# Triton GPU tests, and a gemv / allreduce bench to see that the prologue costs nothing.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=e0a4247
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
{
  for t in local; do
    el "C tests $t"
    FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=0 timeout 280 tests/run.sh 2>&1 | grep -E "^(PASS|FAIL|SKIP)|passed|failed"
  done
} > $OUT/tests.txt 2>&1
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
{
  el "pytest gpu triton + gemv"
  timeout 200 python3 -m pytest tests/python -m gpu -k "triton or gemv" -x -q -p no:cacheprovider 2>&1 | tail -6
} > $OUT/pytest.txt 2>&1
{
  el "gemv bf16 M 1,16 (R 3)"
  FCO_BENCH_GEMV_M=1,16 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 20 -w 5 -R 3 2>&1 | grep -v "^# progress" | tail -12
  el "allreduce bf16 (R 3)"
  build/bin/fco-bench allreduce -t local -g 2 -G 1 -d bf16 -b 4K -e 4M -f 4 -n 20 -w 5 -R 3 2>&1 | tail -9
} > $OUT/bench.txt 2>&1
el all done
cat $OUT/tests.txt $OUT/pytest.txt $OUT/bench.txt
