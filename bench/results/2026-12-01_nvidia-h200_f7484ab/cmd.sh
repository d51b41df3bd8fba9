#!/bin/bash
# Session 15 run 10 (one H200, commit f7484ab): after the review's PlanSpan refactor (host strings
# of the embedding / gemm launchers) and test_last_plan's helpers: test_last_plan,
# test_embedding_alltoall, test_gemm_alltoall on local (quick); fco-bench embedding / gemm local
# P = 2 with the plans printed.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=f7484ab
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o10; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
for t in test_last_plan test_embedding_alltoall test_gemm_alltoall; do
  FCO_TEST_QUICK=1 FCO_TRANSPORT=local timeout 150 build/tests/$t > $O/$t.txt 2>&1; echo "$t rc=$?"; tail -1 $O/$t.txt
done
grep "ran" $O/test_last_plan.txt
FCO_BENCH_EA_WORKLOADS=0,4 timeout 60 build/bin/fco-bench embedding_alltoall -t local -g 2 -G 1 -d bf16 -n 5 -w 2 -J $O/ea.json > $O/ea.txt 2>&1; echo rc=$?
FCO_BENCH_GA_SHAPES="512,2048,7168,32,8;1024,14336,4096,8,2" timeout 60 build/bin/fco-bench gemm_alltoall -t local -g 2 -G 1 -d bf16 -n 5 -w 2 -J $O/ga.json > $O/ga.txt 2>&1; echo rc=$?
python3 -c "
import json
for f in ['ea','ga']:
  for r in json.load(open('$O/'+f+'.json'))['results']: print(f, r['impl'], r['time_us'], r.get('wrong'), '|', r.get('plan'))
"
tar czf $OUT/out.tgz -C $O .
