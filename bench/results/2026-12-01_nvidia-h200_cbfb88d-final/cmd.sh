#!/bin/bash
# Session 18 run 11 (one H200, commit cbfb88d): the session's last code — the C suite (quick) on
# local (P = 1..4).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=cbfb88d
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o11; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 timeout 230 tests/run.sh > $O/tests-local.txt 2>&1; echo rc=$?
cp -r build/tests/logs $O/; rm -f $O/build.log; tar czf $OUT/out.tgz -C $O .
tail -n 1 $O/tests-local.txt; grep -E "^FAIL" $O/tests-local.txt
