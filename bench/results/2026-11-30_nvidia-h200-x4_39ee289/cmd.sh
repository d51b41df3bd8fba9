#!/bin/bash
# Session 10 run 14 (4xH200, commit 39ee289): the first P = 4 run (issue 7), with the ~390 s of device
# time this session had left: fco-bench of every operator at P = 4 (nccl) on the operator issues'
# workloads (bf16; gemv impls 0,1,3,auto; embedding 0,1,auto; gemm every impl), then the quick C
# tests of the three operators on nccl P = 4, each step time-boxed.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=39ee289
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j32 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
nvidia-smi topo -m > $OUT/topo.txt 2>&1
F="build/bin/fco-bench"
el gemv; timeout 50 $F gemv_allreduce -t nccl -g 4 -G 1 -d bf16 -D 0,1,3,auto > $OUT/gemv-p4.txt 2>&1; echo rc=$?
el ea; timeout 70 $F embedding_alltoall -t nccl -g 4 -G 1 -n 10 -w 2 -d bf16 -D 0,1,auto > $OUT/ea-p4.txt 2>&1; echo rc=$?
el ga; timeout 70 $F gemm_alltoall -t nccl -g 4 -G 1 -n 10 -w 2 -d bf16 > $OUT/ga-p4.txt 2>&1; echo rc=$?
for t in gemv_allreduce embedding_alltoall gemm_alltoall; do
  el "test $t"; FCO_TEST_QUICK=1 FCO_TRANSPORT=nccl timeout 45 build/tests/test_$t > $OUT/test-$t-p4.txt 2>&1; echo rc=$?; tail -2 $OUT/test-$t-p4.txt
done
el all done
for f in gemv-p4 ea-p4 ga-p4; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror' $OUT/$f.txt | cut -c1-170; done
