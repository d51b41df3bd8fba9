#!/bin/bash
# Session 28 (one H200): impl 1 in rounds (FCO_GEMV_ROUNDS: a block takes several groups as rounds of one TMA ring,
# run_oneshot_rounds; cluster pairs hand off through st.async + mbarriers). First the grouped-tile tests
# (FCO_TEST_GROUP=only: impl 1's rows, twophase_group_tests, the new rounds_tests) on local P = 1..4 and the operator's
# test (local); then fco-bench gemv_allreduce impl 0 / 1 with FCO_GEMV_ROUNDS unset / 2 / 3 / 4: P = 1 on the per-GPU
# slices of issue 3's four shapes at P = 2 (the rounds' cost where nothing is pushed), local P = 2 and P = 4 on the four
# shapes (several groups a block: the ring that runs on); then the whole C suite (local, quick), gemv tests on nccl P = 1.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 timeout 240 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local rc=$?
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 120 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
tail -n 3 $O/test-group-local.txt; grep -m5 -iE "fail|error|trap" $O/test-group-local.txt
pack
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 120 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1 -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
S1="8192x4096,8192x14336,4096x7168,16384x8192"
P2="8192x8192,8192x28672,4096x14336,16384x16384"
for r in 1 2 3 4; do b r$r 1 "$S1" "48,64" FCO_GEMV_ROUNDS=$r; done
pack
for r in 1 2 4; do b r$r 2 "$P2" "48,64" FCO_GEMV_ROUNDS=$r; done
pack
for r in 1 2 4; do b r$r 4 "$P2" "48,64" FCO_GEMV_ROUNDS=$r; done
pack
python3 - $O <<'PY'
import json, glob, re, sys
O = sys.argv[1]; rows = {}
for f in sorted(glob.glob(O + '/gemv-g*-r*.json')):
    tag = re.search(r'-(r\d)\.json', f).group(1)
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (s['P'], s['N'], s['K'], s['M'])
        d = rows.setdefault(key, {})
        if x['impl_id'] == 0: d['i0'] = x['time_us']
        else:
            m = re.search(r'kG=(\d) split=(\d)[^,]*, (\d+) blocks', x['plan'])
            d[tag] = (x['time_us'], '%s/%s/%s' % m.groups() if m else '?', x['wrong'])
print('P  NxK          M   impl0    r1 (kG/split/blocks)      r2                    r3                    r4')
for k in sorted(rows):
    d = rows[k]; line = '%d  %5dx%-6d %2d  %7.2f' % (k[0], k[1], k[2], k[3], d.get('i0', 0))
    for t in ('r1', 'r2', 'r3', 'r4'):
        line += '  %7.2f %-12s' % (d[t][0], d[t][1] + ('' if d[t][2] == 0 else ' WRONG')) if t in d else '  %20s' % '-'
    print(line)
PY
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-local.txt 2>&1; echo tests local rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-nccl.txt 2>&1; echo tests nccl rc=$?
cp -r build/tests/logs $O/; rm -f $O/build.log; pack
tail -n 4 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt
