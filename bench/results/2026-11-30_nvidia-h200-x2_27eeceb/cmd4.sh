#!/bin/bash
# Session 8 run 9 (2xH200, commit 27eeceb): stall reasons (ncu raw metrics) of impl 0's lean
# lookup kernel and the fused lean kernel at P = 1 (local transport), bf16, zipf and 16384/8/128/32.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=27eeceb
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_BENCH_EA_WORKLOADS=0,3 timeout 250 ncu --clock-control none -k regex:'ea_kernel_(lean_stream|fused_lean)' -c 6 \
  --page raw --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',gpu__time_duration.sum,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,smsp__sass_inst_executed_op_ldgsts.sum \
  build/bin/fco-bench embedding_alltoall -t local -g 1 -G 0 -n 1 -w 0 -d bf16 -D 0,1 > $OUT/ncu-stalls.txt 2>&1
echo rc=$?
python3 - $OUT/ncu-stalls.txt <<'PY'
import sys,re
k=None; rows={}
order=[]
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
    print('%-75s %s'%(n.replace('smsp__average_warps_issue_stalled_','stall_').replace('_per_issue_active.ratio',''), ' '.join('%10s'%v for v in vals)))
print(' '.join(k.split('#')[0][-20:] for k in order))
PY
