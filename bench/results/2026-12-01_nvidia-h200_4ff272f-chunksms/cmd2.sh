#!/bin/bash
# Session 18 run 8 (one H200, commit 4ff272f, run 7's build): cuBLAS alone (fco-bench's gemv
# column, P = 1) at the chunk shapes of impl 4 on local P = 2 — full and half N.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=4ff272f
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o8; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
FCO_BENCH_GEMV_NK=8192x8192,4096x8192,2048x8192,4096x14336,2048x14336,1024x14336 FCO_BENCH_GEMV_M=16,64 timeout 100 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -n 20 -w 3 -R 3 -D 0 -J $O/p1.json > $O/p1.txt 2>&1; echo "rc=$?"
grep -E '^ +[0-9]' $O/p1.txt | cut -c1-100
if command -v ncu > /dev/null; then
  FCO_GEMV_CHUNKS=2 FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=16 timeout 200 ncu --csv --metrics gpu__time_duration.sum -c 40 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 0 -d bf16 -n 2 -w 1 -D 4 -c 0 > $O/ncu.csv 2> $O/ncu.err; echo "ncu rc=$?"
  grep -E "gemm|Kernel|chunk|gemv|sm90" $O/ncu.csv | cut -c1-220 | tail -24
else echo no ncu; fi
rm -f $O/build.log; tar czf $OUT/out.tgz -C $O .
