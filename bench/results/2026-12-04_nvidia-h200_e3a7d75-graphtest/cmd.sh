#!/bin/bash
# Session 37 (one H200): test_gemm_alltoall's new part (impl 0's batched GEMM captured in a CUDA graph on balanced
# routing) — the whole test on local (not quick, P 1..4) and quick on nccl (P 1); once more on local with
# FCO_GA_BLAS=loop, where the captured plan check must fail (the test can fail).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local timeout 250 build/tests/test_gemm_alltoall > $O/ga-local.txt 2>&1; echo "local rc=$?"; tail -3 $O/ga-local.txt
FCO_TEST_QUICK=1 FCO_TRANSPORT=nccl timeout 100 build/tests/test_gemm_alltoall > $O/ga-nccl.txt 2>&1; echo "nccl rc=$?"; tail -2 $O/ga-nccl.txt
FCO_GA_BLAS=loop FCO_TEST_QUICK=1 FCO_TRANSPORT=local timeout 150 build/tests/test_gemm_alltoall > $O/ga-local-loop.txt 2>&1
echo "local, FCO_GA_BLAS=loop (must fail) rc=$?"; grep -m2 "FAIL" $O/ga-local-loop.txt | cut -c1-220
pack
