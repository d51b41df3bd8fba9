#!/bin/bash
# Session 20 run 9 (one H200, commit 0f0ae00; the example with CUDA-graph timing): examples/c/gemv_allreduce.c on a GPU — local P = 2, 4
# (virtual ranks), nccl P = 1, nccl P = 2 (must skip: one GPU), f32 and bf16 — and its test
# variant through tests/run.sh on local.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=0f0ae00
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o9; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib examples build/tests/test_example_gemv_allreduce > $O/build.log 2>&1 || { tail -30 $O/build.log; tar czf $OUT/out.tgz -C $O .; exit 1; }
E=build/examples/gemv_allreduce
run() { echo "$ $*" >> $O/example.txt; "$@" >> $O/example.txt 2>&1; echo "rc=$?" >> $O/example.txt; }
run env FCO_TRANSPORT=local $E
run env FCO_TRANSPORT=local $E 16 4096 14336 2 bf16
run env FCO_TRANSPORT=local $E 64 8192 8192 4 bf16
run env FCO_TRANSPORT=local $E 5 1000 777 3 f32
run env FCO_TRANSPORT=nccl $E 4 8192 8192 1 bf16
run env FCO_TRANSPORT=nccl $E
run $E
FCO_TRANSPORT=local BUILD=build tests/run.sh test_example_gemv_allreduce > $O/test-local.txt 2>&1; echo "suite rc=$?" >> $O/test-local.txt
tar czf $OUT/out.tgz -C $O .
grep -E "^[$] |ran|time per|graph|SKIP|rc=|PASS|FAIL" $O/example.txt; tail -2 $O/test-local.txt
