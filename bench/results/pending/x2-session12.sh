#!/bin/bash
# Session 12's two-GPU run (nvidia-h200-x2), written while only one H200 was lent; copied into
# bench/results/<date>_nvidia-h200-x2_<commit>/cmd.sh when it runs. FCO_COMMIT from the caller.
# (1) tests on nccl: test_gemm_alltoall default and with the impl 2 early landing (the embedding
#     protocol did not change; its tests passed on local);
# (2) embedding P = 2 after the ring alignment (5c6f398), the tile sizes (947b32b) and the claimed
#     order everywhere: both dtypes, ordinary outs, -R 2; the previous defaults beside;
# (3) gemm K 14336 chunks with FCO_GA_LAND_EARLY = 0 / 1; (4) gemv M 1 / 16 with half-width and fp32
# LL words; (5) bench/targets.py on the JSONs. About 260 s; SHORT=1 (~180 s: little device time
# left) skips the gemm default-path test and the gemm bench. (trimmed to what one session's device time leaves).
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
  if [ "${SHORT:-0}" != 1 ]; then
    el "test_gemm_alltoall nccl"
    FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=120 FCO_TEST_QUICK=1 timeout 130 tests/run.sh test_gemm_alltoall 2>&1 | tail -2
  fi
  el "test_gemm_alltoall nccl FCO_GA_LAND_EARLY=1"
  FCO_GA_LAND_EARLY=1 FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=120 FCO_TEST_QUICK=1 timeout 130 tests/run.sh test_gemm_alltoall 2>&1 | tail -2
} > $OUT/tests.txt 2>&1
cat $OUT/tests.txt
{
  for d in bf16 f32; do
    el "embedding $d"
    timeout 120 build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d $d -D 0,1,auto -R 2 -n 10 -w 2 \
      -J $OUT/ea-$d.json 2>&1 | grep -E "^ +[0-9]|^#  +B|wrong"
  done
  el "embedding: the previous defaults (static order where bags hold > 16 rows; 3 blocks a SM for the claimed order at 8 rows), ordinary out"
  for d in bf16 f32; do
    FCO_EA_LEAN_DYN=0 FCO_BENCH_EA_WORKLOADS=0,2,3 timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d $d -D 1 -R 2 -n 10 -w 2 2>&1 | grep -E "^ +[0-9]|wrong"
    FCO_EA_LEAN_BLOCKS=3 FCO_BENCH_EA_WORKLOADS=1 timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d $d -D 1 -R 2 -n 10 -w 2 2>&1 | grep -E "^ +[0-9]|wrong"
  done
} > $OUT/ea.txt 2>&1
cat $OUT/ea.txt | cut -c1-175
[ "${SHORT:-0}" = 1 ] || {
  for le in 0 1; do
    el "gemm K 14336 chunks, FCO_GA_LAND_EARLY=$le"
    FCO_GA_LAND_EARLY=$le FCO_BENCH_GA_SHAPES="4096,14336,4096,8,2;1024,14336,4096,8,2;1024,14336,4096,8,2,4" timeout 150 \
      build/bin/fco-bench gemm_alltoall -t nccl -g 2 -d bf16 -G 1 -w 2 -R 3 -n 10 -D 0,2 -J $OUT/ga-le$le.json 2>&1 | grep -E "^ +[0-9]|^# tok|wrong"
  done
} > $OUT/ga.txt 2>&1
cat $OUT/ga.txt | cut -c1-175
{
  for f in 0 1; do
    el "gemv bf16 M 1,16, FCO_GEMV_LL_FP32=$f (0: half-width LL words, the default since a5ec08b)"
    FCO_GEMV_LL_FP32=$f FCO_BENCH_GEMV_M=1,16 timeout 100 build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 5 -R 3 -J $OUT/gemv-fp32$f.json 2>&1 | grep -E "^ +[0-9]|^#  +N|wrong"
  done
} > $OUT/gemv.txt 2>&1
cut -c1-220 $OUT/gemv.txt
python3 bench/targets.py $OUT/ea-*.json $OUT/gemv-fp320.json > $OUT/targets.txt 2>&1
grep -c met $OUT/targets.txt; grep -v " met" $OUT/targets.txt | head -30
el all done
# the device tool returns at most a few files: everything in one archive
(cd $OUT && tar czf ../x2-all.tgz . && rm -rf ./* && mv ../x2-all.tgz .)
