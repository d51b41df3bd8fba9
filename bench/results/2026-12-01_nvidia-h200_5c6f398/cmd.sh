#!/bin/bash
# Session 12 run 4 (1 H200): the embedding rings aligned to 128 bytes (5c6f398). P = 1 (nccl, one
# rank: impl 0's lookup vs the fused kernel, no communication) on all 7 workloads, both dtypes;
# ncu of the fused kernel on Zipf (wavefronts, L2 requests); test_embedding_alltoall on local.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=5c6f398
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
{
  for d in bf16 f32; do
    el "P=1 $d"
    timeout 120 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d $d -D 0,1 -n 10 -w 3 2>&1 | grep -E "^ +[0-9]|^#  +B"
  done
  el "P=2 local bf16"
  timeout 120 build/bin/fco-bench embedding_alltoall -t local -g 2 -G 1 -d bf16 -n 5 -w 2 2>&1 | grep -E "^ +[0-9]|^#  +B|wrong"
} > $OUT/p1.txt 2>&1
{
  el "test_embedding_alltoall local"
  FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=1 timeout 200 tests/run.sh test_embedding_alltoall 2>&1 | tail -12
} > $OUT/tests.txt 2>&1
FCO_BENCH_EA_WORKLOADS=3 timeout 200 ncu --clock-control none -k regex:'ea_kernel_(fused_lean|lean_stream)' -c 2 \
  --section SourceCounters --section MemoryWorkloadAnalysis_Tables --section SpeedOfLight -f -o $OUT/zipf \
  build/bin/fco-bench embedding_alltoall -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 1 > $OUT/ncu-run.txt 2>&1
ncu -i $OUT/zipf.ncu-rep --page details --print-details all > $OUT/ncu-details.txt 2>&1; rm -f $OUT/zipf.ncu-rep
{ grep -E "^  [a-z].*ea_kernel|Duration|L1 Wavefronts Shared Excessive|lts__t_requests.sum |L2 Hit Rate For Loads" $OUT/ncu-details.txt | head -20; } > $OUT/ncu-summary.txt
el all done
cat $OUT/p1.txt $OUT/tests.txt $OUT/ncu-summary.txt
