#!/bin/bash
# Session 39's leftover for one H200 (written after the session's device time was spent): the new case of
# test_embedding_alltoall_bad (a bad index's own per-sample weight NaN / Inf; passed on the cpu transport,
# never on a GPU) on local (P = 1..4) and nccl (one rank), and test_embedding_alltoall on local for the
# same build. About 60 s after the build (carry build/obj built on the CPU machine to skip the device
# compile: `make -j2 && make -j2 tests`, strip with `find build/obj -name '*.o' | xargs strip --strip-debug`).
# Copy into bench/results/<date>_nvidia-h200_<commit>/cmd.sh when it runs.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tests > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 120 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-$tr.log 2>&1
  echo "test_embedding_alltoall_bad $tr rc=$?"; tail -2 $O/test-ea-bad-$tr.log
done
FCO_TRANSPORT=local timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-local.log 2>&1
echo "test_embedding_alltoall local rc=$?"; grep -E "^P=|PASS|FAIL" $O/test-ea-local.log | head -6
pack
