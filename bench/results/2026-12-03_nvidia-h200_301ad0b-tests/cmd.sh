#!/bin/bash
# Session 31 (one H200), commit 301ad0b: the tests after the local M 9..16 rule (LL at P = 2 with N <= 4096, else the TMA
# tile) and the split of the grouped tiles' tests into test_gemv_allreduce_group: the whole local suite (tests/run.sh,
# quick, P 1..4, its default 120 s bound a test), the three gemv test programs on nccl at P = 1; fco-bench local P = 2 at
# M 9 / 16: AUTO beside LL and the tile (the rule's choice at N 4096 and 8192).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_BENCH_GEMV_NK="4096x4096,4096x14336,8192x8192" FCO_BENCH_GEMV_M=9,16 timeout 100 build/bin/fco-bench gemv_allreduce -t local -g 2 -d bf16 -D oneshot_ll_pdl,1,auto -R 3 -G 1 -J $O/gemv-p2.json > $O/gemv-p2.txt 2>&1; echo bench rc=$?
for t in test_gemv_allreduce test_gemv_allreduce_kernels test_gemv_allreduce_group; do
  FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 timeout 60 build/tests/$t > $O/$t-nccl.txt 2>&1; echo $t nccl P=1 rc=$?
done
pack
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 400 tests/run.sh > $O/suite-local.txt 2>&1; echo local suite rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
tail -n 2 $O/suite-local.txt; grep -E "FAIL|gemv" $O/suite-local.txt | head
grep -h "ok (" $O/logs/local/test_gemv_allreduce_*.log
python3 - $O <<'PY'
import json, sys
for x in json.load(open(sys.argv[1] + '/gemv-p2.json'))['results']:
    s = x['shape']
    print('%5dx%-6d M %2d %-15s %8.2f wrong %d  %s' % (s['N'], s['K'], s['M'], x['impl'], x['time_us'], x['wrong'], x['plan'][x['plan'].find('kernel'):][:60] if x['impl'] == 'auto' else ''))
PY
