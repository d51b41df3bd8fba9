#!/bin/bash
# Session 12 run 11 (1 H200, commit 6cc8f88): test_embedding_alltoall on local (the knob table now has
# FCO_EA_LEAN_CHUNKS 1 / 64, and the claim-batch revert); at P = 1, long bags (workloads 0, 2, 3),
# the static order (the default there) against the claimed order with 4 blocks a SM, in rounds.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=6cc8f88
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 timeout 200 tests/run.sh test_embedding_alltoall test_ea_plan > $OUT/tests.txt 2>&1
tail -3 $OUT/tests.txt
for kv in "FCO_EA_LEAN_DYN=0" "FCO_EA_LEAN_DYN=1 FCO_EA_LEAN_BLOCKS=4"; do for d in bf16 f32; do
  echo "== $kv $d"
  env $kv FCO_BENCH_EA_WORKLOADS=0,2,3 timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d $d -D 0,1 -n 10 -w 3 -R 3 2>&1 | grep -E "^ +[0-9]" | cut -c1-100
done; done | tee $OUT/order.txt
