#!/bin/bash
# Session 49, one GPU (asked nvidia-h200): the shipped library at the commit run, as one build —
# (1) tests/gpu/run.sh quick, local C suite (its kernel checks first); (2) fco-bench embedding_alltoall at
# P = 1 (impl 0 and 1, bf16 all workloads and f32 all workloads; B / 16 and / 256 bf16 on 1, 3, 4, 8):
# 5216d2e's claimed lookup (warp w takes tile w before claiming) and session 47's kPool on the card they were
# not measured on when it is an H200 (f32 ragged with kPool never ran on an H200).
# Carry: build/obj built at the commit on the CPU machine, stripped: tar czf build/carry.tgz build/obj.
# Run: FCO_COMMIT=<commit> bash cmd.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
D=$OUT; O=/tmp/o6; rm -rf $O; mkdir -p $O/ab
pack() { tar czf $D/out.tgz -C $O . 2>/dev/null; }
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
OUT=$O FCO_GPU_PREBUILT=1 FCO_GPU_QUICK=1 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 \
  FCO_GPU_SUITES=local FCO_GPU_BUDGET=330 bash tests/gpu/run.sh > $O/run.log 2>&1
echo "run.sh rc=$?"; tail -25 $O/run.log; pack
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D all"
for d in bf16 f32; do
  timeout 80 $B -d $d -J $O/ab/p1-$d.json > $O/ab/p1-$d.txt 2>&1; echo "p1 $d rc=$?"
done
for div in 16 256; do
  FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,3,4,8 timeout 60 $B -d bf16 -J $O/ab/d$div.json \
    > $O/ab/d$div.txt 2>&1; echo "d$div rc=$?"
done
pack
for f in $O/ab/*.txt; do echo "== $f"; grep -v '^#' $f | tail -22; done
