#!/bin/bash
# Session 14 run 7 (1 H200, commit fd9cbc9): the grouped wgmma tile out of line — grouped tests on
# local (FCO_TEST_GROUP=only, P 1..4), fco-bench P = 1 at M 48 / 64, ncu of the grouped kernel.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=fd9cbc9
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p /tmp/o; O=/tmp/o
find build/obj -name '*.o' -exec touch {} +
(make -j16 NCCL_HOME=$NCCL_HOME && make -j16 NCCL_HOME=$NCCL_HOME tests) > $O/build.log 2>&1; echo "make rc $?"
FCO_TEST_GROUP=only FCO_TRANSPORT=local timeout 200 build/tests/test_gemv_allreduce > $O/test-group-local.txt 2>&1
echo "group tests rc $?"; tail -3 $O/test-group-local.txt
export FCO_BENCH_GEMV_NK="4096x14336,4096x7168,8192x4096,8192x8192,16384x8192,4096x4096" FCO_BENCH_GEMV_M="64,48"
timeout 150 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 20 -w 5 -R 3 -J $O/p1.json > $O/p1.txt 2>&1
echo "p1 rc $?"; grep -E '^ +[0-9]' $O/p1.txt
FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=64 timeout 150 ncu --clock-control none -k regex:gemv_allreduce_kernel -c 1 \
  --section SpeedOfLight --section WarpStateStats --section LaunchStats --section SchedulerStats -f -o $O/op \
  build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 0 -d bf16 -n 1 -w 0 -D 1 > $O/ncu-op.txt 2>&1; echo "ncu rc $?"
ncu -i $O/op.ncu-rep --page details --print-details all > $O/details-op.txt 2>&1; rm -f $O/op.ncu-rep
tar czf $OUT/out.tgz -C $O .
grep -E "^    (Duration|DRAM Throughput|Issued Warp Per Scheduler|Registers Per Thread) " $O/details-op.txt | sed -E 's/ +/ /g' | sort -u
