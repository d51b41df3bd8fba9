#!/bin/bash
# Session 12 run 12 (1 H200, commit a40c518): the new tile-order / blocks defaults — P = 1 (nccl, one
# rank) every workload both dtypes in rounds; local P = 2 bench (0 wrong); test_embedding_alltoall
# on local.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=a40c518
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for d in bf16 f32; do
  timeout 90 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d $d -D 0,1 -n 10 -w 3 -R 3 -J $OUT/p1-$d.json 2>&1 | grep -E "^ +[0-9]|^#  +B"
done > $OUT/p1.txt 2>&1
timeout 150 build/bin/fco-bench embedding_alltoall -t local -g 2 -G 1 -n 5 -w 2 2>&1 | grep -E "^ +[0-9]|^#  +B|wrong" > $OUT/local.txt
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 timeout 200 tests/run.sh test_embedding_alltoall > $OUT/tests.txt 2>&1
cut -c1-140 $OUT/p1.txt; tail -1 $OUT/local.txt; tail -2 $OUT/tests.txt
