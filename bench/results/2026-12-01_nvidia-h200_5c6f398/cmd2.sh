#!/bin/bash
# Session 12 run 5 (1 H200, same commit 5c6f398): with the rings aligned, the fused lean kernel's
# knobs again at P = 1 (no communication: pooling efficiency against impl 0's lookup): blocks a SM
# (FCO_EA_LEAN_BLOCKS) x tile order (FCO_EA_LEAN_DYN) x ring stages (FCO_EA_LEAN_STAGES).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=5c6f398
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for kv in "X=0" "FCO_EA_LEAN_BLOCKS=4" "FCO_EA_LEAN_BLOCKS=3" "FCO_EA_LEAN_DYN=0" "FCO_EA_LEAN_DYN=1" "FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_BLOCKS=4" "FCO_EA_LEAN_DYN=0 FCO_EA_LEAN_BLOCKS=4" "FCO_EA_LEAN_STAGES=4"; do
  for d in bf16 f32; do
    echo "== $kv $d"
    env $kv timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d $d -D 0,1 -n 10 -w 3 2>&1 | grep -E "^ +[0-9]" | cut -c1-100
  done
done > $OUT/sweep.txt 2>&1
python3 - $OUT/sweep.txt <<'PY'
import sys
cur=None; tab={}; keys=[]
for l in open(sys.argv[1]):
    if l.startswith('=='):
        cur=l[3:].strip(); continue
    f=l.split()
    if len(f)>10:
        w='/'.join(f[0:4])+' '+f[5]+' '+f[6]
        if w not in tab: tab[w]={}; keys.append(w)
        tab[w][cur]=(float(f[7]), float(f[10]))
confs=[]
for w in keys:
    for c in tab[w]:
        if c.rsplit(' ',1)[0] not in confs: confs.append(c.rsplit(' ',1)[0])
print('%-28s %7s '%('workload','lookup')+' '.join('%9s'%c.replace('FCO_EA_LEAN_','')[:9] for c in confs))
for w in keys:
    d=w.split()[-1]
    row=[tab[w].get(c+' '+d) for c in confs]
    print('%-28s %7.1f '%(w,row[0][0])+' '.join('%9.1f'%r[1] if r else '%9s'%'-' for r in row))
print('columns:', confs)
PY
