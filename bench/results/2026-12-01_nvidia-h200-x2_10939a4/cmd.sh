#!/bin/bash
# Session 11 run 2 (2xH200): gemm_alltoall at K 14336 in rounds (-R 5), graphs and eager, with the
# GPUs' clocks / power / temperature logged beside it (smi.csv): is the gap between chunks and the
# overlap bound real or drift?
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=10939a4
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
{
  export FCO_BENCH_GA_SHAPES="4096,14336,4096,8,2;1024,14336,4096,8,2;1024,14336,4096,8,2,4"
  B="build/bin/fco-bench gemm_alltoall -t nccl -g 2 -d bf16 -D 0,1,2"
  for g in 1 0; do
    el "graph $g, -R 5 -n 10"
    $B -G $g -R 5 -n 10 -w 2 2>&1 | grep -E '^ +[0-9]|^# (op|tok)'
  done
  el "graph 1, -R 1 -n 50 (the old way)"
  $B -G 1 -n 50 -w 2 2>&1 | grep -E '^ +[0-9]|^# (op|tok)'
  el done
} > $OUT/ga.txt 2>&1
kill $SMI
el all done
cat $OUT/ga.txt
python3 - "$OUT/smi.csv" <<'PY'
import sys, collections
rows=[l.strip().split(', ') for l in open(sys.argv[1]) if l[0].isdigit() or l.startswith('20')]
by=collections.defaultdict(list)
for r in rows:
    try: by[r[1]].append((float(r[2].split()[0]), float(r[4].split()[0]), float(r[5])))
    except Exception: pass
for g,v in by.items():
    c=[x[0] for x in v]; p=[x[1] for x in v]; t=[x[2] for x in v]
    print(f"gpu {g}: {len(v)} samples, sm MHz min/median/max {min(c)}/{sorted(c)[len(c)//2]}/{max(c)}, W max {max(p)}, temp {min(t)}-{max(t)}")
PY
