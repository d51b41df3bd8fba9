#!/bin/bash
# Session 65 (one GPU, little device time): test_streams unmutated first (local P <= 2, nccl
# P = 1: session 63's fault / foreign-capture cases, never passed on a GPU), then session 64's
# mutants A-D (cmd-mut.sh) while time allows, then the quick C suite on local.
# Carry: build/carry.tgz build/mut.tgz. Run: FCO_COMMIT=<commit> LIMIT=<s> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_TIMEOUT_MS=15000 FCO_TEST_QUICK=1
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
TOP=$OUT; O=$TOP/main; mkdir -p $O $TOP/mut; L=${LIMIT:-560}
echo "commit ${FCO_COMMIT:-?}" > $O/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME="$NCCL_HOME" > $O/build.log 2>&1; echo "make rc=$? ${SECONDS}s"
for t in local nccl; do
  n=2; [ $t = nccl ] && n=1
  FCO_TRANSPORT=$t FCO_TEST_MAX_RANKS=$n timeout 150 build/tests/test_streams > $O/streams-$t.txt 2>&1
  echo "test_streams $t P<=$n rc=$? ${SECONDS}s"; tail -n 4 $O/streams-$t.txt | cut -c1-300
done
[ $((L - SECONDS)) -lt 200 ] && { echo "mutants skipped (${SECONDS}s)"; exit 0; }
OUT=$TOP/mut timeout $((L - SECONDS - 10)) bash bench/results/pending/session64/cmd-mut.sh
left=$((L - SECONDS - 15))
[ $left -lt 60 ] && { echo "local suite skipped (${SECONDS}s)"; exit 0; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=$left timeout $left tests/run.sh > $O/tests-local.txt 2>&1
echo "local suite rc=$? ${SECONDS}s"; grep -E "^(FAIL|# )" $O/tests-local.txt
mkdir -p $O/logs && cp -r build/tests/logs/* $O/logs/ 2>/dev/null; true
