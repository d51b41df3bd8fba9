#!/bin/bash
# Session 7 run 3 (2xH200): where test_embedding_alltoall hangs (run 8181dba: P = 1 never ended on
# either transport), with FCO_TEST_TRACE=1; then the f32 A/B of the lean kernels. The objects
# built here (build/obj, same flags) travel with the tree (carry) to save the build.
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
  FCO_TEST_TRACE=1 FCO_TRANSPORT=$t timeout 45 build/tests/test_embedding_alltoall > $OUT/test-$t.log 2>&1; echo "rc=$?"
  grep -vE '^>' $OUT/test-$t.log | tail -4; grep -E '^>' $OUT/test-$t.log | tail -2
done
{
  el "embedding f32 defaults (lean)"; timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d f32 -n 10 -w 2 -D 0,1 2>&1 | grep -v '^# progress'
  el "embedding f32 FCO_EA_LEAN=0"; FCO_EA_LEAN=0 timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d f32 -n 10 -w 2 -D 0,1 2>&1 | grep -E '^ +[0-9]|^#.*knob'
  el "embedding bf16 FCO_EA_LEAN_BLOCKS=4"; FCO_EA_LEAN_BLOCKS=4 timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -D 1 2>&1 | grep -E '^ +[0-9]|^#.*knob'
} > $OUT/ea.txt 2>&1
el all done
grep -E '^ +[0-9]|^\[' $OUT/ea.txt | cut -c1-170
