#!/bin/bash
# Session 5 A/B run (2xH200): gemv PDL, embedding bulk push, Triton TMA, gemm tile variants.
# All output into few files under $OUT (the device tool returns a limited number of files).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
BG="build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3"
BE="build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -D 1"
{
  for t in local nccl; do el "gemv pdl test $t"; FCO_TEST_PDL=only FCO_TEST_QUICK=1 FCO_TRANSPORT=$t timeout 120 build/tests/test_gemv_allreduce 2>&1 | tail -4; done
  el gemv bench
  FCO_BENCH_GEMV_NK=8192x8192,4096x14336,8192x28672 FCO_BENCH_GEMV_M=1,4,16 $BG -D 0,oneshot,oneshot_ll,oneshot_ll_pdl,auto 2>&1 | grep -v '^# progress'
  FCO_GEMV_PDL=1 FCO_BENCH_GEMV_NK=8192x8192,4096x14336,8192x28672 FCO_BENCH_GEMV_M=1,16 $BG -D 0,twophase,auto 2>&1 | grep -E '^ +[0-9]'
  for pf in 0 65536; do echo "prefetch $pf"; FCO_GEMV_PDL_PREFETCH=$pf FCO_BENCH_GEMV_NK=8192x8192,4096x14336 FCO_BENCH_GEMV_M=1 $BG -D 0,oneshot_ll,oneshot_ll_pdl 2>&1 | grep -E '^ +[0-9]'; done
  el gemv done
} > $OUT/gemv.txt 2>&1
{
  el ea test; FCO_TEST_QUICK=1 FCO_TRANSPORT=nccl timeout 150 build/tests/test_embedding_alltoall 2>&1 | tail -5
  el ea bench st; $BE 2>&1 | grep -v '^# progress' | tail -12
  el ea bench bulk; FCO_EA_PUSH=bulk $BE 2>&1 | grep -v '^# progress' | tail -10
  el ea done
} > $OUT/ea.txt 2>&1
{
  for tl in tma2 wgmma mma; do el "ga test local $tl"; FCO_GA_TILE=$tl FCO_TEST_QUICK=1 FCO_TRANSPORT=local timeout 100 build/tests/test_gemm_alltoall 2>&1 | tail -2; done
} > $OUT/ga.txt 2>&1
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
{
  el triton sweep
  timeout 170 python3 bench/triton_diag.py --nproc 2 --part gemm --iters 10 --warmup 2 --variants 'tma=0,tile=128,256,64,8,3;tma=1,tile=128,256,64,8,3;tma=1,tile=128,256,64,8,4;tma=1,tile=128,256,64,8,4,sk=1' 2>&1 | tail -40
  el triton pytest
  timeout 100 python3 -m pytest tests/python/test_triton_gpu.py -m gpu -k "tma and bfloat16" -x -q -p no:cacheprovider 2>&1 | tail -5
  el triton done
} > $OUT/triton.txt 2>&1
el all done
for f in gemv ea ga triton; do echo "== $f"; tail -5 $OUT/$f.txt; done
