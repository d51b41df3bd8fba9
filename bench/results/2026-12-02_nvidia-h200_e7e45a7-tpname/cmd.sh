#!/bin/bash
# Session 27 (one H200): the grouped-tile tests (FCO_TEST_GROUP=only, quick) at local P = 1..4 with expect_twophase
# (impl 2's plan names the two-phase kernel where every rank owns a group; host code only: the sm_90a gemv kernels are
# byte-identical to 3bf8601's).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 timeout 200 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local rc=$?
rm -f $O/build.log; pack
grep -E "^P=|PASS|FAIL|while" $O/test-group-local.txt | head -12
