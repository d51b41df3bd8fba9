#!/bin/bash
# Session 12 run 1 (1 H200; nvidia-h200-x2 not lent at the start): what session 11 wrote after its
# last device call. (1) test_gemm_alltoall on local, default and with the impl 2 early landing
# (FCO_GA_LAND_EARLY=1; 0474163 changed the default path a little too); (2) fco-bench gemm_alltoall
# on local with the early landing for #wrong on every workload; (3) pytest: fco.triton into
# symmetric outputs (test_symmetric_outputs); (4) bench/probe/gemv_group_probe (M = 64 grouped tile
# on TMA + mbarriers vs the library's tile vs cuBLAS vs reading W); (5) gemv / embedding benches on
# local with the new `both` column.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=7bf1d5b
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
{
  el "test_gemm_alltoall local default"
  FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=1 timeout 200 tests/run.sh test_gemm_alltoall 2>&1 | tail -15
  el "test_gemm_alltoall local FCO_GA_LAND_EARLY=1"
  FCO_GA_LAND_EARLY=1 FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=1 timeout 200 tests/run.sh test_gemm_alltoall 2>&1 | tail -15
} > $OUT/tests.txt 2>&1
{
  el "probe gemv_group"
  timeout 120 build/probe/gemv_group_probe 30 2>&1
} > $OUT/probe.txt 2>&1
{
  el "gemm local LAND_EARLY=1 -D 0,2"
  FCO_GA_LAND_EARLY=1 timeout 120 build/bin/fco-bench gemm_alltoall -t local -g 2 -d bf16 -D 0,2 -n 3 -w 1 2>&1 | grep -v "^# progress" | tail -14
  el "gemv local bf16 M 1,64 (both)"
  FCO_BENCH_GEMV_M=1,64 timeout 120 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 20 -w 5 2>&1 | grep -v "^# progress" | tail -14
  el "embedding local f32 (both)"
  timeout 150 build/bin/fco-bench embedding_alltoall -t local -g 2 -G 1 -d f32 -n 5 -w 2 2>&1 | grep -v "^# progress" | tail -14
} > $OUT/bench.txt 2>&1
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
{
  el "pytest symmetric_outputs"
  timeout 200 python3 -m pytest tests/python -m gpu -k "symmetric" -q -p no:cacheprovider 2>&1 | tail -8
} > $OUT/pytest.txt 2>&1
el all done
cat $OUT/tests.txt $OUT/probe.txt $OUT/bench.txt $OUT/pytest.txt
