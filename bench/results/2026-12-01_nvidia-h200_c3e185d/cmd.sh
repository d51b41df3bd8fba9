#!/bin/bash
# Session 12 run 14 (1 H200, commit c3e185d): the gemv LL one-shot with half-width words (bf16 / f16
# partials rounded to the dtype) — test_gemv_allreduce on local (P 1..4: the LL sweep with both
# word formats, LL vs plain bit for bit with fp32 words, stale words, graphs); a local P = 2 bench
# of M 1 / 16 with both formats (0 wrong; local timings share one GPU).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=c3e185d
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 VERBOSE=1 timeout 200 tests/run.sh test_gemv_allreduce > $OUT/tests.txt 2>&1
tail -14 $OUT/tests.txt
for f in 0 1; do
  echo "== FCO_GEMV_LL_FP32=$f"
  FCO_GEMV_LL_FP32=$f FCO_BENCH_GEMV_M=1,16 timeout 100 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 20 -w 5 -D 0,1,auto 2>&1 | grep -E "^ +[0-9]|wrong" | cut -c1-200
done | tee $OUT/bench.txt
