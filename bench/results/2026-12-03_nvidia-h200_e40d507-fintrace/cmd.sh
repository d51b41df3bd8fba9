#!/bin/bash
# Session 29 (one H200): the cluster pair's split finalise (FCO_GEMV_PAIR_FIN) after its hand-off loops were factored
# into GroupTma::hand_frags / keep_frags. (1) The grouped-tile tests (FCO_TEST_GROUP=only, quick, local P = 1..3).
# (2) fco-bench, the normal build, graphs, P = 1, bf16, M 48 / 64, alternating invocations (i = 1, 2): 4096x7168 (pairs
# by default) with / without the split finalise; N 8192 in the default's unsplit groups of 4 against pairs of groups
# of 8 (FCO_GEMV_GROUP_TMA=8) with / without it, for the launcher's choice between the two. (3) Where a pair's time
# goes, M 64, 4096x7168 and 8192x4096 in pairs of groups of 8, PAIR_FIN 1 / 0: the FCO_GEMV_TRACE build (`make
# gemv-trace`, relinked over the normal object; blocks 0 and 1 — owner and helper of pair 0 — record %globaltimer;
# slots as in gemv_group_tma.cuh: with the split finalise (run_oneshot_rounds, one round) "out" = the hand-off done,
# "handoff" = the pushes / y issued, "finish" = the round's last barrier; without it (run / run_split_helper) "out" =
# out written, "handoff" = the cluster hand-off, "finish" = the pushes).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=3 timeout 200 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local rc=$?
tail -n 2 $O/test-group-local.txt; pack
# the normal build, alternating invocations (i = 1, 2), M 48 / 64: 4096x7168 with / without the split finalise; N 8192
# in the default's unsplit groups of 4 (g4) against pairs of groups of 8 with / without it (g8-f1 / g8-f0)
b() { local tag=$1 nk=$2; shift 2; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M=48,64 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 0,1 -R 3 -G 1 -J $O/gemv-$tag.json > $O/gemv-$tag.txt 2>&1; echo $tag rc=$?; }
N8="8192x4096,8192x14336"
for i in 1 2; do
  b def-f1-$i 4096x7168 FCO_GEMV_PAIR_FIN=1; b def-f0-$i 4096x7168 FCO_GEMV_PAIR_FIN=0
  b g4-$i "$N8"; b g8-f1-$i "$N8" FCO_GEMV_GROUP_TMA=8; b g8-f0-$i "$N8" FCO_GEMV_GROUP_TMA=8 FCO_GEMV_PAIR_FIN=0
done
pack
cp build/obj/trace/gemv_allreduce.o build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o && make -j16 NCCL_HOME=$NCCL_HOME >> $O/build.log 2>&1 || { echo relink failed; tail -5 $O/build.log; }
t() { local tag=$1 nk=$2; shift 2; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M=64 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -n 20 -w 2 -R 1 -D 1 > $O/gtrace-$tag.txt 2>&1; echo trace $tag rc=$?; }
for f in 1 0; do t def-f$f 4096x7168 FCO_GEMV_PAIR_FIN=$f; t g8-f$f 8192x4096 FCO_GEMV_PAIR_FIN=$f FCO_GEMV_GROUP_TMA=8; done
rm -f $O/build.log; pack
python3 - $O <<'PY'
import json, glob, re, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/gemv-*.json')):
    tag = re.search(r'gemv-(.*)-\d\.json', f).group(1)
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (s['N'], s['K'], s['M'])
        if x['impl_id'] == 0: rows.setdefault(key, {}).setdefault('cublas', []).append(x['time_us'])
        else: rows.setdefault(key, {}).setdefault(tag, []).append(x['time_us'] if x['wrong'] == 0 else -1)
print('NxK          M   cublas   impl 1 by knobs (two invocations each)')
for k in sorted(rows):
    d = rows[k]
    print('%5dx%-6d %2d  %6.2f  ' % (k[0], k[1], k[2], min(d['cublas'])) + '  '.join('%s %s' % (t, '/'.join('%.2f' % v for v in d[t])) for t in sorted(d) if t != 'cublas'))
PY
python3 - $O <<'PY'
import glob, re, statistics, sys
keys = ['view', 'init', 'issue0', 'data0', 'lastmma', 'out', 'handoff', 'finish', 'end']
print('median over calls, ns from the block\'s start: ' + ' '.join('%8s' % k for k in keys))
for f in sorted(glob.glob(sys.argv[1] + '/gtrace-*.txt')):
    per = {0: [], 1: []}
    for line in open(f):
        m = re.match(r'gtrace block (\d) pair \d t0 \d+: (.*)', line)
        if m: per[int(m.group(1))].append(dict(re.findall(r'(\w+) (-?\d+)', m.group(2))))
    for b in (0, 1):
        rows = per[b]
        if not rows: continue
        med = [statistics.median(int(r[k]) for r in rows) if all(k in r for r in rows) else 0 for k in keys]
        print('%-22s block %d (%2d calls): ' % (f.split('gtrace-')[1][:-4], b, len(rows)) + ' '.join('%8d' % v for v in med))
PY
