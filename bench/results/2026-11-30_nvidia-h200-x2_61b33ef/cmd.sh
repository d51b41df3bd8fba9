#!/bin/bash
# Session 8 run 10 (2xH200): FCO_EA_LEAN_STAGES=4 — tests with it forced (nccl, local), then
# A/B 3 vs 4 stages in one run (bf16, f32; P = 2 and P = 1).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=61b33ef
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
E="build/bin/fco-bench embedding_alltoall -G 1 -n 10 -w 2 -D 1"
{
  for d in bf16 f32; do for s in 3 4; do
    el "$d P=2 STAGES=$s"; FCO_EA_LEAN_STAGES=$s timeout 50 $E -t nccl -g 2 -d $d 2>&1 | grep -E '^ +[0-9]'
  done; done
  for s in 3 4; do el "bf16 P=1 STAGES=$s"; FCO_EA_LEAN_STAGES=$s timeout 40 $E -t nccl -g 1 -d bf16 -D 0,1 2>&1 | grep -E '^ +[0-9]'; done
} > $OUT/ea.txt 2>&1
cat $OUT/ea.txt | cut -c1-135
for t in nccl local; do
  el "test embedding $t (FCO_EA_LEAN_STAGES=4)"
  FCO_EA_LEAN_STAGES=4 FCO_TEST_TRACE=1 FCO_TRANSPORT=$t timeout 100 build/tests/test_embedding_alltoall > $OUT/test-$t.log 2>&1; echo "rc=$?"
  grep -vE '^>|^ea-prof' $OUT/test-$t.log | tail -2; grep -E '^>' $OUT/test-$t.log | tail -1
done
el all done
