#!/bin/bash
# Session 17 run 1 (one H200, commit 7f065bc): the C suite on the local transport with worlds up to
# P = 8 virtual ranks on one GPU (FCO_TEST_MAX_RANKS=8; never run above 4 before) — issue 7's
# preparation: what breaks at P = 5..8 shows here, not on a scarce x8 machine.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=7f065bc
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { cp -r build/tests/logs $O/ 2>/dev/null; tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
FCO_TEST_MAX_RANKS=8 FCO_TEST_QUICK=1 FCO_TEST_TRACE=0 FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=400 timeout 540 tests/run.sh > $O/tests-local8.txt 2>&1; echo rc=$?
pack
cat $O/tests-local8.txt | cut -c1-200 | tail -60
el all done
