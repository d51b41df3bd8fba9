#!/bin/bash
# Session 10 run 12 (2xH200, commit e509d26): the grouped wgmma tile with 1, 2, 4 slabs per pipeline
# stage (FCO_GEMV_GROUP_SUB): group test (local, nccl), fco-bench P = 1 (local) and P = 2 (nccl)
# at M = 64 (impls 1, 3), FCO_GEMV_GROUP unset.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=e509d26
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for t in local nccl; do
  FCO_TEST_GROUP=only FCO_TRANSPORT=$t timeout 150 build/tests/test_gemv_allreduce > $OUT/test-group-$t.txt 2>&1; echo "test $t rc=$?"; tail -1 $OUT/test-group-$t.txt
done
for sub in 1 2 4; do
  echo "== sub $sub P=1"; FCO_GEMV_GROUP_SUB=$sub FCO_BENCH_GEMV_NK=8192x8192,16384x16384 FCO_BENCH_GEMV_M=64 timeout 60 \
    build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -D 1 > $OUT/p1-sub$sub.txt 2>&1
  grep -E '^ +[0-9]' $OUT/p1-sub$sub.txt | cut -c1-150
  echo "== sub $sub P=2"; FCO_GEMV_GROUP_SUB=$sub FCO_BENCH_GEMV_M=64 timeout 60 \
    build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -D 1,3 > $OUT/p2-sub$sub.txt 2>&1
  grep -E '^ +[0-9]' $OUT/p2-sub$sub.txt | cut -c1-150
done
