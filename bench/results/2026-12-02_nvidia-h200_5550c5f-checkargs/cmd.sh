#!/bin/bash
# Session 27 (one H200): test_gemv_allreduce with FCO_CHECK_ARGS=1 also on the grouped tiles (impl 1 at M 48, impl 2 at
# M 64): local P = 1..4 and nccl P = 1 (quick).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 120 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 timeout 120 build/tests/test_gemv_allreduce > $O/test-op-nccl.txt 2>&1; echo op test nccl rc=$?
rm -f $O/build.log; pack
tail -n 3 $O/test-op-local.txt; tail -n 3 $O/test-op-nccl.txt
