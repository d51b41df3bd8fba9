#!/bin/bash
# Session 5 run 3 (2xH200): the new defaults under the tests (gemv PDL, Triton TMA + stream-K,
# embedding cursor by row bytes), the Triton diag on all five workloads, gemm impl 2 SM reserve.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
{
  for t in local nccl; do
    el "tests $t"
    FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 VERBOSE=0 tests/run.sh test_gemv_allreduce test_gemm_alltoall test_embedding_alltoall 2>&1 | tail -5
  done
  el tests done
} > $OUT/tests.txt 2>&1
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
{
  el triton diag
  timeout 150 python3 bench/triton_diag.py --nproc 2 --part gemm --iters 10 --warmup 2 2>&1 | tail -25
  el triton pytest
  timeout 160 python3 -m pytest tests/python/test_triton_gpu.py -m gpu -k "tma and bfloat16" -x -q -p no:cacheprovider 2>&1 | tail -6
  el "pytest gemv ops (PDL default)"
  timeout 120 python3 -m pytest tests/python -m gpu -k "gemv" -x -q -p no:cacheprovider 2>&1 | tail -4
  el triton done
} > $OUT/triton.txt 2>&1
{
  B="build/bin/fco-bench gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -D 0,2"
  export FCO_BENCH_GA_SHAPES="4096,14336,4096,8,2;1024,14336,4096,8,2;1024,14336,4096,8,2,4"
  for v in "0 0" "4 0" "8 0" "4 1024"; do
    set -- $v
    el "reserve $1 chunk_rows $2"
    if [ "$2" = 0 ]; then FCO_GA_SM_RESERVE=$1 $B 2>&1 | grep -E '^ +[0-9]'
    else FCO_GA_SM_RESERVE=$1 FCO_GA_CHUNK_ROWS=$2 $B 2>&1 | grep -E '^ +[0-9]'; fi
  done
  unset FCO_BENCH_GA_SHAPES
  el "embedding f32 auto"
  build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d f32 -n 10 -w 2 -D 0,1,auto 2>&1 | grep -v '^# progress' | tail -10
  el done
} > $OUT/bench.txt 2>&1
el all done
for f in tests triton bench; do echo "== $f"; tail -8 $OUT/$f.txt; done
