#!/bin/bash
# Session 30 (one H200): the TMA tile by default at M 9..32 (impl 1 / 2, bf16 / f16, not LL; kTmaMinM), local AUTO fused
# at M 17..32. (1) The grouped-tile tests (FCO_TEST_GROUP=only, quick, local P = 1..2) and the operator's test (local,
# quick, P 1..4: AUTO's rule at M 24). (2) fco-bench at P = 1, M 4 / 8 / 9 / 16 / 24 / 32: the default against
# FCO_GEMV_GROUP_TMA=0 (the one-tile kernels below M 33), alternating invocations (i = 1, 2). (3) local P = 2 at M 16 / 24:
# impls 0, 1, 2, AUTO, and impls 1, 2 with FCO_GEMV_GROUP_TMA=0; local P = 4 at M 24: impl 0 and AUTO.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=2 timeout 150 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local rc=$?
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 60 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
for f in test-group-local test-op-local; do echo "== $f"; tail -n 2 $O/$f.txt; grep -m5 -iE "fail|error|trap|mismatch" $O/$f.txt; done; pack
b() { local tag=$1 g=$2 D=$3 nk=$4 m=$5; shift 5; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M=$m timeout 120 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D $D -R 3 -G 1 -J $O/gemv-$tag.json > $O/gemv-$tag.txt 2>&1; echo $tag rc=$?; }
S="8192x4096,4096x7168,8192x14336,16384x8192,8192x8192,4096x14336"
for i in 1 2; do
  b def-$i 1 0,1 "$S" 4,8,9,16,24,32; b old-$i 1 1 "$S" 4,8,9,16,24,32 FCO_GEMV_GROUP_TMA=0
done
pack
S2="8192x8192,4096x14336,8192x28672"
b p2def-1 2 0,1,2,auto "$S2" 16,24; b p2old-1 2 1,2 "$S2" 16,24 FCO_GEMV_GROUP_TMA=0; b p4def-1 4 0,auto "$S2" 24
rm -f $O/build.log; pack
python3 - $O <<'PY'
import json, glob, re, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/gemv-*.json')):
    tag = re.search(r'gemv-(.*)-\d\.json', f).group(1)
    P = 0
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (s['P'], s['N'], s['K'], s['M'])
        if x['impl_id'] == 0 and x['impl'] != 'auto': rows.setdefault(key, {}).setdefault('cublas', []).append(x['time_us'])
        else: rows.setdefault(key, {}).setdefault(tag + ':' + x['impl'], []).append(x['time_us'] if x['wrong'] == 0 else -1)
print('P NxK          M   impl0   impl 1 by knobs (invocations)')
for k in sorted(rows):
    d = rows[k]
    print('%d %5dx%-6d %2d  %6.2f  ' % (k[0], k[1], k[2], k[3], min(d.get('cublas', [0]))) + '  '.join('%s %s' % (t, '/'.join('%.2f' % v for v in d[t])) for t in sorted(d) if t != 'cublas'))
PY
python3 -c "
import json
for f in ['def-1', 'p2def-1']:
    for x in json.load(open('$O/gemv-%s.json' % f))['results']:
        if x['impl_id'] != 0 or x['impl'] == 'auto': print(f, x['shape']['N'], x['shape']['K'], x['shape']['M'], x['impl'], x['plan'][x['plan'].find('impl'):][:150])" | grep -E " (9|16|24) " | head -40
