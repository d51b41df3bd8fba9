#!/bin/bash
# Session 30 (one H200): the TMA tile's x box of M rows (GroupTma::x_rows; run 0c2bdbb-tma32 found the 64-row box slower
# the smaller M: the rows outside x filled with zeros). (1) The grouped-tile tests (FCO_TEST_GROUP=only, quick, local
# P = 1..2), the operator's test (local, quick) with knobs unset and with FCO_GEMV_GROUP_TMA=8 / 4 + FCO_GEMV_AR_LL=0
# (every M on the TMA tile). (2) fco-bench at P = 1, M 1 / 16 / 24 / 32 / 48: default against FCO_GEMV_GROUP_TMA=8 / 4,
# alternating invocations (i = 1, 2) — M 48 is the default's TMA tile, whose box changed too (16 rows fewer). (3) local
# P = 2 at M 16 and 32: default (M 16: LL) / the TMA tile with FCO_GEMV_AR_LL=0.
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
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_GEMV_GROUP_TMA=8 FCO_GEMV_AR_LL=0 timeout 90 build/tests/test_gemv_allreduce > $O/test-op-local-tma8.txt 2>&1; echo op test local TMA8 LL0 rc=$?
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_GEMV_GROUP_TMA=4 FCO_GEMV_AR_LL=0 timeout 90 build/tests/test_gemv_allreduce > $O/test-op-local-tma4.txt 2>&1; echo op test local TMA4 LL0 rc=$?
for f in test-group-local test-op-local test-op-local-tma8 test-op-local-tma4; do echo "== $f"; tail -n 2 $O/$f.txt; grep -m5 -iE "fail|error|trap|mismatch" $O/$f.txt; done; pack
b() { local tag=$1 g=$2 D=$3 nk=$4 m=$5; shift 5; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M=$m timeout 120 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D $D -R 3 -G 1 -J $O/gemv-$tag.json > $O/gemv-$tag.txt 2>&1; echo $tag rc=$?; }
S="8192x4096,4096x7168,8192x14336,16384x8192,8192x8192,4096x14336"
for i in 1 2; do
  b def-$i 1 0,1 "$S" 1,16,24,32,48; b t8-$i 1 1 "$S" 1,16,24,32,48 FCO_GEMV_GROUP_TMA=8; b t4-$i 1 1 "$S" 1,16,24,32,48 FCO_GEMV_GROUP_TMA=4
done
pack
S2="8192x8192,4096x14336,8192x28672"
b p2def-1 2 0,1 "$S2" 16,32; b p2t8-1 2 1 "$S2" 16,32 FCO_GEMV_AR_LL=0 FCO_GEMV_GROUP_TMA=8; b p2t4-1 2 1 "$S2" 16,32 FCO_GEMV_AR_LL=0 FCO_GEMV_GROUP_TMA=4
rm -f $O/build.log; pack
python3 - $O <<'PY'
import json, glob, re, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/gemv-*.json')):
    tag = re.search(r'gemv-(.*)-\d\.json', f).group(1)
    P = 0
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (s['P'], s['N'], s['K'], s['M'])
        if x['impl_id'] == 0: rows.setdefault(key, {}).setdefault('cublas', []).append(x['time_us'])
        else: rows.setdefault(key, {}).setdefault(tag, []).append(x['time_us'] if x['wrong'] == 0 else -1)
print('P NxK          M   impl0   impl 1 by knobs (invocations)')
for k in sorted(rows):
    d = rows[k]
    print('%d %5dx%-6d %2d  %6.2f  ' % (k[0], k[1], k[2], k[3], min(d.get('cublas', [0]))) + '  '.join('%s %s' % (t, '/'.join('%.2f' % v for v in d[t])) for t in sorted(d) if t != 'cublas'))
PY
