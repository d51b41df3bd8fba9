#!/bin/bash
# Session 23 (one H200, commit 4ca8e3b, the build of run 849434b-final): where is the TMA tile's fixed ~6.5 µs over cuBLAS
# (K sweep, runs 5bdd21a-pair / 849434b-final)? ncu's kernel durations (no launch gaps) of impl 1 (the fused kernel)
# and impl 0's cuBLAS GEMM at P = 1, M 64, N 8192, K 2048 / 4096 / 8192 / 28672, eager, 2 iterations a shape.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=4ca8e3b
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
which ncu || ls /usr/local/cuda/bin | grep -i ncu
M="gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,sm__cycles_active.avg,smsp__cycles_active.avg"
for cc in none base; do
FCO_BENCH_GEMV_NK=8192x2048,8192x4096,8192x8192,8192x28672 FCO_BENCH_GEMV_M=64 timeout 200 ncu --clock-control $cc --metrics $M --csv -c 300 \
  build/bin/fco-bench gemv_allreduce -t local -g 1 -G 0 -d bf16 -n 2 -w 1 -R 1 -D 0,1 > $O/ncu-$cc.csv 2> $O/ncu-$cc.err; echo ncu $cc rc=$?
done
rm -f $O/build.log; pack
python3 - $O/ncu-none.csv <<'PY'
import csv, sys, re, statistics as st
rows=[r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h=rows[0]; idx={k:i for i,k in enumerate(h)}
agg={}
for r in rows[1:]:
    if len(r)<len(h): continue
    name=r[idx['Kernel Name']][:60]; key=(r[idx['ID']],name)
    agg.setdefault(key,{})[r[idx['Metric Name']]]=r[idx['Metric Value']]
out={}
for (i,name),m in agg.items():
    g=m.get('launch__grid_size','?'); d=m.get('gpu__time_duration.sum','?'); b=m.get('dram__bytes_read.sum','?')
    out.setdefault((name,g,b[:6] if b!='?' else b),[]).append(d)
for k,v in out.items(): print(k, v[:8])
PY
