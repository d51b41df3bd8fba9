#!/bin/bash
# Session 10 run 10 (2xH200, commit a17242a + w16.patch, not committed): grouped gemv tiles with
# blocks of 16 warps (FCO_GEMV_GROUP_WARPS=16) vs 8, P = 1 (local) and P = 2 (nccl), bf16 M = 64;
# then ncu stall reasons of the 8-warp grouped kernel at P = 1.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=a17242a+w16
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export FCO_GEMV_GROUP=4 FCO_BENCH_GEMV_NK=8192x8192,16384x16384,8192x28672 FCO_BENCH_GEMV_M=64
for wp in 8 16; do
  echo "== warps $wp local P=1"; FCO_GEMV_GROUP_WARPS=$wp timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -D 1 > $OUT/w$wp-p1.txt 2>&1
  grep -E '^ +[0-9]' $OUT/w$wp-p1.txt | cut -c1-180
  echo "== warps $wp nccl P=2"; FCO_GEMV_GROUP_WARPS=$wp timeout 60 build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -D 1,3 > $OUT/w$wp-p2.txt 2>&1
  grep -E '^ +[0-9]' $OUT/w$wp-p2.txt | cut -c1-180
done
FCO_BENCH_GEMV_NK=8192x8192 timeout 100 ncu --clock-control none -k regex:gemv_allreduce_kernel -c 1 --page raw \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',gpu__time_duration.sum,smsp__inst_executed.sum \
  build/bin/fco-bench gemv_allreduce -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 1 > $OUT/ncu-stalls.txt 2>&1
grep -E "duration|inst_executed|stalled" $OUT/ncu-stalls.txt | awk '$NF+0 > 0.05 || /duration|inst_exec/' | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//; s/ +/ /g'
