#!/bin/bash
# Session 19 run 7 (one H200, commit 5c0af8f): the session's last code (tests' common end of main, t_pass; library as 3187af0) —
# the C suite (quick) on local (P = 1..4) and nccl (one GPU: P = 1).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=5c0af8f
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-local.txt 2>&1; echo rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-nccl.txt 2>&1; echo rc=$?
cp -r build/tests/logs $O/; pack
tail -n 2 $O/tests-local.txt; tail -n 2 $O/tests-nccl.txt
el C suites done
