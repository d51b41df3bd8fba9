#!/bin/bash
# Session 9 run 3 (2xH200, commit 4de9ac2, no code change): where impl 2 (chunks) spends the
# extra time — nsys timeline of fco-bench gemm_alltoall -D 0,2 at 512 tokens (eager and graphs).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=4de9ac2
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
which nsys || ls /usr/local/cuda/bin | grep -i nsys || find / -name nsys -type f 2>/dev/null | head -3
NSYS=$(which nsys 2>/dev/null || find / -name nsys -type f 2>/dev/null | head -1)
export FCO_BENCH_GA_SHAPES="512,2048,7168,32,8"
for g in 0 1; do
  timeout 120 $NSYS profile -o $OUT/chunks-g$g -f true --trace=cuda --cuda-graph-trace=node \
    build/bin/fco-bench gemm_alltoall -t nccl -g 2 -G $g -d bf16 -n 6 -w 2 -D 0,2 > $OUT/nsys-g$g.log 2>&1; echo "rc=$?"
  grep -E '^ +[0-9]' $OUT/nsys-g$g.log
  timeout 120 $NSYS stats -q -r cuda_gpu_trace -f csv -o $OUT/trace-g$g $OUT/chunks-g$g.nsys-rep > /dev/null 2>&1; echo "stats rc=$?"
done
ls $OUT
python3 - $OUT <<'PY'
import csv,sys,glob,os
for f in sorted(glob.glob(sys.argv[1]+'/trace-g*_cuda_gpu_trace.csv')):
    rows=list(csv.DictReader(open(f)))
    print('==',os.path.basename(f),len(rows),'rows; keys',list(rows[0].keys())[:12] if rows else None)
    dev0=[r for r in rows if r.get('Device','').find('0')>=0 or r.get('GpuId','0')=='0']
    # last 60 kernel/memcpy events on the first device
    ks=[r for r in rows if ('Name' in r)]
    tail=ks[-80:]
    t0=float(tail[0]['Start (ns)']) if tail else 0
    for r in tail:
        print('%10.1f %8.1f %-6s %-3s %s'%((float(r['Start (ns)'])-t0)/1e3,float(r['Duration (ns)'])/1e3,r.get('Device','')[-6:],r.get('Strm',''),r['Name'][:90]))
PY
