#!/bin/bash
# Session 40 (one H200): the closing embedding bench at the commit with impl 0's claimed lookup (the rule: bags of
# >= 8 rows on average) — test_embedding_alltoall and _bad on nccl (one rank; local P = 1..4 passed in run
# ..._dyn-ab with the same kernels), then tests/gpu/run.sh's embedding steps (fco-bench local P = 2 and nccl P = 1,
# targets.py, the torch script, the DLRM example). build/obj carried as build/carry.tgz (built on the CPU machine).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
find build/obj -name '*.o' -exec touch {} +
O=/tmp/o1; mkdir -p $O
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build0.log 2>&1 || { tail -30 $O/build0.log; tar czf $OUT/out.tgz -C $O .; exit 1; }
for t in test_embedding_alltoall_bad test_embedding_alltoall; do
  FCO_TRANSPORT=nccl timeout 100 build/tests/$t > $O/$t-nccl.log 2>&1; echo "$t nccl rc=$?"; tail -1 $O/$t-nccl.log
done
tar czf $OUT/out.tgz -C $O .
OUT1=$OUT
OUT=$O FCO_GPU_TESTS=0 FCO_GPU_PYTEST=0 FCO_GPU_PREBUILT=1 FCO_GPU_OPS=embedding_alltoall FCO_GPU_BUDGET=400 bash tests/gpu/run.sh > /tmp/run.txt 2>&1
echo "run.sh rc=$?"
cp /tmp/run.txt $O/run.txt
tar czf $OUT1/out.tgz -C $O .
grep -v "^# progress" $O/bench-embedding_alltoall-p1.txt | grep -E "^ +[0-9]"
sed -n '/=== targets ===/,$p' /tmp/run.txt | cut -c1-200 | tail -32
