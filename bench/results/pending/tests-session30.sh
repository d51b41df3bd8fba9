#!/bin/bash
# PENDING (session 30 ran out of device time). Copy to bench/results/<date>_nvidia-h200_<commit>-tests30/cmd.sh and run it
# with FCO_COMMIT=<commit> on one H200 (~200 s). The TMA tile is impl 1 / 2's default at M 9..32 since 05e8b39; its
# kernels test ran every part at P = 1 only (run 1ca1a2c-tests, call 2), P = 2 stopped in ll_vs_plain (fixed in 61b5c39).
# (1) test_gemv_allreduce_kernels, every part, quick, local P = 1..4; (2) the whole local suite, quick, P 1..4
# (tests/run.sh); (3) test_gemv_allreduce on nccl P = 1.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 300 build/tests/test_gemv_allreduce_kernels > $O/test-kernels-local.txt 2>&1; echo kernels test local rc=$?
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 timeout 40 build/tests/test_gemv_allreduce > $O/test-op-nccl.txt 2>&1; echo op test nccl P=1 rc=$?
pack
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 240 tests/run.sh > $O/suite-local.txt 2>&1; echo local suite rc=$?
rm -f $O/build.log; cp -r build/tests/logs $O/ 2>/dev/null; pack
for f in test-kernels-local test-op-nccl suite-local; do echo "== $f"; tail -n 3 $O/$f.txt; grep -m5 -E "FAIL" $O/$f.txt; done
