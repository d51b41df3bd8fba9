#!/bin/bash
# The short form of x2-session12.sh (~150 s), for a two-GPU machine lent with little device time
# left: embedding P = 2 with session 12's defaults against the previous ones (long bags), the
# gemv LL word formats, the gemm early-landing test on nccl. FCO_COMMIT from the caller.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
# first: the unfused gemv impls moved to gemv_allreduce_blas.cu in 93a3ca8 after the session's last
# device call (compiled only): test_gemv_allreduce on local and nccl before anything else
for t in local nccl; do
  el "test_gemv_allreduce $t"
  FCO_TRANSPORT=$t BUILD=build TEST_TIMEOUT=120 FCO_TEST_QUICK=1 timeout 130 tests/run.sh test_gemv_allreduce 2>&1 | tail -2
done | tee $OUT/tests-gemv.txt
{
  for d in bf16 f32; do
    el "embedding $d"
    timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d $d -D 0,1 -n 10 -w 2 -J $OUT/ea-$d.json 2>&1 | grep -E "^ +[0-9]|^#  +B|wrong"
    el "embedding $d long bags, static order (the previous default)"
    FCO_EA_LEAN_DYN=0 FCO_BENCH_EA_WORKLOADS=0,2,3 timeout 40 build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d $d -D 1 -n 10 -w 2 2>&1 | grep -E "^ +[0-9]|wrong"
  done
} > $OUT/ea.txt 2>&1
cut -c1-175 $OUT/ea.txt
{
  for f in 0 1; do
    el "gemv bf16 M 1,16, FCO_GEMV_LL_FP32=$f"
    FCO_GEMV_LL_FP32=$f FCO_BENCH_GEMV_M=1,16 timeout 60 build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 5 -D 0,1,auto -J $OUT/gemv-fp32$f.json 2>&1 | grep -E "^ +[0-9]|^#  +N|wrong"
  done
  el "test_gemm_alltoall nccl FCO_GA_LAND_EARLY=1"
  FCO_GA_LAND_EARLY=1 FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=60 FCO_TEST_QUICK=1 timeout 70 tests/run.sh test_gemm_alltoall 2>&1 | tail -2
} > $OUT/rest.txt 2>&1
cut -c1-220 $OUT/rest.txt
python3 bench/targets.py $OUT/ea-*.json $OUT/gemv-fp320.json > $OUT/targets.txt 2>&1
grep -v " met" $OUT/targets.txt | head -30
el all done
