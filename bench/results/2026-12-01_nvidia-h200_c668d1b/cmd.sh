#!/bin/bash
# Session 16 run 4 (one H200, commit c668d1b): the C suite on local (quick, P 1..4) and on nccl
# (one rank); fco-bench gemm P = 1 (-R 4) and embedding P = 1 (plans after the hooks moved to
# the header); targets.py on both.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=c668d1b
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o4; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
for tr in local nccl; do
  el "C suite $tr"; FCO_TRANSPORT=$tr BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 timeout 280 tests/run.sh > $O/tests-$tr.txt 2>&1; echo rc=$?
  tail -3 $O/tests-$tr.txt; grep -E "FAIL" $O/tests-$tr.txt | head
  pack
done
el "gemm P=1"; timeout 120 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -n 10 -w 2 -R 4 -J $O/ga-p1.json > $O/ga-p1.txt 2>&1; echo rc=$?
el "embedding P=1"; timeout 90 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1,auto -n 10 -w 2 -R 3 -J $O/ea-p1.json > $O/ea-p1.txt 2>&1; echo rc=$?
python3 bench/targets.py $O/ga-p1.json $O/ea-p1.json > $O/targets.txt 2>&1
pack
for f in ga-p1 ea-p1; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|^# +[tB]|auto ran' $O/$f.txt | cut -c1-200; done
echo "== targets"; tail -1 $O/targets.txt; grep MISSED $O/targets.txt
python3 -c "
import json
for f in ['ea-p1']:
  d=json.load(open('$O/'+f+'.json'))
  for r in d['results'][:3]: print(f, r['impl'], r.get('plan'))
"
el all done
