#!/bin/bash
# Session 18 run 5 (one H200, commit f2ae367): gemv impl 4 with the push / reduce kernels that keep
# bytes in flight — test_gemv_allreduce (quick) on local P = 1..4 and nccl P = 1; fco-bench gemv
# on local P = 2 with FCO_GEMV_CHUNKS 1, 2, 4 against impl 3 (M 16 / 64), and P = 4 at the default.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=f2ae367
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o5; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
for t in local nccl; do
  FCO_TRANSPORT=$t FCO_TEST_QUICK=1 timeout 250 build/tests/test_gemv_allreduce > $O/test-gemv-$t.txt 2>&1; echo "test gemv $t rc=$?"; tail -1 $O/test-gemv-$t.txt
done
for C in 1 2 4; do
  FCO_GEMV_CHUNKS=$C FCO_BENCH_GEMV_NK=8192x8192,16384x16384,8192x28672,4096x14336 FCO_BENCH_GEMV_M=16,64 timeout 100 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 10 -w 3 -R 3 -D 0,3,4 -J $O/chunks$C-local2.json > $O/chunks$C-local2.txt 2>&1; echo "C=$C rc=$?"
  grep -E '^ +[0-9]' $O/chunks$C-local2.txt | cut -c1-150
done
FCO_BENCH_GEMV_NK=8192x8192,16384x16384 FCO_BENCH_GEMV_M=16,64 timeout 100 build/bin/fco-bench gemv_allreduce -t local -g 4 -G 1 -d bf16 -n 10 -w 3 -R 3 -D 0,3,4 -J $O/local4.json > $O/local4.txt 2>&1; echo "P=4 rc=$?"
grep -E '^ +[0-9]' $O/local4.txt | cut -c1-150
python3 -c "
import json; d=json.load(open('$O/local4.json'))
print(sorted({r.get('plan') for r in d['results'] if r['impl_id']==4}))"
tar czf $OUT/out.tgz -C $O .
