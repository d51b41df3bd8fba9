#!/bin/bash
# Session 8 run 2 (2xH200): FCO_EA_LEAN_DYN (claimed tiles, SM split) tests + A/B against the
# default in one run, and FCO_EA_PROFILE timelines of MIX=50 and DYN for workloads 0, 1.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
B="build/bin/fco-bench"
for t in nccl local; do
  el "test embedding $t"
  FCO_TEST_TRACE=1 FCO_TRANSPORT=$t timeout 110 build/tests/test_embedding_alltoall > $OUT/test-$t.log 2>&1; echo "rc=$?"
  grep -vE '^>|^ea-prof' $OUT/test-$t.log | tail -3; grep -E '^>' $OUT/test-$t.log | tail -1
done
E="$B embedding_alltoall -t nccl -g 2 -G 1 -n 10 -w 2"
{
  el "bf16 default"; timeout 50 $E -d bf16 -D 1 2>&1 | grep -v '^# progress'
  for s in 100 60 40; do el "bf16 DYN SPLIT=$s"; FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_SPLIT=$s timeout 50 $E -d bf16 -D 1 2>&1 | grep -v '^# progress'; done
  el "f32 default"; timeout 50 $E -d f32 -D 1 2>&1 | grep -v '^# progress'
  for s in 100 50; do el "f32 DYN SPLIT=$s"; FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_SPLIT=$s timeout 50 $E -d f32 -D 1 2>&1 | grep -v '^# progress'; done
} > $OUT/ea.txt 2>&1
P="$B embedding_alltoall -t nccl -g 2 -G 0 -n 2 -w 1 -d bf16 -D 1"
export FCO_BENCH_EA_WORKLOADS=0,1,3
{
  el "prof default"; FCO_EA_PROFILE=1 timeout 40 $P 2>&1 | grep -E '^ea-prof|^ +[0-9]'
  el "prof MIX=50"; FCO_EA_PROFILE=1 FCO_EA_LEAN_MIX=50 timeout 40 $P 2>&1 | grep -E '^ea-prof|^ +[0-9]'
  for s in 100 50; do el "prof DYN SPLIT=$s"; FCO_EA_PROFILE=1 FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_SPLIT=$s timeout 40 $P 2>&1 | grep -E '^ea-prof|^ +[0-9]'; done
} > $OUT/ea-prof.txt 2>&1
el all done
grep -E '^ +[0-9]|^\[' $OUT/ea.txt | cut -c1-150
