#!/bin/bash
# Session 16 run 2 (one H200, commit 650f691): gemm impl 0 at one rank writes out directly; the
# one-rank AUTO rule (tiles where a_rows <= 256 per expert). Tests: test_gemm_alltoall on local
# (quick, P 1..4) and nccl (P = 1), test_last_plan on local; fco-bench gemm P = 1, standard
# workloads, -R 4 (4 columns: balanced order), and rows per expert 256 / 384 / 512.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=650f691
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o2; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
for tr in local nccl; do
  el "test_gemm_alltoall $tr"; FCO_TEST_QUICK=1 FCO_TRANSPORT=$tr timeout 150 build/tests/test_gemm_alltoall > $O/ga-test-$tr.txt 2>&1; echo rc=$?; tail -3 $O/ga-test-$tr.txt
done
el "test_last_plan local"; FCO_TRANSPORT=local timeout 60 build/tests/test_last_plan > $O/last-plan.txt 2>&1; echo rc=$?; tail -1 $O/last-plan.txt
pack
el "gemm P=1 standard, -R 4"; FCO_BENCH_PROGRESS=1 timeout 150 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -n 10 -w 2 -R 4 -J $O/ga-p1.json > $O/ga-p1.txt 2> $O/ga-p1.err; echo rc=$?
pack
S="1024,2048,4096,8,2;1536,2048,4096,8,2;2048,2048,4096,8,2;1024,14336,4096,8,2;1536,14336,4096,8,2;2048,14336,4096,8,2;1024,2048,7168,32,8;1536,2048,7168,32,8"
el "gemm P=1 rows per expert 256..512"; FCO_BENCH_GA_SHAPES="$S" timeout 200 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1,auto -n 10 -w 2 -R 6 -J $O/ga-rows.json > $O/ga-rows.txt 2>&1; echo rc=$?
pack
for f in ga-p1 ga-rows; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|^# +[tB]|auto ran' $O/$f.txt | cut -c1-200; done
python3 -c "
import json
for f in ['ga-p1','ga-rows']:
  d=json.load(open('$O/'+f+'.json'))
  for r in d['results']:
    if r['impl'] in ('auto','nccl'): print(f, r['shape'], r['impl'], r.get('plan'))
"
el all done
