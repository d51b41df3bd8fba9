#!/bin/bash
# Session 37 (one H200): embedding_alltoall under ragged bags (workloads 7, 8: each bag's length uniform in 0..2L,
# empty bags included) beside their fixed-L twins (0, 1): fco-bench at P = 1 (nccl, graphs, -D all) and on local
# P = 2 (graphs, -D all), f32 and bf16, -R 3; then bench/embedding_alltoall_torch.py at P = 1 on the same four.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
export FCO_BENCH_EA_WORKLOADS=0,1,7,8
timeout 100 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -d f32,bf16 -D all -G 1 -R 3 -n 10 -w 3 -J $O/ea-p1.json > $O/ea-p1.txt 2> $O/ea-p1.err; echo "P=1 rc=$?"
pack
timeout 150 build/bin/fco-bench embedding_alltoall -t local -g 2 -d f32,bf16 -D all -G 1 -R 3 -n 10 -w 3 -J $O/ea-local2.json > $O/ea-local2.txt 2> $O/ea-local2.err; echo "local P=2 rc=$?"
pack
timeout 100 python3 bench/embedding_alltoall_torch.py --nproc 1 --json $O/torch-ea1.json > $O/torch-ea1.txt 2>&1; echo "torch rc=$?"
pack
python3 bench/targets.py $O/ea-p1.json > $O/targets.txt 2>&1
for f in ea-p1 ea-local2; do echo "== $f"; grep -v "^#  " $O/$f.txt | grep "^ \|^# *B\|wrong\|auto ran" | cut -c1-170; done
grep -v "^#  " $O/torch-ea1.txt | grep "^ " | cut -c1-120; grep "lookup hbm" $O/targets.txt
