#!/bin/bash
# Session 5 closing run (2xH200): gemv (PDL default, wide LL blocks) tests + bench + A/B, gemm
# bench, the torch comparison with every fco impl (C 0/1/2, Triton) on the gemm workloads, the
# Triton TMA GPU test, embedding bf16 AUTO. Results land under $OUT step by step.
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
  for t in local nccl; do el "test gemv $t"; FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=60 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce 2>&1 | tail -2; done
  el gemv bench; timeout 60 $B gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 2>&1 | grep -v '^# progress'
  el "gemv FCO_GEMV_WIDE=0 (4096x14336)"
  FCO_GEMV_WIDE=0 FCO_BENCH_GEMV_NK=4096x14336 FCO_BENCH_GEMV_M=1,4,16 timeout 30 $B gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 -D 0,oneshot_ll,oneshot_ll_pdl,auto 2>&1 | grep -E '^ +[0-9]'
  el "gemv FCO_GEMV_WIDE=1 (4096x14336)"
  FCO_BENCH_GEMV_NK=4096x14336 FCO_BENCH_GEMV_M=1,4,16 timeout 30 $B gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 -D 0,oneshot_ll,oneshot_ll_pdl,auto 2>&1 | grep -E '^ +[0-9]'
} > $OUT/gemv.txt 2>&1
{ el gemm; timeout 80 $B gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 2>&1 | grep -v '^# progress'; } > $OUT/gemm.txt 2>&1
{ el torch gemm; timeout 120 python3 bench/gemm_alltoall_torch.py --nproc 2 --iters 20 --warmup 5 2>&1 | tail -40; } > $OUT/torch-gemm.txt 2>&1
{ el tma test; timeout 100 python3 -m pytest tests/python/test_triton_gpu.py -m gpu -k "tma and bfloat16" -q -p no:cacheprovider 2>&1 | tail -5; } > $OUT/pytest-tma.txt 2>&1
{ el embedding; timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -D 0,1,auto 2>&1 | grep -v '^# progress'; } > $OUT/ea.txt 2>&1
el all done
for f in gemv gemm torch-gemm pytest-tma ea; do echo "== $f"; grep -E '^ +[0-9]|passed|failed|PASS|FAIL|^\[' $OUT/$f.txt | tail -14; done
