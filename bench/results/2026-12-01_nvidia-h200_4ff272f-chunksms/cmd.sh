#!/bin/bash
# Session 18 run 7 (one H200, commit 4ff272f): impl 4 with FCO_GEMV_CHUNK_SMS 0 / 1 (the GEMMs beside a
# push planned for all SMs / for those the pushes leave), 2 and 4 chunks, 2 and 8 push blocks, on
# local P = 2 against impl 3.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=4ff272f
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o7; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
for cfg in "2 8 0" "2 8 1" "2 2 1" "4 8 1" "4 2 1"; do
  set -- $cfg
  FCO_GEMV_CHUNKS=$1 FCO_GEMV_CHUNK_BLOCKS=$2 FCO_GEMV_CHUNK_SMS=$3 FCO_BENCH_GEMV_NK=8192x8192,4096x14336 FCO_BENCH_GEMV_M=16,64 timeout 100 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 10 -w 3 -R 3 -D 0,3,4 -J $O/c$1-b$2-s$3.json > $O/c$1-b$2-s$3.txt 2>&1; echo "chunks=$1 blocks=$2 sms=$3 rc=$?"
  grep -E '^ +[0-9]' $O/c$1-b$2-s$3.txt | cut -c1-150
done
rm -f $O/build.log; tar czf $OUT/out.tgz -C $O .
