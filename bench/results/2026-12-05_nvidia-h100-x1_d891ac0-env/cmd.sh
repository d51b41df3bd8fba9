#!/bin/bash
# Session 49, one GPU (asked nvidia-h200): (1) fco-bench's HBM rate: FCO_BENCH_HBM_GBPS unset / 4300 / abc
# (the bad value warned about, then measured), allreduce local P = 2 at 1 MB; (2) the embedding table at
# P = 1, bf16 and f32, impl 0 and 1 (-D 0,1), CUDA graphs: on an H200 the first f32 ragged rows with session
# 47's kPool and the shipped library as one build; on an H100 a repeat of run a9c4f24-suite with the measured
# rate. Carry: build/obj at the commit, stripped. Run: FCO_COMMIT=<commit> bash cmd.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o10; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1; cat $O/gpu.txt
for v in unset 4300 abc; do
  X=env; [ $v != unset ] && X="env FCO_BENCH_HBM_GBPS=$v"
  $X timeout 60 build/bin/fco-bench allreduce -t local -g 2 -b 1M -e 1M -d bf16 -J $O/ar-$v.json > $O/ar-$v.txt 2> $O/ar-$v.err
  echo "== $v rc=$?"; cat $O/ar-$v.err; grep "^# HBM\|^# floor" $O/ar-$v.txt; grep -o '"hbm_gbps":[0-9.]*,"hbm_measured":[0-9]' $O/ar-$v.json
done
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1"
for d in bf16 f32; do timeout 100 $B -d $d -J $O/ea-p1-$d.json > $O/ea-p1-$d.txt 2>&1; echo "ea $d rc=$?"; done
pack
for d in bf16 f32; do grep -v "^# knobs\|^# inputs\|^# speedup\|^# workspace\|^# one rank" $O/ea-p1-$d.txt | tail -15; done
