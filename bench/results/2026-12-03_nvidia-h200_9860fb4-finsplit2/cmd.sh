#!/bin/bash
# Session 29 (one H200): the cluster pair's split finalise (FCO_GEMV_PAIR_FIN, GarParams::fin_split: the owner and the
# helper of a pair each add, push / write y and reduce half of their group, through run_oneshot_rounds, also at one
# group a block). Part 1 (`bash cmd.sh 1`): the grouped-tile tests (FCO_TEST_GROUP=only: group_tests, twophase, rounds
# with the new fin-split rows) on local P = 1..4 and the operator's test (local); then fco-bench gemv_allreduce impl 0 / 1
# with FCO_GEMV_PAIR_FIN 1 / 0: P = 1 on the per-GPU slices of issue 3's four shapes at P = 2 — the default (pairs at
# 4096x7168), FCO_GEMV_ROUNDS=2 (pairs in 2 rounds, the two-GPU overlap candidate) and FCO_GEMV_GROUP_TMA=8 (pairs of
# groups of 8 where the default takes groups of 4 unsplit) — and local P = 2 with FCO_GEMV_ROUNDS=2. Part 2
# (`bash cmd.sh 2`): the whole C suite (local, quick), the gemv tests on nccl P = 1.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
PART=${1:-1}
O=/tmp/o$PART; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out$PART.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
if [ "$PART" = 2 ]; then
  FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-local.txt 2>&1; echo tests local rc=$?
  FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-nccl.txt 2>&1; echo tests nccl rc=$?
  cp -r build/tests/logs $O/; rm -f $O/build.log; pack
  tail -n 4 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt
  exit 0
fi
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 timeout 240 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local rc=$?
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 120 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
tail -n 3 $O/test-group-local.txt; grep -m5 -iE "fail|error|trap" $O/test-group-local.txt
pack
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 100 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1 -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
S1="8192x4096,8192x14336,4096x7168,16384x8192"
P2="8192x8192,8192x28672,4096x14336"
for f in 1 0; do b def-f$f 1 "$S1" "48,64" FCO_GEMV_PAIR_FIN=$f; done
for f in 1 0; do b r2-f$f 1 "$S1" "48,64" FCO_GEMV_PAIR_FIN=$f FCO_GEMV_ROUNDS=2; done
pack
for f in 1 0; do b g8-f$f 1 "8192x4096,8192x14336" "48,64" FCO_GEMV_PAIR_FIN=$f FCO_GEMV_GROUP_TMA=8; done
for f in 1 0; do b r2-f$f 2 "$P2" "48,64" FCO_GEMV_PAIR_FIN=$f FCO_GEMV_ROUNDS=2; done
pack
python3 - $O <<'PY'
import json, glob, re, sys
O = sys.argv[1]; rows = {}
for f in sorted(glob.glob(O + '/gemv-g*-*-f*.json')):
    g, tag, fin = re.search(r'gemv-g(\d)-(\w+)-f(\d)\.json', f).groups()
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (tag, s['P'], s['N'], s['K'], s['M'])
        d = rows.setdefault(key, {})
        if x['impl_id'] == 0: d['i0'] = x['time_us']
        else:
            m = re.search(r'kG=(\d) split=(\d)[^,]*, (\d+) blocks', x['plan'])
            F = ' F' if 'fin-split' in x['plan'] else ''
            d['f' + fin] = (x['time_us'], '%s/%s/%s%s' % (m.groups() + (F,)) if m else '?', x['wrong'])
print('knobs P  NxK          M   impl0   fin=1 (kG/split/blocks F)   fin=0                  fin1/fin0')
for k in sorted(rows):
    d = rows[k]; line = '%-5s %d  %5dx%-6d %2d  %7.2f' % (k[0], k[1], k[2], k[3], k[4], d.get('i0', 0))
    for t in ('f1', 'f0'):
        line += '  %7.2f %-14s' % (d[t][0], d[t][1] + ('' if d[t][2] == 0 else ' WRONG')) if t in d else '  %22s' % '-'
    if 'f1' in d and 'f0' in d: line += '  %.3f' % (d['f1'][0] / d['f0'][0])
    print(line)
PY
