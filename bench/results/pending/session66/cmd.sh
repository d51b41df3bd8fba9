#!/bin/bash
# One GPU, one short call (~4 min, at most ~9): d7a433f's allreduce AUTO for one rank on nccl (one-shot up to
# 4 MB, ncclAllReduce above) — test_last_plan's edge check on nccl and local P = 1, then
# fco-bench allreduce 1 MB..64 MB with impl 0, the one-shot and AUTO side by side (AUTO must run 0
# at 16 and 64 MB, 1 at 1 and 4 MB, and be within noise of the faster); then test_allreduce,
# test_gemv_allreduce, test_gemm_alltoall_checks and test_embedding_alltoall (753006f / ab70ad4 /
# a4d2488 moved the ops' AUTO rules into fco_gemv_ar_auto_impl / fco_ga_auto_impl /
# fco_ea_auto_impl, host refactors: their GPU parts read the plans) on local P <= 2 and nccl
# P = 1, quick.
# Carry: build/carry.tgz (make_carry.sh at the commit run). Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_TIMEOUT_MS=15000
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=$OUT
echo "commit ${FCO_COMMIT:-?}" > $O/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME="$NCCL_HOME" > $O/build.log 2>&1; echo "make rc=$? ${SECONDS}s"
for t in nccl local; do
  FCO_TRANSPORT=$t FCO_TEST_MAX_RANKS=1 timeout 60 build/tests/test_last_plan > $O/lp-$t.txt 2>&1
  echo "test_last_plan $t P=1 rc=$?"; tail -n 2 $O/lp-$t.txt
done
timeout 90 build/bin/fco-bench allreduce -b 1M -e 64M -R 3 > $O/ar.txt 2>&1
echo "fco-bench allreduce rc=$? ${SECONDS}s"
grep -E "^ +[0-9]|auto ran|commit|machine" $O/ar.txt | cut -c1-110
for t in local nccl; do
  n=2; [ $t = nccl ] && n=1
  FCO_TRANSPORT=$t FCO_TEST_MAX_RANKS=$n FCO_TEST_QUICK=1 BUILD=build TEST_TIMEOUT=120 \
    timeout 200 tests/run.sh test_allreduce test_gemv_allreduce \
    test_gemm_alltoall_checks test_embedding_alltoall > $O/tests-$t.txt 2>&1
  echo "$t: rc=$? ${SECONDS}s"; grep -E "^(FAIL|# )" $O/tests-$t.txt
done
