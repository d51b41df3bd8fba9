#!/bin/bash
# Session 14 run 9 (1 H200, commit 509d6b8): GroupWgmma's slabs rotated per group (every block of the
# grid no longer starts at x's slab 0) — grouped tests on local (FCO_TEST_GROUP=only, P 1..4),
# fco-bench P = 1 at M 48 / 64, gemv_group_probe with x per W set (rows "xs") and "norot".
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=509d6b8
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
mkdir -p /tmp/o; O=/tmp/o
find build/obj -name '*.o' -exec touch {} +
(make -j16 NCCL_HOME=$NCCL_HOME && make -j16 NCCL_HOME=$NCCL_HOME tests) > $O/build.log 2>&1; echo "make rc $?"
FCO_TEST_GROUP=only FCO_TRANSPORT=local timeout 200 build/tests/test_gemv_allreduce > $O/test-group-local.txt 2>&1
echo "group tests rc $?"; tail -2 $O/test-group-local.txt
export FCO_BENCH_GEMV_NK="4096x14336,4096x7168,8192x4096,8192x8192,16384x8192,4096x4096" FCO_BENCH_GEMV_M="64,48"
timeout 150 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 20 -w 5 -R 3 -J $O/p1.json > $O/p1.txt 2>&1
echo "p1 rc $?"; grep -E '^ +[0-9]' $O/p1.txt
timeout 250 build/probe/gemv_group_probe 20 > $O/probe.txt 2>&1; echo "probe rc $?"
tar czf $OUT/out.tgz -C $O .
grep -E "cublas bf16|lib|read W|wrong:" $O/probe.txt
