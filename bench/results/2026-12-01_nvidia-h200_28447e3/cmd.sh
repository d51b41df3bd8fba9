#!/bin/bash
# Session 15 run 8 (one H200, commit 28447e3): fco-bench's "# auto ran, per row" line on a GPU
# (gemv P = 1 and local P = 2, M 1 / 16 / 64; gemm P = 1), the session's last code commit.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=28447e3
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o8; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FCO_BENCH_GEMV_NK=4096x14336 FCO_BENCH_GEMV_M=1,16,64
timeout 60 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -n 10 -w 3 > $O/gemv-p1.txt 2>&1; echo rc=$?
timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 10 -w 3 > $O/gemv-local2.txt 2>&1; echo rc=$?
FCO_BENCH_GA_SHAPES="512,2048,7168,32,8;1024,14336,4096,8,2" timeout 90 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -n 5 -w 2 > $O/ga-p1.txt 2>&1; echo rc=$?
tar czf $OUT/out.tgz -C $O .
for f in gemv-p1 gemv-local2 ga-p1; do echo "== $f"; grep -E '^ +[0-9]|auto ran|wrong' $O/$f.txt | cut -c1-220; done
