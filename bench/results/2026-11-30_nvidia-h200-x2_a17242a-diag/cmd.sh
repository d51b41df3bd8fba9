#!/bin/bash
# Session 10 run 9 (2xH200, commit a17242a + diag.patch, not committed): where the grouped gemv
# tile's time goes, P = 1 (local), bf16 M = 64: FCO_GEMV_GROUP_DIAG=1 reloads no x after the
# ring's first chunks (x traffic gone, results wrong), =2 no W; groups of 4 and 2; graph-timed.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=a17242a+diag
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for gk in 4 2; do for dg in 0 1 2; do
  echo "== group $gk diag $dg"
  FCO_GEMV_GROUP=$gk FCO_GEMV_GROUP_DIAG=$dg FCO_BENCH_GEMV_NK=8192x8192,16384x16384 FCO_BENCH_GEMV_M=64 timeout 60 \
    build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -D 1 > $OUT/g$gk-d$dg.txt 2>&1
  grep -E '^ +[0-9]' $OUT/g$gk-d$dg.txt | cut -c1-180
done; done
