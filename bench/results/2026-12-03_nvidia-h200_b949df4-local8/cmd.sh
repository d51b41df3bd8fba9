#!/bin/bash
# Session 33 (one H200): the operator tests at local P = 1..8 (quick). Sessions 28–33 changed the gemv kernels
# (rounds, the pairs' split finalise, the TMA tile at M 9..32 and local AUTO's tile at M 9..16, the PDL prefetch by
# kernel) and none of that ran above P = 4 until now (last P ≤ 8 runs: d2a8b1a-auto, a4309a5-g8, 3bf8601-tp8, session 27).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=8 TEST_TIMEOUT=240 timeout 540 tests/run.sh \
  test_gemv_allreduce test_gemv_allreduce_kernels test_gemm_alltoall test_gemm_alltoall_checks test_allreduce \
  test_embedding_alltoall test_gemv_allreduce_group > $O/suite-local8.txt 2>&1; echo local P 1..8 rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
cat $O/suite-local8.txt | grep -vE "^    \|" | tail -12
grep -h "^P=[5-8]\|ok (" $O/logs/local/test_gemv_allreduce*.log | tail -20
