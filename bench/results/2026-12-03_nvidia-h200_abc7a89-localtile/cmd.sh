#!/bin/bash
# Session 31 (one H200): local AUTO at M 9..16 on the TMA tile's plain pushes (abc7a89: LL off on local from M 9 by
# default, no W-size revision on the tile's vector path), and session 30's pending tests (tests-session30.sh).
# PART=1: build; op test local quick P 1..4 (auto_rule's new M 12 / 16 plans) and nccl P = 1; fco-bench local P = 2, 4, 8
# at M 9 / 12 / 16 (8192x8192, 4096x14336, 8192x28672; impl 0, oneshot (LL=0: the tile), oneshot_ll_pdl (the LL
# kernels as the old default ran them), twophase, AUTO); the kernels test, every part, quick, local P 1..4.
# PART=2: the bench again (second invocation of each P), and at N 4096 / 2048 (4096x4096, 4096x7168, 4096x28672,
# 2048x8192; P = 2, 4: call 1 had LL ahead of the tile at 4096x14336 P = 2); the local suite (tests/run.sh, quick, P 1..4).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
PART=${PART:-1}
O=/tmp/o$PART; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out$PART.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
NK="8192x8192,4096x14336,8192x28672"
b() { local tag=$1 g=$2; shift 2; env "$@" FCO_BENCH_GEMV_NK="$NK" FCO_BENCH_GEMV_M=9,12,16 timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1,oneshot_ll_pdl,2,auto -R 3 -G 1 -J $O/gemv-$tag.json > $O/gemv-$tag.txt 2>&1; echo $tag rc=$?; }
if [ $PART = 1 ]; then
  FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 90 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
  FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 timeout 40 build/tests/test_gemv_allreduce > $O/test-op-nccl.txt 2>&1; echo op test nccl P=1 rc=$?
  pack
  b p2-1 2; b p4-1 4; b p8-1 8; pack
  FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 240 build/tests/test_gemv_allreduce_kernels > $O/test-kernels-local.txt 2>&1; echo kernels test local rc=$?
  pack
  for f in test-op-local test-op-nccl test-kernels-local; do echo "== $f"; tail -n 2 $O/$f.txt; grep -m5 -E "FAIL|expected" $O/$f.txt; done
else
  b p8-2 8; b p4-2 4; b p2-2 2; NK="4096x4096,4096x7168,4096x28672,2048x8192"; b p2n-1 2; b p4n-1 4; pack
  FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 300 tests/run.sh > $O/suite-local.txt 2>&1; echo local suite rc=$?
  cp -r build/tests/logs $O/ 2>/dev/null; pack
  tail -n 3 $O/suite-local.txt; grep -m5 FAIL $O/suite-local.txt
fi
python3 - $O <<'PY'
import json, glob, re, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/gemv-*.json')):
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (s['P'], s['N'], s['K'], s['M'])
        rows.setdefault(key, {}).setdefault(x['impl'], []).append(x['time_us'] if x['wrong'] == 0 else -1)
print('P NxK          M   impls (us)')
for k in sorted(rows):
    d = rows[k]
    print('%d %5dx%-6d %2d  ' % k + '  '.join('%s %s' % (t, '/'.join('%.2f' % v for v in d[t])) for t in sorted(d)))
PY
