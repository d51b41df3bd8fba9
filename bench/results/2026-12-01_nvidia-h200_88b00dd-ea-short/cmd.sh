#!/bin/bash
# Session 16 run 7 (one H200, commit 88b00dd): where the fused embedding kernel's time goes on short
# bags at one rank (L = 1: 0.83x of the lookup, run c668d1b). Workload 4 (65536/8/64/1) and 6
# (262144/4/16/2), bf16, P = 1 (nccl, one GPU): (1) -D 0,1 at batch / 1, 4, 16 (fixed cost vs
# per-bag cost); (2) knobs: 4 blocks a SM, the static order, chunks 8 / 2; (3) FCO_EA_PROFILE=1
# timeline (eager).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=88b00dd
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o7; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 20 -w 3 -R 2"
row() { grep -E '^ +[0-9]' | cut -c1-150; }
for div in 1 4 16; do
  echo "== batch / $div"; FCO_BENCH_EA_WORKLOADS=4,6 FCO_BENCH_EA_BATCH_DIV=$div timeout 60 $B 2>&1 | tee -a $O/div.txt | row
done
for k in "FCO_EA_LEAN_BLOCKS=4" "FCO_EA_LEAN_DYN=0" "FCO_EA_LEAN_DYN=0 FCO_EA_LEAN_BLOCKS=4" "FCO_EA_LEAN_CHUNKS=8" "FCO_EA_LEAN_CHUNKS=2" "FCO_EA_LEAN_SPLIT=0"; do
  echo "== $k"; env $k FCO_BENCH_EA_WORKLOADS=4,6 timeout 60 $B 2>&1 | tee -a $O/knobs.txt | row
done
pack
echo "== profile (eager)"; FCO_EA_PROFILE=1 FCO_BENCH_EA_WORKLOADS=4,6 timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -d bf16 -D 1 -n 3 -w 1 > $O/prof.txt 2>&1; tail -12 $O/prof.txt
pack
el all done
