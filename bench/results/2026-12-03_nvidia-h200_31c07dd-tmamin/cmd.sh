#!/bin/bash
# Session 31 (one H200), commit 31c07dd: kTmaMinM (the TMA tile from M 9) at M 9..16 at P = 1 — impl 1's default (the
# tile) against FCO_GEMV_GROUP_TMA=0 (the one-tile kernels), six per-GPU shapes, M 9..16, alternating invocations.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
b() { local tag=$1; shift; env "$@" FCO_BENCH_GEMV_NK="8192x4096,4096x7168,8192x14336,16384x8192,8192x8192,4096x14336" FCO_BENCH_GEMV_M=9,10,11,12,13,14,15,16 timeout 80 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 1 -R 3 -G 1 -J $O/gemv-$tag.json > $O/gemv-$tag.txt 2>&1; echo $tag rc=$?; }
for i in 1 2; do b def-$i; b old-$i FCO_GEMV_GROUP_TMA=0; done
pack
python3 - $O <<'PY'
import json, glob, re, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/gemv-*.json')):
    tag = re.search(r'gemv-(.*)-\d\.json', f).group(1)
    for x in json.load(open(f))['results']:
        s = x['shape']; key = (s['N'], s['K'], s['M'])
        if x['impl_id'] == 0: continue
        rows.setdefault(key, {}).setdefault(tag, []).append(x['time_us'] if x['wrong'] == 0 else -1)
print('NxK          M   tile (def)     one-tile (old)  ratio of bests')
for k in sorted(rows):
    d = rows[k]
    print('%5dx%-6d %2d  ' % k + '%-14s %-14s  %.3f' % ('/'.join('%.2f' % v for v in d['def']), '/'.join('%.2f' % v for v in d['old']), min(d['def']) / min(d['old'])))
PY
