#!/bin/bash
# Session 33 (one H200), commit 4ad0f5f, right after run 4ad0f5f-knobs on the same warm machine (build/obj built there):
# the 8 GPU pytest cases of test_gemm_tma (Triton's TMA GEMM on fco communicators, ~40 s a case of compiles), last run
# 4 of them in session 25 (run 5026e6e-pytest); pending since (bench/results/pending/README.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])'); export PATH=/usr/local/cuda/bin:$PATH
make -j16 NCCL_HOME=$NCCL_HOME > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
timeout 560 python3 -m pytest tests/python -m gpu -k test_gemm_tma -v -rs -p no:cacheprovider --durations=10 > $OUT/pytest.txt 2>&1; echo "pytest rc=$?"
grep -E "PASSED|FAILED|SKIPPED|ERROR" $OUT/pytest.txt | cut -c1-120; tail -n 14 $OUT/pytest.txt
