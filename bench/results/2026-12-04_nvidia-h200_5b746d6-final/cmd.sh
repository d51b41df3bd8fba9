#!/bin/bash
# Session 37's closing run (one H200): the C suite (quick) on local (P 1..4) and on nccl (P = 1), then the GPU pytest
# of the torch ops' gemm_alltoall cases.
set -u
T0=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o2; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local FCO_TEST_QUICK=1 TEST_TIMEOUT=200 timeout 280 tests/run.sh > $O/suite-local.txt 2>&1; echo "local suite rc=$?"
cp -r build/tests/logs $O/ 2>/dev/null; pack
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 TEST_TIMEOUT=100 timeout 160 tests/run.sh > $O/suite-nccl.txt 2>&1; echo "nccl suite rc=$?"
cp -r build/tests/logs $O/ 2>/dev/null; pack
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
if [ $(( $(date +%s) - T0 )) -lt 480 ]; then
  timeout 100 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -k "gemm" -rs -q -p no:cacheprovider > $O/pytest-gpu.txt 2>&1; echo "pytest rc=$?"
  tail -3 $O/pytest-gpu.txt; pack
fi
grep -h "^FAIL\|^#" $O/suite-*.txt
