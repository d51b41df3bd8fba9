#!/bin/bash
# Session 12 run 8 (1 H200, commit 731ced0): larger lean tiles (FCO_EA_LEAN_CHUNKS = 4 default, 8,
# 16) at P = 1 (nccl, one rank): impl 0's lookup and the fused kernel, static and claimed order, both
# dtypes, every workload; test_embedding_alltoall on local with CHUNKS=16 (larger tiles, same code).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=731ced0
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for c in 4 8 16; do for dyn in 0 1; do for d in bf16 f32; do
  echo "== C=$c DYN=$dyn $d"
  FCO_EA_LEAN_CHUNKS=$c FCO_EA_LEAN_DYN=$dyn timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d $d -D 0,1 -n 10 -w 3 2>&1 | grep -E "^ +[0-9]" | cut -c1-100
done; done; done > $OUT/sweep.txt 2>&1
FCO_EA_LEAN_CHUNKS=16 FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 timeout 200 tests/run.sh test_embedding_alltoall > $OUT/tests.txt 2>&1
tail -2 $OUT/tests.txt
python3 - $OUT/sweep.txt <<'PY'
import sys
cur=None; tab={}; keys=[]; confs=[]
for l in open(sys.argv[1]):
    if l.startswith('=='):
        cur=l[3:].strip(); c=cur.rsplit(' ',1)[0]
        if c not in confs: confs.append(c)
        continue
    f=l.split()
    if len(f)>11:
        w='/'.join(f[0:4])+' '+f[5]+' '+f[6]
        if w not in tab: tab[w]={}; keys.append(w)
        tab[w][cur]=(float(f[7]), float(f[11]))
print('%-28s '%'workload'+' '.join('%8s'%('L'+c.split()[0][2:]) for c in confs if c.endswith('DYN=0'))+' '+' '.join('%11s'%c.replace('DYN=','D') for c in confs))
for w in keys:
    d=w.split()[-1]
    row=[tab[w].get(c+' '+d) for c in confs]
    print('%-28s '%w+' '.join('%8.1f'%r[0] for c,r in zip(confs,row) if c.endswith('DYN=0'))+' '+' '.join('%11.1f'%r[1] for r in row))
PY
