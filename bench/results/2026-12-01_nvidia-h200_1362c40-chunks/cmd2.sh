#!/bin/bash
# Session 18 run 4 (one H200, commit 1362c40, the build of run 3): impl 4 with FCO_GEMV_CHUNKS
# 1, 2, 4, 8 against impl 3 on local P = 2 (M 16 / 64): how the chunk GEMMs' width costs.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=1362c40
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o4; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
for C in 1 2 4 8; do
  FCO_GEMV_CHUNKS=$C FCO_BENCH_GEMV_NK=8192x8192,16384x16384,8192x28672 FCO_BENCH_GEMV_M=16,64 timeout 100 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 10 -w 3 -R 3 -D 0,3,4 -J $O/chunks$C-local2.json > $O/chunks$C-local2.txt 2>&1; echo "C=$C rc=$?"
  grep -E '^ +[0-9]' $O/chunks$C-local2.txt | cut -c1-150
done
FCO_GEMV_CHUNKS=4 FCO_BENCH_GEMV_NK=8192x8192,16384x16384 FCO_BENCH_GEMV_M=16,64 timeout 100 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -n 10 -w 3 -R 3 -D 0,3 -J $O/p1.json > $O/p1.txt 2>&1; echo "P=1 rc=$?"
grep -E '^ +[0-9]' $O/p1.txt | cut -c1-150
tar czf $OUT/out.tgz -C $O .
