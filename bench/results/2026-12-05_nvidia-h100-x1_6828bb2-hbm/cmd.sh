#!/bin/bash
# Session 49, one GPU: fco-bench's measured HBM rate (the floors' HBM terms and hbm% used the H200's 4300
# GB/s on every card until now). (1) embedding_alltoall one rank, bf16, workloads 0 and 1, impl 0 and 1,
# with the rate measured and with FCO_BENCH_HBM_GBPS=4300 (the old tables' rate); (2) gemv_allreduce and
# allreduce and gemm_alltoall on local P = 2, one small case each (the # HBM line and the floors);
# (3) bench/targets.py on the JSONs. Carry: build/obj at the commit, stripped (tar czf build/carry.tgz build/obj).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o8; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1 -d bf16"
FCO_BENCH_EA_WORKLOADS=0,1 timeout 90 $B -J $O/ea-p1.json > $O/ea-p1.txt 2>&1; echo "ea measured rc=$?"
FCO_BENCH_HBM_GBPS=4300 FCO_BENCH_EA_WORKLOADS=0,1 timeout 90 $B -J $O/ea-p1-4300.json > $O/ea-p1-4300.txt 2>&1
echo "ea 4300 rc=$?"
FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=1,16 timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 2 \
  -G 1 -J $O/gemv-local.json > $O/gemv-local.txt 2>&1; echo "gemv rc=$?"
timeout 60 build/bin/fco-bench allreduce -t local -g 2 -b 1M -e 16M -J $O/ar-local.json > $O/ar-local.txt 2>&1
echo "allreduce rc=$?"
FCO_BENCH_GA_SHAPES="128,2048,7168,32,8" timeout 120 build/bin/fco-bench gemm_alltoall -t local -g 2 -G 1 -d bf16 \
  -J $O/ga-local.json > $O/ga-local.txt 2>&1; echo "gemm rc=$?"
pack
python3 bench/targets.py $O/*.json > $O/targets.txt 2>&1; pack
for f in $O/*.txt; do echo "== $f"; grep -v "^# knobs\|^# inputs\|^# speedup\|^# workspace" $f | tail -14; done
