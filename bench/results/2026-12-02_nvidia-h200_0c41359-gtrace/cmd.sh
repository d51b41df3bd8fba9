#!/bin/bash
# Session 23 (one H200, commit 0c41359): where the TMA tile's fixed ~5-6 µs (run 4ca8e3b-ncu) go — src/cuda/gemv_allreduce.o
# built on the CPU machine with -DFCO_GEMV_TRACE (every other object as in run 849434b-final), carried: blocks 0 and 1
# (an owner and its helper) print %globaltimer offsets from their kernel entry. P = 1 local, M 64, N 8192, K 2048 /
# 8192, CUDA graphs, pairs on and off.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=0c41359
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
for pr in 1 0; do for nk in 8192x2048 8192x8192; do
  FCO_GEMV_SPLIT_PAIR=$pr FCO_BENCH_GEMV_NK=$nk FCO_BENCH_GEMV_M=64 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -n 20 -w 2 -R 1 -D 1 > $O/gtrace-pair$pr-$nk.txt 2>&1; echo pair$pr $nk rc=$?
done; done
rm -f $O/build.log; pack
for f in $O/gtrace-*; do echo "== $(basename $f)"; grep -c gtrace $f; grep gtrace $f | tail -4 | cut -c1-230; grep -E "^ +[0-9]" $f | cut -c1-120; done
