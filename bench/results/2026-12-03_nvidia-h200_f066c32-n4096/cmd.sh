#!/bin/bash
# Session 31 (one H200), commit f066c32 (library objects as 301ad0b): (1) the three gemv test programs, local, quick,
# P 1..4 (gemv_each_world, the fixture's world loop); (2) why the TMA tile loses to LL at N <= 4096 at local P = 2: its
# group size (the rule takes groups of 4 unsplit there; FCO_GEMV_GROUP_TMA=8: groups of 8 in cluster pairs) against
# LL, at P = 2 (4096x4096, 4096x7168, 2048x8192) and P = 1 (4096x7168, the per-GPU slice of 4096x14336 on two GPUs:
# the one-tile kernels vs the tile's two group sizes), M 9 / 16, alternating invocations.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 200 tests/run.sh test_gemv_allreduce test_gemv_allreduce_kernels test_gemv_allreduce_group > $O/tests-local.txt 2>&1; echo gemv tests local rc=$?
tail -n 4 $O/tests-local.txt; pack
b() { local tag=$1 g=$2 D=$3 nk=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M=9,16 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D $D -R 3 -G 1 -J $O/gemv-$tag.json > $O/gemv-$tag.txt 2>&1; echo $tag rc=$?; }
S2="4096x4096,4096x7168,2048x8192"
for i in 1 2; do
  b p2def-$i 2 1,oneshot_ll_pdl "$S2"; b p2g8-$i 2 1 "$S2" FCO_GEMV_GROUP_TMA=8
  b p1def-$i 1 1 4096x7168; b p1g8-$i 1 1 4096x7168 FCO_GEMV_GROUP_TMA=8; b p1old-$i 1 1 4096x7168 FCO_GEMV_GROUP_TMA=0
done
pack
python3 - $O <<'PY'
import json, glob, re, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/gemv-*.json')):
    tag = re.search(r'gemv-p\d(.*)-\d\.json', f).group(1)
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (s['P'], s['N'], s['K'], s['M'])
        if x['impl_id'] == 0: continue
        rows.setdefault(key, {}).setdefault(tag + ':' + x['impl'], []).append(x['time_us'] if x['wrong'] == 0 else -1)
for k in sorted(rows):
    d = rows[k]
    print('%d %5dx%-6d %2d  ' % k + '  '.join('%s %s' % (t, '/'.join('%.2f' % v for v in d[t])) for t in sorted(d)))
PY
