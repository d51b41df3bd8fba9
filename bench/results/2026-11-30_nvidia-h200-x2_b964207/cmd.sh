#!/bin/bash
# Session 9 run 8 (2xH200, commit b964207): closing numbers — fco-bench embedding_alltoall (bf16, f32;
# -D 0,1,auto) with ordinary and symmetric outputs, gemm_alltoall (bf16, every impl) with both,
# and the torch scripts of both ops in the same run.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=b964207
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
E="build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -n 10 -w 2 -D 0,1,auto"
for d in bf16 f32; do for s in 0 1; do
  el "ea $d sym=$s"; FCO_BENCH_SYM=$s timeout 80 $E -d $d > $OUT/ea-$d-sym$s.txt 2>&1; echo rc=$?
done; done
G="build/bin/fco-bench gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3"
for s in 0 1; do el "ga sym=$s"; FCO_BENCH_SYM=$s timeout 90 $G > $OUT/ga-sym$s.txt 2>&1; echo rc=$?; done
el "torch ea"; timeout 150 python3 bench/embedding_alltoall_torch.py --nproc 2 > $OUT/torch-ea.txt 2>&1; echo rc=$?
el "torch ga"; timeout 150 python3 bench/gemm_alltoall_torch.py --nproc 2 > $OUT/torch-ga.txt 2>&1; echo rc=$?
el all done
for f in ea-bf16-sym0 ea-bf16-sym1 ea-f32-sym0 ea-f32-sym1 ga-sym0 ga-sym1; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror' $OUT/$f.txt | cut -c1-160; done
echo "== torch"; grep -E '^ +[0-9]' $OUT/torch-ea.txt $OUT/torch-ga.txt | cut -c1-170
