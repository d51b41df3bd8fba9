#!/bin/bash
# Session 9 run 6 (2xH200, commit 4868f9b): the push kernel's placement in shared memory (the
# chunks regression of 4de9ac2) — test_gemm_alltoall (quick) on nccl and local, then fco-bench
# gemm_alltoall, every impl, ordinary out and FCO_BENCH_SYM=1, in one run.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=4868f9b
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for t in nccl local; do
  el "test_gemm_alltoall $t (quick)"
  FCO_TEST_QUICK=1 FCO_TEST_TRACE=1 FCO_TRANSPORT=$t timeout 150 build/tests/test_gemm_alltoall > $OUT/ga-$t.log 2>&1; echo "rc=$?"
  grep -vE '^>' $OUT/ga-$t.log | tail -2
done
G="build/bin/fco-bench gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3"
el "ga plain"; timeout 120 $G > $OUT/ga-plain.txt 2>&1; echo rc=$?
el "ga sym"; FCO_BENCH_SYM=1 timeout 120 $G > $OUT/ga-sym.txt 2>&1; echo rc=$?
for f in plain sym; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror' $OUT/ga-$f.txt | cut -c1-150; done
el all done
