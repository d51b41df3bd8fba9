#!/bin/bash
# Session 31 (one H200), commit 59e5e11: the whole local suite (tests/run.sh, quick, P 1..4, its default 120 s a test)
# after the threaded gemv reference and auto_rule's fix; the gemv test programs on nccl at P = 1.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 420 tests/run.sh > $O/suite-local.txt 2>&1; echo local suite rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
for t in test_gemv_allreduce test_gemv_allreduce_group; do
  FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 timeout 60 build/tests/$t > $O/$t-nccl.txt 2>&1; echo $t nccl P=1 rc=$?
done
pack
cat $O/suite-local.txt | grep -vE "^    \|" | tail -30
grep -h "ok (" $O/logs/local/test_gemv_allreduce*.log
