#!/bin/bash
# Session 16 run 3 (one H200, commit 2e8a8d6): the one-rank AUTO rule by the per-expert maximum
# (counts_host); test_gemm_alltoall local + nccl (P = 1 rule cases); ga_grouped_probe with the
# per-expert loop on 2 / 4 streams; fco-bench gemm P = 1 standard workloads -R 4.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=2e8a8d6
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o3; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
mkdir -p build/probe && nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude bench/probe/ga_grouped_probe.cu -lcublas -o build/probe/ga_grouped_probe >> $O/build.log 2>&1
el build done
for tr in local nccl; do
  el "test_gemm_alltoall $tr"; FCO_TEST_QUICK=1 FCO_TRANSPORT=$tr timeout 150 build/tests/test_gemm_alltoall > $O/ga-test-$tr.txt 2>&1; echo rc=$?; tail -3 $O/ga-test-$tr.txt
done
timeout 120 build/probe/ga_grouped_probe 20 > $O/probe.txt 2>&1; echo rc=$?; cat $O/probe.txt
pack
el "gemm P=1 standard, -R 4"; timeout 150 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -n 10 -w 2 -R 4 -J $O/ga-p1.json > $O/ga-p1.txt 2>&1; echo rc=$?
pack
grep -E '^ +[0-9]|wrong|rror|^# +[tB]|auto ran' $O/ga-p1.txt | cut -c1-200
el all done
