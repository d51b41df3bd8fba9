#!/bin/bash
# Session 30 (one H200): tests of the TMA tile's default at M 9..32 after the test fix (group_tests' default-bound calls
# ran with FCO_GEMV_GROUP_TMA=0 left set in run 05e8b39-tma9): test_gemv_allreduce_kernels, every part (chain, LL,
# grouped tiles, PDL), quick, local P = 1..2; test_gemv_allreduce quick on local (P 1..4) and on nccl (P = 1).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 60 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 timeout 40 build/tests/test_gemv_allreduce > $O/test-op-nccl.txt 2>&1; echo op test nccl P=1 rc=$?
pack
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=2 timeout 240 build/tests/test_gemv_allreduce_kernels > $O/test-kernels-local.txt 2>&1; echo kernels test local rc=$?
rm -f $O/build.log; pack
for f in test-op-local test-op-nccl test-kernels-local; do echo "== $f"; tail -n 3 $O/$f.txt; grep -m5 -iE "fail|error|trap|mismatch" $O/$f.txt; done
