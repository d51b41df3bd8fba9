#!/bin/bash
# Session 14 run 3 (1 H200, commit c46fad7): split groups in the grouped GEMV tiles —
# test_gemv_allreduce (full) on local P 1..4, then fco-bench at M 48 / 64, split auto vs
# FCO_GEMV_SPLIT=1 side by side (P = 1 nccl, and local with 2 virtual ranks).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_COMMIT=c46fad7 FCO_TIMEOUT_MS=15000
mkdir -p /tmp/o
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
find build/obj -name '*.o' -exec touch {} +
(make -j16 NCCL_HOME=$NCCL_HOME && make -j16 NCCL_HOME=$NCCL_HOME tests) > /tmp/o/build.log 2>&1
echo "make rc $?"
T0=$(date +%s)
FCO_TRANSPORT=local timeout 300 build/tests/test_gemv_allreduce > /tmp/o/test-gemv-local.txt 2>&1
echo "test_gemv_allreduce local rc $? in $(($(date +%s) - T0)) s"
grep -E "^P=|PASS|FAIL|ASSERT" /tmp/o/test-gemv-local.txt | tail -12
export FCO_BENCH_GEMV_NK="4096x14336,4096x7168,8192x4096,8192x8192,4096x4096"
export FCO_BENCH_GEMV_M="64,48"
for sp in auto 1; do
  if [ $sp = auto ]; then unset FCO_GEMV_SPLIT; else export FCO_GEMV_SPLIT=$sp; fi
  timeout 150 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 20 -w 5 -R 3 \
    -J /tmp/o/p1-split-$sp.json > /tmp/o/p1-split-$sp.txt 2>&1; echo "p1 split=$sp rc $?"
  FCO_BENCH_GEMV_NK="4096x14336,8192x8192" timeout 100 build/bin/fco-bench gemv_allreduce -t local -g 2 \
    -G 1 -d bf16 -D 0,1,3 -n 20 -w 5 -R 3 -J /tmp/o/local-split-$sp.json > /tmp/o/local-split-$sp.txt 2>&1
  echo "local split=$sp rc $?"
done
unset FCO_GEMV_SPLIT
tar czf $OUT/out.tgz -C /tmp/o .
for f in /tmp/o/p1-split-auto.txt /tmp/o/p1-split-1.txt /tmp/o/local-split-auto.txt /tmp/o/local-split-1.txt; do
  echo "---- $f"; grep -v '^# progress' $f | tail -n 25
done
