#!/bin/bash
# Session 9 run 1 (2xH200, commit c32d1a1): test_embedding_alltoall at HEAD (nccl, local), then
# A/B FCO_EA_LEAN_BLOCKS=4 (kIdx kernels, first GPU run of 54956d9) against 3, P = 1 and 2, both
# dtypes; ncu stalls of the 4-block kernel against the lookup on zipf (P = 1).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=c32d1a1
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
E="build/bin/fco-bench embedding_alltoall -G 1 -n 10 -w 2"
{
  for d in bf16 f32; do for b in 3 4; do
    el "$d P=1 BLOCKS=$b"; FCO_EA_LEAN_BLOCKS=$b timeout 40 $E -t nccl -g 1 -d $d -D 0,1 2>&1 | grep -E '^ +[0-9]'
  done; done
  for d in bf16 f32; do for b in 3 4; do
    el "$d P=2 BLOCKS=$b"; FCO_EA_LEAN_BLOCKS=$b timeout 50 $E -t nccl -g 2 -d $d -D 1 2>&1 | grep -E '^ +[0-9]'
  done; done
} > $OUT/ea.txt 2>&1
cut -c1-140 $OUT/ea.txt
for t in nccl local; do
  el "test embedding $t"
  FCO_TEST_TRACE=1 FCO_TRANSPORT=$t timeout 110 build/tests/test_embedding_alltoall > $OUT/test-$t.log 2>&1; echo "rc=$?"
  grep -vE '^>|^ea-prof' $OUT/test-$t.log | tail -2; grep -E '^>' $OUT/test-$t.log | tail -1
done
el "ncu BLOCKS=4 zipf"
FCO_EA_LEAN_BLOCKS=4 FCO_BENCH_EA_WORKLOADS=3 timeout 150 ncu --clock-control none -k regex:'ea_kernel_(lean_stream|fused_lean)' -c 4 \
  --page raw --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum.per_second,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct \
  build/bin/fco-bench embedding_alltoall -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0,1 > $OUT/ncu-stalls.txt 2>&1
echo rc=$?
python3 - $OUT/ncu-stalls.txt <<'PY'
import sys,re
k=None; rows={}; order=[]
for l in open(sys.argv[1]):
    m=re.match(r'\s+(?:void )?(\S*ea_kernel_\w+)',l)
    if m: k=m.group(1)+'#'+str(len(order)); order.append(k); rows[k]={}; continue
    m=re.match(r'\s+(\S+)\s+(\S+)\s+([\d.,]+)\s*$',l)
    if k and m: rows[k][m.group(1)]=m.group(3)
names=sorted({n for r in rows.values() for n in r})
for n in names:
    vals=[rows[k].get(n,'') for k in order]
    try:
        if all(float(v.replace(',',''))<0.05 for v in vals if v): continue
    except: pass
    print('%-60s %s'%(n.replace('smsp__average_warps_issue_stalled_','stall_').replace('_per_issue_active.ratio','')[:60], ' '.join('%12s'%v for v in vals)))
print(' '.join(k.split('#')[0][-24:] for k in order))
PY
el all done
