#!/bin/bash
# Session 37 (one H200): gemm_alltoall under random routing (skew field r, session 36's fco-bench addition, first
# GPU run): fco-bench at P = 1 and on the local transport at P = 2, bf16, every impl and AUTO (-D all), graphs,
# -R 4, hints passed; the workloads, examples/moe_layer.py's, and K 2048 at 1024 / 2048 tokens; then
# bench/gemm_alltoall_torch.py at P = 1 on the same rows (torch beside fco).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
S="4096,14336,4096,8,2,r;1024,14336,4096,8,2,r;512,2048,7168,32,8,r;128,2048,7168,32,8,r"
S="$S;2048,1408,2048,16,2,r;1024,2048,4096,8,2,r;2048,2048,4096,8,2,r;1024,2048,4096,8,2"
export FCO_BENCH_GA_SHAPES="$S"
for g in 1 2; do
  timeout 200 build/bin/fco-bench gemm_alltoall -t local -g $g -d bf16 -D all -G 1 -R 4 -n 10 -w 3 \
    -J $O/ga-local$g.json > $O/ga-local$g.txt 2> $O/ga-local$g.err; echo "P=$g rc=$?"
  pack
done
timeout 150 python3 bench/gemm_alltoall_torch.py --nproc 1 --json $O/torch-ga1.json > $O/torch-ga1.txt 2>&1
echo "torch rc=$?"; pack
for g in 1 2; do echo "== local P=$g"; grep -v "^#  " $O/ga-local$g.txt | grep "^ \|^# tok\|wrong" | cut -c1-170; done
grep -v "^#  " $O/torch-ga1.txt | tail -12 | cut -c1-150
