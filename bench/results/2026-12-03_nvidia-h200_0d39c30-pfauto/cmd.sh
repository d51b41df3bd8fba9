#!/bin/bash
# Session 32 (one H200): the PDL prefetch by kernel (FCO_GEMV_PDL_PREFETCH unset: the TMA tile prefetches its ring's
# first two stages of W — 64 KiB in groups of 8, 32 KiB in groups of 4 —, the one-tile kernels 32 KiB as before).
# (1) The gemv test programs, local, quick, P 1..4. (2) impl 1 with the knob unset against FCO_GEMV_PDL_PREFETCH=32768
# (the previous default), P = 1, local, bf16, CUDA graphs, -R 3, alternating invocations (i = 1, 2); cuBLAS alone once.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 300 tests/run.sh test_gemv_allreduce test_gemv_allreduce_kernels test_gemv_allreduce_group > $O/tests-local.txt 2>&1; echo gemv tests local rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
NK=8192x4096,8192x14336,16384x8192,4096x7168
FCO_BENCH_GEMV_NK=$NK FCO_BENCH_GEMV_M=16,64 timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 0 -R 3 -G 1 -J $O/cublas.json > $O/cublas.txt 2>&1; echo cublas rc=$?
for i in 1 2; do
  FCO_BENCH_GEMV_NK=$NK FCO_BENCH_GEMV_M=16,64 timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 1 -R 3 -G 1 -J $O/auto-$i.json > $O/auto-$i.txt 2>&1; echo auto $i rc=$?
  FCO_GEMV_PDL_PREFETCH=32768 FCO_BENCH_GEMV_NK=$NK FCO_BENCH_GEMV_M=16,64 timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 1 -R 3 -G 1 -J $O/pf32k-$i.json > $O/pf32k-$i.txt 2>&1; echo pf32k $i rc=$?
done
pack
grep -vE "^    \|" $O/tests-local.txt | tail -5
python3 - $O <<'PY'
import json, glob, re, sys
rows = {}
def impl1(f):
    for x in json.load(open(f))['results']:
        if x['impl_id'] == 1: yield x
for x in json.load(open(sys.argv[1] + '/cublas.json'))['results']:
    if x['impl_id'] == 0:
        s = x['shape']; rows.setdefault((s['N'], s['K'], s['M']), {})['cublas'] = x['time_us']
for f in sorted(glob.glob(sys.argv[1] + '/auto-*.json') + glob.glob(sys.argv[1] + '/pf32k-*.json')):
    tag = re.search(r'/(auto|pf32k)-', f).group(1)
    for x in impl1(f):
        s = x['shape']; rows.setdefault((s['N'], s['K'], s['M']), {}).setdefault(tag, []).append(x['time_us'] if x['wrong'] == 0 else -1)
print('NxK          M  cublas   unset (two runs)   32 KiB (two runs)   ratio (best/best)')
for k in sorted(rows):
    d = rows[k]
    a, b = d.get('auto', [0]), d.get('pf32k', [0])
    print('%5dx%-6d %2d  %6.2f   %s   %s   %.3f' % (k[0], k[1], k[2], d.get('cublas', 0), '/'.join('%.2f' % v for v in a), '/'.join('%.2f' % v for v in b), min(a) / min(b)))
PY
