#!/bin/bash
# Session 55, one GPU, one call (~560 s): every Triton GPU test (test_triton_gpu.py, 40 tests with
# test_gemm_tma's 8) after session 54's fco.triton host-side fixes (2e87c09), which run b69c516-triton
# covered only in part. No C change since run c30417e-suite: build libfco from the carried objects,
# then pytest -v (one line a test, so a bound that cuts the run still says which passed).
# Run: FCO_COMMIT=<commit> bash cmd.sh   (from the repo root; carry build/carry.tgz)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
nvidia-smi --query-gpu=name --format=csv,noheader
echo "commit ${FCO_COMMIT:-unknown}"
make -j16 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so > $OUT/build.log 2>&1; echo "make rc=$?"
FCO_LIB=$PWD/build/lib/libfco.so timeout ${FCO_PYTEST_BOUND:-540} python3 -m pytest \
  tests/python/test_triton_gpu.py -m gpu -rs -v -p no:cacheprovider --durations=15 \
  -k "${FCO_PYTEST_K:-triton_gpu}" > $OUT/pytest.log 2>&1
echo "pytest rc=$?"
grep -cE ' PASSED' $OUT/pytest.log | sed 's/^/passed lines: /'
grep -E ' (FAILED|ERROR)' $OUT/pytest.log | head
tail -25 $OUT/pytest.log
