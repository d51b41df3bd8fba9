#!/bin/bash
# Session 28 (one H200): rounds by default where owner blocks take several groups anyway (FCO_GEMV_ROUNDS unset).
# The grouped-tile tests (FCO_TEST_GROUP=only, rounds_tests with the unset / off rows) on local P = 1..6, the operator's
# test and the whole kernels test (local P = 1..4, quick); fco-bench gemv_allreduce impl 0 / 1 with FCO_GEMV_ROUNDS
# unset against 1 (off) at local P = 2, 4 (the four shapes) and 8 (8192², 4096×14336), M 48 / 64.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=6 timeout 280 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local P1..6 rc=$?
tail -n 2 $O/test-group-local.txt; grep -m5 -iE "fail|error|trap" $O/test-group-local.txt
pack
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 120 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1 -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
P2="8192x8192,8192x28672,4096x14336,16384x16384"
for g in 2 4; do b off $g "$P2" "48,64" FCO_GEMV_ROUNDS=1; b auto $g "$P2" "48,64"; done
b off 8 "8192x8192,4096x14336" "48,64" FCO_GEMV_ROUNDS=1; b auto 8 "8192x8192,4096x14336" "48,64"
pack
python3 - $O <<'PY'
import json, glob, re, sys
O = sys.argv[1]; rows = {}
for f in sorted(glob.glob(O + '/gemv-g*-*.json')):
    tag = re.search(r'-(off|auto)\.json', f).group(1)
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (s['P'], s['N'], s['K'], s['M'])
        d = rows.setdefault(key, {})
        if x['impl_id'] == 0: d.setdefault('i0', []).append(x['time_us'])
        else:
            m = re.search(r'kG=(\d) split=(\d)( pair)?( rounds=\d)?[^,]*, (\d+) blocks', x['plan'])
            d[tag] = (x['time_us'], ('%s/%s%s/%s' % (m.group(1), m.group(2), m.group(4) or '', m.group(5))) if m else '?', x['wrong'])
print('P  NxK          M   impl0 (off run, auto run)   impl1 off (kG/split/blocks)   impl1 auto               auto/off')
for k in sorted(rows):
    d = rows[k]; i0 = d.get('i0', [0, 0])
    o, a = d.get('off'), d.get('auto')
    print('%d  %5dx%-6d %2d  %7.2f %7.2f   %7.2f %-18s %7.2f %-22s %.3f %s' % (k[0], k[1], k[2], k[3], i0[0], i0[-1], o[0], o[1], a[0], a[1], a[0] / o[0], '' if o[2] == 0 and a[2] == 0 else 'WRONG'))
PY
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce test_gemv_allreduce_kernels test_example_gemv_allreduce > $O/tests-local.txt 2>&1; echo tests local rc=$?
cp -r build/tests/logs $O/; rm -f $O/build.log; pack
tail -n 4 $O/tests-local.txt
