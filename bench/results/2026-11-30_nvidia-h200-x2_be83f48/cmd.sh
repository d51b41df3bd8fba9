#!/bin/bash
# Session 6 run 3 (2xH200), commit be83f48: the reworked streaming embedding lookup, tests and
# side-by-side A/B (FCO_EA_STREAM=1 vs 0, both dtypes); gemv M = 16 with the FCO_GEMV_PIPE auto rule.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
B="build/bin/fco-bench"
{
  for t in local nccl; do el "test embedding $t"; FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=150 tests/run.sh test_embedding_alltoall 2>&1 | tail -3; done
  for t in local nccl; do el "test gemv $t"; FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=60 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce 2>&1 | tail -2; done
  el "pytest embedding+gemv ops"; timeout 60 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -q -p no:cacheprovider -k "embedding or gemv" 2>&1 | tail -2
} > $OUT/tests.txt 2>&1
for f in build/tests/logs/*/test_embedding_alltoall*; do [ -f "$f" ] && grep -iE "fail|wrong|error" "$f" | head -20 >> $OUT/tests.txt; done 2>/dev/null
{
  for dt in bf16 f32; do
    el "embedding $dt FCO_EA_STREAM=1"; FCO_EA_STREAM=1 timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 0,1 2>&1 | grep -v '^# progress'
    el "embedding $dt FCO_EA_STREAM=0"; FCO_EA_STREAM=0 timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 0,1 2>&1 | grep -E '^ +[0-9]'
  done
} > $OUT/ea.txt 2>&1
{ el "gemv M 16 (FCO_GEMV_PIPE auto)"; FCO_BENCH_GEMV_M=16 timeout 60 $B gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 2>&1 | grep -v '^# progress'; } > $OUT/gemv.txt 2>&1
el all done
for f in tests ea gemv; do echo "== $f"; grep -E '^ +[0-9]|passed|failed|PASS|FAIL|^\[' $OUT/$f.txt | tail -40; done
