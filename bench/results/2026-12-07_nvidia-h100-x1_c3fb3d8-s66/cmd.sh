#!/bin/bash
# One GPU, one call (~560 s): test_streams unmutated (local P <= 2, nccl P = 1: session 63's
# fault / foreign-capture cases), mutant D (`mid_call.on = true` removed: test_streams must fail
# at expect_kept; A-C were shown in run 2026-12-07_nvidia-h100-x1_6fe0553-streams), the gate
# check, then the quick C suites on local and nccl P = 1 while time allows.
# Carry: build/carry.tgz build/mut.tgz (make_carry.sh, session64/make_mut.sh at the commit run).
# Run: FCO_COMMIT=<commit> LIMIT=<s> bash cmd.sh   (MUTANTS=0 skips the mutant)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_TIMEOUT_MS=15000 FCO_TEST_QUICK=1
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=$OUT; L=${LIMIT:-560}
echo "commit ${FCO_COMMIT:-?}" > $O/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
mk() { make -j16 NCCL_HOME="$NCCL_HOME" >> $O/build-$1.log 2>&1 || echo "make $1 failed"; }
streams() { # name transport ranks
  FCO_TRANSPORT=$2 FCO_TEST_MAX_RANKS=$3 timeout 150 build/tests/test_streams > $O/$1.txt 2>&1
  echo "$1: test_streams $2 P<=$3 rc=$? ${SECONDS}s"
  grep -m3 -E "FAIL|while:" $O/$1.txt | cut -c1-300
}
mk base; echo "make ${SECONDS}s"
streams streams-local local 2
streams streams-nccl nccl 1
if [ "${MUTANTS:-1}" = 1 ] && [ -f build/mut.tgz ]; then
  tar xzf build/mut.tgz -C /tmp
  G=build/obj/src/cuda/gemm_alltoall.o; cp $G /tmp/g.o
  cp /tmp/mut/gemm_alltoall_D.o $G; touch $G; mk D
  streams mutD local 2; echo "  (mutant D: want a FAIL at expect_kept)"
  cp /tmp/g.o $G; touch $G; mk restored
fi
nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -o /tmp/gate_check tests/gpu/gate_check.cu -Lbuild/lib \
  -lfco -Xlinker -rpath=$PWD/build/lib > $O/gate_check.txt 2>&1 && timeout 200 /tmp/gate_check \
  >> $O/gate_check.txt 2>&1
echo "gate_check rc=$? ${SECONDS}s"; tail -n 2 $O/gate_check.txt
for t in local nccl; do
  left=$((L - SECONDS - 15))
  [ $left -lt 60 ] && { echo "$t suite skipped (${SECONDS}s)"; continue; }
  n=4; [ $t = nccl ] && n=1 # local: run.sh's default world sizes
  FCO_TRANSPORT=$t FCO_TEST_MAX_RANKS=$n BUILD=build TEST_TIMEOUT=$left timeout $left tests/run.sh \
    > $O/tests-$t.txt 2>&1
  echo "$t suite rc=$? ${SECONDS}s"; grep -E "^(FAIL|# )" $O/tests-$t.txt
done
