#!/bin/bash
# Session 12 run 10 (1 H200, commit 65443c9): claims of several tiles (FCO_EA_LEAN_CLAIM 1 / 2 / 4 /
# 8) in the claimed order at P = 1 (nccl, one rank; the claimed order forced with
# FCO_EA_LEAN_DYN=1), both dtypes, every workload, 3 and 4 blocks a SM; then
# test_embedding_alltoall on local with the claimed order and CLAIM=4 forced (correctness).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=65443c9
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for b in 3 4; do for c in 1 2 4 8; do for d in bf16 f32; do
  echo "== B=$b CL=$c $d"
  FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_BLOCKS=$b FCO_EA_LEAN_CLAIM=$c timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d $d -D 0,1 -n 10 -w 3 2>&1 | grep -E "^ +[0-9]" | cut -c1-100
done; done; done > $OUT/sweep.txt 2>&1
FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_CLAIM=4 FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 timeout 200 tests/run.sh test_embedding_alltoall > $OUT/tests.txt 2>&1
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
print('%-28s %7s '%('workload','lookup')+' '.join('%9s'%c for c in confs))
for w in keys:
    d=w.split()[-1]
    row=[tab[w].get(c+' '+d) for c in confs]
    print('%-28s %7.1f '%(w,row[0][0])+' '.join('%9.1f'%r[1] if r else '%9s'%'-' for r in row))
PY
