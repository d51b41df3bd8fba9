#!/bin/bash
# Session 64, with little device time left: cmd-mut.sh (mutants A-D, then test_streams unmutated
# on local), test_streams on nccl P = 1, then the quick C suite on local while time allows.
# Carry: build/carry.tgz build/mut.tgz. Run: FCO_COMMIT=<commit> LIMIT=<s> bash cmd-lean.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_TIMEOUT_MS=15000 FCO_TEST_QUICK=1
D=$(dirname "$0"); TOP=$OUT; mkdir -p $TOP/mut $TOP/main
nvidia-smi --query-gpu=name --format=csv,noheader | tee $TOP/main/gpu.txt
OUT=$TOP/mut bash $D/cmd-mut.sh
O=$TOP/main
FCO_TRANSPORT=nccl FCO_TEST_MAX_RANKS=1 timeout 100 build/tests/test_streams > $O/streams-nccl.txt 2>&1
echo "test_streams nccl P=1 rc=$? ${SECONDS}s"; tail -n 7 $O/streams-nccl.txt
left=$(( ${LIMIT:-560} - SECONDS - 15 ))
[ $left -lt 60 ] && { echo "local suite skipped (${SECONDS}s)"; exit 0; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=$left timeout $left tests/run.sh > $O/tests-local.txt 2>&1
echo "local suite rc=$? ${SECONDS}s"; grep -E "^(FAIL|# )" $O/tests-local.txt
mkdir -p $O/logs && cp -r build/tests/logs/* $O/logs/ 2>/dev/null; true
