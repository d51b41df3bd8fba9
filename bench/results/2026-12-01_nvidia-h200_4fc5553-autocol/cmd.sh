#!/bin/bash
# Session 15 run 9 (one H200, commit 4fc5553): is the AUTO column's gap to the column of the impl it
# runs (1–9 % in GEMM-bound rows, runs 2a7c0f0 / 427b10f) a position effect? gemm P = 1, 1024 and
# 4096 tokens at K 14336 (AUTO = impl 0 there), -D 0,auto vs -D 0,1,2,auto vs -D auto alone
# (impl 0 always runs first), -R 5, graphs.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=4fc5553
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o9; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
export FCO_BENCH_GA_SHAPES="1024,14336,4096,8,2;4096,14336,4096,8,2"
for d in 0,auto 0,1,2,auto auto 0,auto; do
  echo "== -D $d"; timeout 120 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -n 10 -w 2 -R 5 -D $d > $O/ga-$d.txt 2>&1; echo rc=$?
  grep -E '^ +[0-9]|auto ran|^# tok' $O/ga-$d.txt | cut -c1-200
done
tar czf $OUT/out.tgz -C $O .
