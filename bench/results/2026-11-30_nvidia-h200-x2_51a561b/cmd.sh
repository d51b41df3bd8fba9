#!/bin/bash
# Session 8 run 5 (2xH200): FCO_EA_LEAN_LAND (claimed landing between pool tiles): tests on nccl
# and local, A/B against the default (claimed tiles, landing after the last tile) in one run,
# split 60 and 80, and its timeline.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
for t in nccl local; do
  el "test embedding $t"
  FCO_TEST_TRACE=1 FCO_TRANSPORT=$t timeout 120 build/tests/test_embedding_alltoall > $OUT/test-$t.log 2>&1; echo "rc=$?"
  grep -vE '^>|^ea-prof' $OUT/test-$t.log | tail -3; grep -E '^>' $OUT/test-$t.log | tail -1
done
E="build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -n 10 -w 2 -D 1"
v() { # label env... command
  local l=$1; shift; el "$l"; timeout 50 env "$@" 2>&1 | grep -v '^# progress'
}
{
  for d in bf16 f32; do
    v "$d default" $E -d $d
    v "$d LAND=1" FCO_EA_LEAN_LAND=1 $E -d $d
    v "$d LAND=1 SPLIT=80" FCO_EA_LEAN_LAND=1 FCO_EA_LEAN_SPLIT=80 $E -d $d
  done
} > $OUT/ea.txt 2>&1
P="build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 0 -n 2 -w 1 -d bf16 -D 1"
{
  v "prof default" FCO_BENCH_EA_WORKLOADS=1,4,5,6 FCO_EA_PROFILE=1 $P
  v "prof LAND=1" FCO_BENCH_EA_WORKLOADS=1,4,5,6 FCO_EA_PROFILE=1 FCO_EA_LEAN_LAND=1 $P
} > $OUT/ea-prof.txt 2>&1
el all done
grep -E '^ +[0-9]|^\[' $OUT/ea.txt | cut -c1-135
