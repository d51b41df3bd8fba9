#!/bin/bash
# Session 7 run 2 (2xH200), commit 8181dba: the lean lookup as impl 0's default and the fused lean
# kernel (impl 1); C tests local + nccl (full), op pytest; embedding A/B: defaults (lean) vs
# FCO_EA_LEAN=0 (previous kernels) vs FCO_EA_LEAN_BLOCKS=4, bf16 and f32.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
B="build/bin/fco-bench"
{
  for t in local nccl; do el "test embedding $t"; FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=200 tests/run.sh test_embedding_alltoall 2>&1 | tail -3; done
  el "pytest gpu_ops embedding"; timeout 90 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -q -p no:cacheprovider -k embedding 2>&1 | tail -2
} > $OUT/tests.txt 2>&1
for t in local nccl; do cp build/tests/logs/$t/test_embedding_alltoall.log $OUT/test_embedding_alltoall-$t.log 2>/dev/null; done
{
  for dt in bf16 f32; do
    el "embedding $dt defaults (lean)"; timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 0,1,auto 2>&1 | grep -v '^# progress'
    el "embedding $dt FCO_EA_LEAN=0"; FCO_EA_LEAN=0 timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 0,1 2>&1 | grep -E '^ +[0-9]|^#.*knob'
    el "embedding $dt FCO_EA_LEAN_BLOCKS=4"; FCO_EA_LEAN_BLOCKS=4 timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 1 2>&1 | grep -E '^ +[0-9]|^#.*knob'
  done
  el "embedding bf16 local transport (one GPU, 2 virtual ranks)"; timeout 60 $B embedding_alltoall -t local -g 2 -d bf16 -n 10 -w 2 -D 0,1 2>&1 | grep -E '^ +[0-9]|^#'
} > $OUT/ea.txt 2>&1
el all done
for f in tests ea; do echo "== $f"; grep -E '^ +[0-9]|passed|failed|PASS|FAIL|^\[|^# +B' $OUT/$f.txt | cut -c1-170 | tail -50; done
grep -iE "fail|wrong|error" $OUT/test_embedding_alltoall-*.log | head -20
