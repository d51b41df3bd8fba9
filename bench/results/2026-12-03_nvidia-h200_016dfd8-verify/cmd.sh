#!/bin/bash
# Session 32 (one H200), commit 016dfd8: verify the host-side refactor (fco_gemv_ar_tma_tile shared by the launcher and
# the op layer): the gemv test programs at local P 1..4 (quick) and nccl P = 1; the op test again with
# FCO_GEMV_GROUP_TMA=0 (auto_rule's tile-off expectations, never run on a GPU before).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 300 tests/run.sh test_gemv_allreduce test_gemv_allreduce_kernels test_gemv_allreduce_group > $O/gemv-local.txt 2>&1; echo gemv local rc=$?
cp -r build/tests/logs $O/logs-default 2>/dev/null; pack
FCO_GEMV_GROUP_TMA=0 FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 120 build/tests/test_gemv_allreduce > $O/gemv-local-tma0.txt 2>&1; echo gemv local TMA=0 rc=$?
for t in test_gemv_allreduce test_gemv_allreduce_kernels test_gemv_allreduce_group; do
  FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 timeout 90 build/tests/$t > $O/$t-nccl.txt 2>&1; echo $t nccl P=1 rc=$?
done
pack
grep -vE "^    \|" $O/gemv-local.txt | tail -8
grep -hE "ok \(|auto_rule|FAIL" $O/gemv-local-tma0.txt | tail -8
