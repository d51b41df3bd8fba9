#!/bin/bash
# Session 32 (one H200): the PDL prologue's W prefetch (FCO_GEMV_PDL_PREFETCH, bytes a block, default 32768, chosen in
# session 24 for the one-tile kernels) for the TMA tile: 0 / 32 / 64 / 128 / 256 KiB (the launcher caps a grid at
# 32 MiB: 256 KiB for 128 blocks), normal build, impl 1, P = 1, local, bf16, CUDA graphs, -R 3, two alternating
# invocations; cuBLAS alone (impl 0) once. Then the FCO_GEMV_TRACE build at 0 and 128 KiB, the print every 8th call
# (run b81e345-every8: every call's print made some SMs late), for the first data's latency (data0 − issue0). And
# local P = 2 at N 4096 / 2048, M 9 / 16: the tile against the LL kernels, timed and (the tile) traced.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
NK=4096x7168,8192x4096,8192x14336
FCO_BENCH_GEMV_NK=$NK,4096x4096 FCO_BENCH_GEMV_M=16,64 timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 0 -R 3 -G 1 -J $O/cublas.json > $O/cublas.txt 2>&1; echo cublas rc=$?
for i in 1 2; do
  for pf in 0 32768 65536 131072 262144; do
    FCO_GEMV_PDL_PREFETCH=$pf FCO_BENCH_GEMV_NK=$NK,4096x4096 FCO_BENCH_GEMV_M=16,64 timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 1 -R 3 -G 1 -J $O/pf$pf-$i.json > $O/pf$pf-$i.txt 2>&1; echo pf $pf $i rc=$?
  done
done
# local P = 2, N <= 4096, M 9 / 16: the TMA tile (impl 1) against the LL kernels (oneshot_ll_pdl), where session 31 found
# LL 1-15 % ahead (run abc7a89-localtile); traced below
FCO_BENCH_GEMV_NK=4096x4096,2048x8192 FCO_BENCH_GEMV_M=9,16 timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 2 -d bf16 -D 0,1,oneshot_ll_pdl -R 3 -G 1 -J $O/p2.json > $O/p2.txt 2>&1; echo p2 rc=$?
pack
cp build/obj/trace/gemv_allreduce.o build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o && make -j16 NCCL_HOME=$NCCL_HOME >> $O/build.log 2>&1 || { echo relink failed; tail -5 $O/build.log; }
rm -f $O/build.log
for pf in 0 131072; do
  for c in "def-f1 4096x7168 64" "g8-f1 8192x4096 64"; do
    set -- $c; tag=$1 nk=$2 m=$3
    FCO_GEMV_PDL_PREFETCH=$pf FCO_GEMV_TRACE_EVERY=8 FCO_BENCH_GEMV_NK=$nk FCO_BENCH_GEMV_M=$m timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -n 20 -w 2 -R 1 -D 1 > $O/gtrace-$tag-pf$pf.txt 2>&1; echo trace $tag pf $pf rc=$?
  done
done
for m in 9 16; do
  FCO_GEMV_TRACE_EVERY=8 FCO_BENCH_GEMV_NK=4096x4096 FCO_BENCH_GEMV_M=$m timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 20 -w 2 -R 1 -D 1 > $O/gtrace-p2-m$m.txt 2>&1; echo trace p2 m $m rc=$?
done
python3 bench/probe/gtrace_summary.py $O/gtrace-*.txt > $O/summary.txt
xz -T8 $O/gtrace-*.txt; pack
python3 - $O <<'PY'
import json, glob, re, sys
rows = {}
for x in json.load(open(sys.argv[1] + '/cublas.json'))['results']:
    s = x['shape']; rows.setdefault((s['N'], s['K'], s['M']), {})['cublas'] = [x['time_us']]
for f in sorted(glob.glob(sys.argv[1] + '/pf*.json')):
    pf = int(re.search(r'pf(\d+)-', f).group(1))
    for x in json.load(open(f))['results']:
        s = x['shape']; rows.setdefault((s['N'], s['K'], s['M']), {}).setdefault(pf, []).append(x['time_us'] if x['wrong'] == 0 else -1)
pfs = [0, 32768, 65536, 131072, 262144]
print('NxK          M  cublas ' + ' '.join('%13s' % ('pf %dK' % (p // 1024)) for p in pfs))
for k in sorted(rows):
    d = rows[k]
    print('%5dx%-6d %2d  %6.2f ' % (k[0], k[1], k[2], d['cublas'][0]) + ' '.join('%13s' % '/'.join('%.2f' % v for v in d.get(p, [])) for p in pfs))
PY
grep -E "^   *[0-9]+ +[0-9]+ +(9|16) " $O/p2.txt
grep -A3 "^== " $O/summary.txt | grep -E "==|p50"
