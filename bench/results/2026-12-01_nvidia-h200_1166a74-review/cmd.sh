#!/bin/bash
# Session 16 run 10 (one H200, commit 1166a74): the review's change (one-rank gemm impl 0 with no
# workspace): test_gemm_alltoall and test_last_plan on local (quick, P 1..4) and nccl (P = 1).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=1166a74
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o10; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
for tr in local nccl; do for t in test_gemm_alltoall test_last_plan; do
  FCO_TEST_QUICK=1 FCO_TRANSPORT=$tr timeout 100 build/tests/$t > $O/$t-$tr.txt 2>&1; echo "$t $tr rc=$?"; tail -1 $O/$t-$tr.txt
done; done
pack
