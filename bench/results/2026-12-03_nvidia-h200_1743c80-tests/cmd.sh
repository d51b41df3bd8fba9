#!/bin/bash
# Session 28 (one H200): the grouped-tile tests at 1743c80 (oneshot_group_push4: the sm_90a cubin byte-identical to
# 4d1b112's; tests: tma_plan behind expect_rounds / expect_auto_rounds), FCO_TEST_GROUP=only on local P = 1..3, quick.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=3 timeout 200 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local P1..3 rc=$?
grep -E "^P=|PASS|FAIL" $O/test-group-local.txt; grep -m5 -iE "fail|error|trap" $O/test-group-local.txt
rm -f $O/build.log; pack
