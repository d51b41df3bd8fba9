#!/bin/bash
# Session 38 (one H200): the row split's arithmetic moved to fco_ea_row_share (plan header, shared
# with the CPU test): test_embedding_alltoall (local P = 1..4, nccl P = 1), the bad-input test, the
# plan test, and fco-bench embedding_alltoall P = 1 bf16 (impl 0 and fused) on all nine workloads.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o8; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log; el build
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr rc=$?"; grep -E "^P=|PASS|FAIL" $O/test-ea-$tr.log | head -6
done
FCO_TRANSPORT=local timeout 100 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-local.log 2>&1; el "test_embedding_alltoall_bad local rc=$?"
FCO_TRANSPORT=local timeout 60 build/tests/test_ea_plan > $O/test-ea-plan.log 2>&1; el "test_ea_plan rc=$?"
timeout 120 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1 -R 3 -n 10 -w 3 -J $O/p1-bf16.json > $O/p1-bf16.txt 2>&1; el "p1 bf16 rc=$?"
pack
grep -v "^#  " $O/p1-bf16.txt | grep "^ \|wrong" | cut -c1-150
