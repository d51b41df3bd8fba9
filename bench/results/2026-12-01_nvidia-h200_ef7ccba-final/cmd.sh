#!/bin/bash
# Session 16 run 9 (one H200, commit ef7ccba): the C suite on local (quick, P 1..4) and nccl (one
# rank) at the session's last code (af46130's kernel + comments, docs, fco-bench list checks).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=ef7ccba
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o9; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
for tr in local nccl; do
  el "C suite $tr"; FCO_TRANSPORT=$tr BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 timeout 280 tests/run.sh > $O/tests-$tr.txt 2>&1; echo rc=$?
  tail -1 $O/tests-$tr.txt; grep -E "FAIL|SKIP" $O/tests-$tr.txt | head
  pack
done
el all done
