#!/bin/bash
# Session 6 run 2 (2xH200): the streaming embedding lookup (FCO_EA_STREAM, 125b05f) and the gemv
# pipelined M 9..16 tile (FCO_GEMV_PIPE): tests, then A/B benches side by side, then torch's embedding.
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
  for t in local nccl; do el "test embedding $t"; FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=120 tests/run.sh test_embedding_alltoall 2>&1 | tail -3; done
  for t in local nccl; do el "test gemv $t"; FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=60 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce 2>&1 | tail -2; done
  el "pytest embedding+gemv ops"; timeout 60 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -q -p no:cacheprovider -k "embedding or gemv" 2>&1 | tail -2
} > $OUT/tests.txt 2>&1
for f in build/tests/logs/*/test_embedding_alltoall*; do [ -f "$f" ] && tail -c 3000 "$f" >> $OUT/tests.txt; done 2>/dev/null
{
  for dt in bf16 f32; do
    el "embedding $dt stream (default)"; timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 0,1,auto 2>&1 | grep -v '^# progress'
    el "embedding $dt FCO_EA_STREAM=0"; FCO_EA_STREAM=0 timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 0,1 2>&1 | grep -E '^ +[0-9]'
  done
} > $OUT/ea.txt 2>&1
{
  el "gemv bench (FCO_GEMV_PIPE default)"; timeout 60 $B gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 2>&1 | grep -v '^# progress'
  el "gemv FCO_GEMV_PIPE=0, M 16"; FCO_GEMV_PIPE=0 FCO_BENCH_GEMV_M=16 timeout 60 $B gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 2>&1 | grep -E '^ +[0-9]'
  el "gemv FCO_GEMV_PIPE=1, M 16"; FCO_BENCH_GEMV_M=16 timeout 60 $B gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 2>&1 | grep -E '^ +[0-9]'
} > $OUT/gemv.txt 2>&1
{ el torch embedding; timeout 120 python3 bench/embedding_alltoall_torch.py --nproc 2 2>&1 | tail -20; } > $OUT/torch-ea.txt 2>&1
el all done
for f in tests ea gemv torch-ea; do echo "== $f"; grep -E '^ +[0-9]|passed|failed|PASS|FAIL|^\[' $OUT/$f.txt | tail -40; done
