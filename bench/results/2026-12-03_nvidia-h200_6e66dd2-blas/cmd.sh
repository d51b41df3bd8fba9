#!/bin/bash
# Session 33 (one H200): the shared cuBLAS module (src/cuda/blas.cuh: workspace per (device, stream) for gemv's and
# gemm's unfused paths). test_blas_streams (new) on local and nccl; the gemm / gemv / mixed tests that run the cuBLAS
# paths (local P 1..4 quick, nccl P = 1); the GPU pytest cases that capture graphs.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 120 build/tests/test_blas_streams > $O/blas-$tr.txt 2>&1; echo "test_blas_streams $tr rc=$?"
done
pack
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 TEST_TIMEOUT=150 timeout 330 tests/run.sh \
  test_gemm_alltoall test_gemm_alltoall_checks test_gemv_allreduce test_mixed_ops test_blas_streams > $O/suite-local.txt 2>&1; echo local rc=$?
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 TEST_TIMEOUT=100 timeout 200 tests/run.sh \
  test_gemm_alltoall test_gemv_allreduce test_mixed_ops > $O/suite-nccl.txt 2>&1; echo nccl rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so FCO_TEST_QUICK=1
timeout 150 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -k "graph or compile or stream" -q -p no:cacheprovider > $O/pytest.txt 2>&1; echo "pytest graph rc=$?"
pack
cat $O/blas-*.txt | grep -v "^$" | tail -12; grep -h "^PASS\|^FAIL\|^#" $O/suite-*.txt; tail -3 $O/pytest.txt
