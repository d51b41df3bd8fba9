#!/bin/bash
# Session 12 run 6 (1 H200, commit 5c6f398): the gemv tile's cost of M at P = 1 (nccl, one rank:
# the fused kernels do the GEMV and nothing else) on the per-rank slices of the P = 2 shapes
# (K halved): M 1 / 4 / 16 / 64 against cuBLAS and the HBM floor.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=5c6f398
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_BENCH_GEMV_NK="8192x4096,8192x14336,4096x7168,16384x8192" FCO_BENCH_GEMV_M=1,4,16,64 timeout 200 \
  build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -n 20 -w 5 -R 3 > $OUT/gemv-p1.txt 2>&1
grep -v "^# progress" $OUT/gemv-p1.txt | tail -22 | cut -c1-250
