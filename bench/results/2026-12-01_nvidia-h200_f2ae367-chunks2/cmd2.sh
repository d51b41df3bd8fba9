#!/bin/bash
# Session 18 run 6 (one H200, commit f2ae367, run 5's build): impl 4 with 2 chunks and
# FCO_GEMV_CHUNK_BLOCKS 1, 2, 4, 8 (push blocks beside the second chunk's GEMM) on local P = 2.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=f2ae367
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o6; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
for B in 1 2 4 8; do
  FCO_GEMV_CHUNKS=2 FCO_GEMV_CHUNK_BLOCKS=$B FCO_BENCH_GEMV_NK=8192x8192,4096x14336 FCO_BENCH_GEMV_M=16,64 timeout 100 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 10 -w 3 -R 3 -D 0,3,4 -J $O/b$B.json > $O/b$B.txt 2>&1; echo "blocks=$B rc=$?"
  grep -E '^ +[0-9]' $O/b$B.txt | cut -c1-150
done
rm -f $O/build.log; tar czf $OUT/out.tgz -C $O .
