#!/bin/bash
# Session 7 run 1 (2xH200), commit c09f78d: the probe (lean rows (e)), the embedding C tests incl. the
# lean lookup FCO_EA_STREAM=2, gemv quick, op pytest; embedding A/B FCO_EA_STREAM=2/1/0/unset.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p build/probe
nvcc -O3 -std=c++17 -arch=sm_90 -Isrc/cuda -Iinclude bench/probe/ea_gather_probe.cu -o build/probe/ea_gather_probe > $OUT/probe-build.log 2>&1 &
PB=$!
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
wait $PB
el build done
timeout 100 build/probe/ea_gather_probe > $OUT/probe-ea_gather_probe.log 2>&1; el probe rc=$?
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
B="build/bin/fco-bench"
{
  for t in local nccl; do el "test embedding $t"; FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=150 tests/run.sh test_embedding_alltoall 2>&1 | tail -3; done
  for t in local nccl; do el "test gemv $t"; FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=60 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce 2>&1 | tail -2; done
  el "pytest gpu_ops"; timeout 90 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -q -p no:cacheprovider 2>&1 | tail -2
} > $OUT/tests.txt 2>&1
for f in build/tests/logs/*/test_embedding_alltoall*; do [ -f "$f" ] && grep -iE "fail|wrong|error" "$f" | head -20 >> $OUT/tests.txt; done 2>/dev/null
{
  for dt in bf16 f32; do
    el "embedding $dt unset (defaults)"; timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 0,1,auto 2>&1 | grep -v '^# progress'
    for s in 2 0; do el "embedding $dt FCO_EA_STREAM=$s"; FCO_EA_STREAM=$s timeout 60 $B embedding_alltoall -t nccl -g 2 -G 1 -d $dt -n 10 -w 2 -D 0,1 2>&1 | grep -E '^ +[0-9]|^#.*knob'; done
  done
} > $OUT/ea.txt 2>&1
el all done
grep -E '\((e|d2)\)|kB=0 stream @2' $OUT/probe-ea_gather_probe.log | grep -v 'S=4' | cut -c1-90 | head -80
for f in tests ea; do echo "== $f"; grep -E '^ +[0-9]|passed|failed|PASS|FAIL|^\[' $OUT/$f.txt | tail -60; done
