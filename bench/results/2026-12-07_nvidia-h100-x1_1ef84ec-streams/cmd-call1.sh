#!/bin/bash
# Session 63 (one GPU), call 1: the new test_streams cases first (impl 2 failing after its fork
# joins back, FCO_FAULT_GA_GEMM; another thread's global-mode capture open while the cuBLAS
# workspaces and a push stream are made: blas.cu / gemm_alltoall.cu in relaxed capture mode) on
# local and nccl P = 1, then session 62's CUDA host fixes under the gate check and the whole quick
# C suite on local and nccl P = 1 (as run 2026-12-07_nvidia-h100-x1_2485d96-gate's cmd-call2.sh).
# Carry: build/carry.tgz (make_carry.sh). Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export FCO_TEST_QUICK=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o63; mkdir -p $O
echo "commit ${FCO_COMMIT:-?}" > $O/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME="$NCCL_HOME" > $O/build.log 2>&1
echo "make rc=$? ($(grep -c nvcc $O/build.log) nvcc lines) ${SECONDS}s"
pack() { mkdir -p $O/logs && cp -r build/tests/logs/* $O/logs/ 2>/dev/null; tar czf $OUT/out.tgz -C $O .; }
for t in local nccl; do
  FCO_TEST_MAX_RANKS=1 FCO_TRANSPORT=$t timeout 200 build/tests/test_streams > $O/streams-$t.txt 2>&1
  echo "test_streams $t rc=$? ${SECONDS}s"; tail -n 6 $O/streams-$t.txt
done
pack
nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -o /tmp/gate_check tests/gpu/gate_check.cu -Lbuild/lib \
  -lfco -Xlinker -rpath=$PWD/build/lib > $O/gate_check.txt 2>&1 && timeout 200 /tmp/gate_check \
  >> $O/gate_check.txt 2>&1
echo "gate_check rc=$? ${SECONDS}s"; tail -n 3 $O/gate_check.txt; pack
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 tests/run.sh > $O/tests-local.txt 2>&1
echo "local suite rc=$? ${SECONDS}s"; grep -E "^(FAIL|# )" $O/tests-local.txt; pack
[ $SECONDS -gt 420 ] && { echo "nccl suite skipped (${SECONDS}s)"; exit 0; }
FCO_TEST_MAX_RANKS=1 FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=200 tests/run.sh \
  > $O/tests-nccl1.txt 2>&1
echo "nccl P=1 suite rc=$? ${SECONDS}s"; grep -E "^(FAIL|# )" $O/tests-nccl1.txt; pack
