#!/bin/bash
# Session 32 (one H200): the GPU pytest cases (torch ops, Triton on fco communicators, autograd, compile) against the
# library as of this session — last run on a GPU in session 25 (runs 5236acd-rule, 5026e6e-pytest), before the TMA
# tile became impl 1 / 2's default at M 9..64, local AUTO's new rules and this session's prefetch by kernel. Quick,
# without test_gemm_tma (Triton compiling its TMA GEMM, ~40 s a case; its kernels are untouched since).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so FCO_TEST_QUICK=1
timeout 420 python3 -m pytest tests/python -m gpu -k "not test_gemm_tma" -v -rs -p no:cacheprovider --durations=10 > $OUT/pytest.txt 2>&1; echo "pytest rc=$?"
grep -E "PASSED|FAILED|SKIPPED|ERROR" $OUT/pytest.txt | sed 's/.*:://' | cut -c1-90 | sort | uniq -c | sort -rn | head -5
grep -E "FAILED|ERROR" $OUT/pytest.txt | head -10; tail -n 3 $OUT/pytest.txt
