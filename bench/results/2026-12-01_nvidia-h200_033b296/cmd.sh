#!/bin/bash
# Session 14 run 5 (1 H200, commit 033b296): one kernel per grouped tile (wgmma / mma.sync) —
# test_gemv_allreduce (full) on local P 1..4; fco-bench P = 1 at M 48 / 64 (split auto and off,
# FCO_GEMV_GROUP_MMA=1 for the mma.sync kernel); gemv_group_probe timed back to back.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_COMMIT=033b296 FCO_TIMEOUT_MS=15000
mkdir -p /tmp/o
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
find build/obj -name '*.o' -exec touch {} +
(make -j16 NCCL_HOME=$NCCL_HOME && make -j16 NCCL_HOME=$NCCL_HOME tests) > /tmp/o/build.log 2>&1
echo "make rc $?"
T0=$(date +%s)
FCO_TRANSPORT=local timeout 300 build/tests/test_gemv_allreduce > /tmp/o/test-gemv-local.txt 2>&1
echo "test_gemv_allreduce local rc $? in $(($(date +%s) - T0)) s"
grep -E "^P=|PASS|FAIL|ASSERT" /tmp/o/test-gemv-local.txt | tail -8
export FCO_BENCH_GEMV_NK="4096x14336,4096x7168,8192x4096,8192x8192,16384x8192,4096x4096"
export FCO_BENCH_GEMV_M="64,48"
b() { # tag env...
  local tag=$1; shift
  env "$@" timeout 150 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 20 -w 5 -R 3 \
    -J /tmp/o/p1-$tag.json > /tmp/o/p1-$tag.txt 2>&1; echo "p1 $tag rc $?"
}
b split-auto FCO_X=1
b split-1 FCO_GEMV_SPLIT=1
b mma FCO_GEMV_GROUP_MMA=1
timeout 200 build/probe/gemv_group_probe 20 > /tmp/o/probe.txt 2>&1; echo "probe rc $?"
tar czf $OUT/out.tgz -C /tmp/o .
for t in split-auto split-1 mma; do grep -E '^ +[0-9]' /tmp/o/p1-$t.txt | sed "s/^/$t /"; done
grep -E "cublas bf16|lib|tmawk8 S=8 ks|read W" /tmp/o/probe.txt
