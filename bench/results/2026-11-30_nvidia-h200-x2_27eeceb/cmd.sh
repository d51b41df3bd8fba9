#!/bin/bash
# Session 8 run 6 (2xH200): diagnostic — the fused lean kernel's timeline with its remote tiles
# stored over NVLink (FCO_EA_PROFILE=1) and into local memory instead (=2, wrong results by
# design), static and claimed order, bf16, workloads 0, 1, 5 (eager, 3 iterations).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=27eeceb
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
P="build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 0 -n 3 -w 1 -d bf16 -D 1"
for dyn in 0 1; do for pr in 1 2; do
  echo "== FCO_EA_LEAN_DYN=$dyn FCO_EA_PROFILE=$pr"
  FCO_BENCH_EA_WORKLOADS=0,1,5 FCO_EA_LEAN_DYN=$dyn FCO_EA_PROFILE=$pr timeout 60 $P 2>&1 | grep -E '^ea-prof|^ +[0-9]' | sed -E 's/ \(us from the first start, median\/max over blocks\)//'
done; done > $OUT/prof.txt
cat $OUT/prof.txt | cut -c1-150
