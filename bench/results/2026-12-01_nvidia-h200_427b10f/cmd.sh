#!/bin/bash
# Session 15 run 6 (one H200, commit 427b10f): gemm AUTO at one rank (tiles where K <= 2048, else
# impl 0): test_gemm_alltoall on local (quick), gemm P = 1 every impl beside AUTO.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=427b10f
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
for t in test_gemm_alltoall; do
  el "$t local"; FCO_TEST_QUICK=1 FCO_TRANSPORT=local timeout 150 build/tests/$t > $O/$t-local.txt 2>&1; echo rc=$?; tail -2 $O/$t-local.txt
done
pack
el "gemm P=1"; timeout 150 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -n 10 -w 2 -R 3 -J $O/ga-p1.json > $O/ga-p1.txt 2>&1; echo rc=$?
pack
for f in ga-p1; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|^# +[tB]' $O/$f.txt | cut -c1-200; done
python3 -c "
import json
for f in ['ga-p1']:
  d=json.load(open('$O/'+f+'.json'))
  for r in d['results']:
    if r['impl']=='auto': print(f, r['shape'], r['dtype'], r.get('plan'))
"
el all done
