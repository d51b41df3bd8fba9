#!/bin/bash
# Session 7 run 4 (2xH200): the fix of the lean fused kernel's hang: test_embedding_alltoall on
# nccl and local (full), the op pytest, bf16 A/B with defaults; objects built here travel (carry).
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
  grep -vE '^>' $OUT/test-$t.log | tail -6; grep -E '^>' $OUT/test-$t.log | tail -1
done
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
el pytest; timeout 60 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -q -p no:cacheprovider -k embedding 2>&1 | tail -1
{
  el "embedding bf16 defaults (lean)"; timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -D 0,1,auto 2>&1 | grep -v '^# progress'
  el "embedding bf16 local transport (one GPU, 2 virtual ranks)"; timeout 60 $B embedding_alltoall -t local -g 2 -d bf16 -n 10 -w 2 -D 0,1 2>&1 | grep -E '^ +[0-9]|^# +B'
} > $OUT/ea.txt 2>&1
el all done
grep -E '^ +[0-9]|^\[' $OUT/ea.txt | cut -c1-170
