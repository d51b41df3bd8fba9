#!/bin/bash
# Session 25 (one H200), the last call: the whole C suite (quick) on the local transport, P = 1..4, at the session's
# final kernels (5236acd's; later commits docs / comments / results). Logs straight into $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > /tmp/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh > $OUT/tests-local.txt 2>&1; echo local rc=$?
cp -r build/tests/logs/local $OUT/logs-local 2>/dev/null
tail -n 26 $OUT/tests-local.txt
