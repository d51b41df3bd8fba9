#!/bin/bash
# Session 27 (one H200): the grouped-tile tests again at local P = 1..8 after expect_split's fix (a split asked for
# is capped by the slots a group, as pick_split does: at P = 6 22 slots for 8 groups give 2 of 3 slices; run
# 3bf8601-tp8 failed there, on the test's expectation, before the P = 6..8 two-phase rows ran).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_MAX_RANKS=8 FCO_TEST_GROUP=only FCO_TEST_QUICK=1 timeout 400 build/tests/test_gemv_allreduce_kernels > $O/test-group-local8.txt 2>&1; echo group tests local P 1..8 rc=$?
pack
grep -E "^P=|PASS|FAIL|while" $O/test-group-local8.txt | head -20
