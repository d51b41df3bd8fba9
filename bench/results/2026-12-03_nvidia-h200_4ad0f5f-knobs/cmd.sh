#!/bin/bash
# Session 33 (one H200), commit 4ad0f5f: the host-side knob parsers of src/cuda through fco_env_int.
# test_gemm_alltoall_checks (its new knob read-back part) and test_config_env (session 32's knob message,
# CPU-tested only) on local and nccl; then the whole local suite (quick, P 1..4).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for tr in local nccl; do
  for t in test_gemm_alltoall_checks test_config_env; do
    FCO_TRANSPORT=$tr FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 120 build/tests/$t > $O/$t-$tr.txt 2>&1; echo "$t $tr rc=$?"
  done
done
pack
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 400 tests/run.sh > $O/suite-local.txt 2>&1; echo local suite rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
grep -h "knobs read back\|PASS\|FAIL" $O/test_*.txt
cat $O/suite-local.txt | grep -vE "^    \|" | tail -30
