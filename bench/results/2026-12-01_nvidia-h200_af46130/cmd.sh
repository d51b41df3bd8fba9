#!/bin/bash
# Session 16 run 8 (one H200, commit af46130): the claimed order's queues lifted once a block and
# empty queues skipped. (1) test_embedding_alltoall on local (quick, P 1..4) and nccl (P = 1);
# (2) run 88b00dd-ea-short's short-bag rows again (batch / 1 and / 16) and its profile;
# (3) every embedding workload at P = 1, -D 0,1 (long bags unchanged?); (4) local P = 2, -D 0,1,
# beside run 8b9715b-local.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=af46130
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o8; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
for tr in local nccl; do
  el "test_embedding_alltoall $tr"; FCO_TEST_QUICK=1 FCO_TRANSPORT=$tr timeout 150 build/tests/test_embedding_alltoall > $O/ea-test-$tr.txt 2>&1; echo rc=$?; tail -2 $O/ea-test-$tr.txt
done
pack
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 20 -w 3 -R 2"
row() { grep -E '^ +[0-9]' | cut -c1-150; }
for div in 1 16; do
  echo "== batch / $div"; FCO_BENCH_EA_WORKLOADS=4,6 FCO_BENCH_EA_BATCH_DIV=$div timeout 60 $B 2>&1 | tee -a $O/div.txt | row
done
echo "== static order"; FCO_EA_LEAN_DYN=0 FCO_BENCH_EA_WORKLOADS=4,6 timeout 60 $B 2>&1 | tee -a $O/div.txt | row
echo "== profile (eager)"; FCO_EA_PROFILE=1 FCO_BENCH_EA_WORKLOADS=4,6 timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 0 -d bf16 -D 1 -n 3 -w 1 > $O/prof.txt 2>&1; grep ea-prof $O/prof.txt | sed -n '3p;8p'
pack
el "P=1 all workloads"; timeout 120 $B -J $O/ea-p1.json > $O/ea-p1.txt 2>&1; echo rc=$?; row < $O/ea-p1.txt
pack
el "local P=2"; timeout 150 build/bin/fco-bench embedding_alltoall -t local -g 2 -G 1 -d bf16 -D 0,1 -n 10 -w 2 -R 2 -J $O/ea-local.json > $O/ea-local.txt 2>&1; echo rc=$?; row < $O/ea-local.txt
pack
el all done
