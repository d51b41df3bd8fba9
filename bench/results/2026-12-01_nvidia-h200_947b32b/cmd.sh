#!/bin/bash
# Session 12 run 9 (1 H200, commit 947b32b): the new lean tile-size default (chunks by mean bag) at
# P = 1 (nccl, one rank) both dtypes; embedding on local P = 2 (0 wrong); test_embedding_alltoall
# on local.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=947b32b
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for d in bf16 f32; do
  timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d $d -D 0,1 -n 10 -w 3 -J $OUT/p1-$d.json 2>&1 | grep -E "^ +[0-9]|^#  +B"
done > $OUT/p1.txt 2>&1
timeout 150 build/bin/fco-bench embedding_alltoall -t local -g 2 -G 1 -n 5 -w 2 2>&1 | grep -E "^ +[0-9]|^#  +B|wrong" > $OUT/local.txt
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 timeout 200 tests/run.sh test_embedding_alltoall test_ea_plan > $OUT/tests.txt 2>&1
cat $OUT/p1.txt $OUT/local.txt; tail -3 $OUT/tests.txt
