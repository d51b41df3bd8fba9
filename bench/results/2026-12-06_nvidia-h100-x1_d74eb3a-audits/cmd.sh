#!/bin/bash
# Session 56, one GPU, one short call (the session had ~7 device minutes left): the kernel
# audits' fixes on the local transport — the new tests test_gemm_alltoall_tiles,
# test_gemm_alltoall_stale_plan, test_embedding_alltoall_direct, test_device_keep (skips: one
# GPU), and test_gemm_alltoall / test_gemv_allreduce (quick, P 1..4).
# Carry: build/obj at the commit, stripped, its .d files without the NCCL headers (this
# machine's nccl.h is 2.28.9, as torch's on the device: no recompile there).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o1; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
T="test_gemm_alltoall_tiles test_gemm_alltoall_stale_plan test_embedding_alltoall_direct"
T="$T test_device_keep test_gemm_alltoall test_gemv_allreduce"
make -j16 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so $(for t in $T; do echo build/tests/$t; done) \
  > $O/build.log 2>&1
echo "make rc=$? ($(grep -c nvcc $O/build.log) nvcc lines)"
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=120 FCO_TEST_QUICK=1 tests/run.sh $T > $O/tests.txt 2>&1
echo "tests rc=$?"
cp -r build/tests/logs $O/test-logs 2>/dev/null
tar czf $OUT/out.tgz -C $O .
cat $O/tests.txt
