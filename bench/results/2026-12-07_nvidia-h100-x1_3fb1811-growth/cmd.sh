#!/bin/bash
# The five calls of session 59's run (one H100, nvidia-h100-x1; the device tool gave ~300 s of the
# session's 1800 s after eleven refused starts, so the full bench/results/pending/session59-growth/
# cmd.sh did not run: its old-tree mutant build and gemm A/B are left).
# Carry: build/carry.tgz (make_carry.sh at 3fb1811; the library's objects, tests built there).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# call 21: S59_MIN=1 bash bench/results/pending/session59-growth/cmd.sh
#   (make with the carried objects; FCO_TEST_QUICK=1 FCO_TRANSPORT=local tests/run.sh test_mixed_ops test_leaks)
# call 22:
export FCO_TIMEOUT_MS=15000 FCO_TEST_QUICK=1
FCO_TEST_MAX_RANKS=1 FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=100 tests/run.sh test_mixed_ops test_leaks
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=100 tests/run.sh test_gemm_alltoall \
  test_gemm_alltoall_tiles test_gemm_alltoall_stale_plan
# call 23, the mutant: ae09cd6's src/transport/local.c (frees the captured workspace at a growth)
# in the tree, the library relinked, the new test_mixed_ops (must fail):
#   git show ae09cd6:src/transport/local.c > src/transport/local.c   (sent as an untracked file)
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
make -j16 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so build/tests/test_mixed_ops
FCO_TIMEOUT_MS=10000 FCO_TRANSPORT=local timeout 70 build/tests/test_mixed_ops
# calls 24 / 25: the right local.c back, relinked; test_gpu_ops' CUDA-graph test (nccl, one process)
FCO_LIB="$PWD/build/lib/libfco.so" python3 -m pytest tests/python/test_gpu_ops.py -m gpu -rs -q \
  -p no:cacheprovider -k cuda_graph
