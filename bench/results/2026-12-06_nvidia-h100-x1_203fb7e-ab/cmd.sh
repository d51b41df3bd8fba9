#!/bin/bash
# Session 58, second call (~6 min cold): run 1's A/B (old objects built on the device, new ones
# here) showed the embedding's fused time 2-4 % slower at HEAD than at 59d4cef, with ordinary
# outs too — but the two were built by different compilers. Here all three trees are built on the
# device, from sources (git archive <commit> Makefile include src tools): 59d4cef (before session
# 57), 036513a (session 57's end: R2's direct word), HEAD (+ 2dd1701's failed-resolve signalling),
# then the embedding A/B (workloads 1, 5, 6, bf16, local P = 2, CUDA graphs, symmetric and
# ordinary outs), the three alternating, two passes.
# Carry: build/src59.tgz, build/src57.tgz, build/srcnew.tgz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o58b; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
nvcc --version | tail -2 > $O/nvcc.txt 2>&1 || /usr/local/cuda/bin/nvcc --version | tail -2 > $O/nvcc.txt
cat $O/nvcc.txt
for t in 59 57 new; do
  mkdir -p /tmp/t$t && tar xzf build/src$t.tgz -C /tmp/t$t
  (cd /tmp/t$t && make -j6 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so build/bin/fco-bench \
    > $O/build-$t.log 2>&1; echo "make $t rc=$?") &
done
wait
export FCO_BENCH_EA_WORKLOADS=1,5,6
for pass in 1 2; do
  for t in 59 57 new; do
    for sym in 1 0; do
      FCO_BENCH_SYM=$sym /tmp/t$t/build/bin/fco-bench embedding_alltoall -t local -g 2 -d bf16 -D 1 \
        -G 1 -n 20 -w 3 > $O/ea-$t-sym$sym-$pass.txt 2>&1
      echo "ea-$t-sym$sym-$pass rc=$?"
    done
  done
done
tar czf $OUT/out.tgz -C $O .
for f in $O/ea-*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-120; done
