#!/bin/bash
# Session 9 run 4 (2xH200, commit 5d02c14): first GPU run of the embedding direct stores into
# symmetric outs: test_embedding_alltoall (nccl, local; sym_outputs), fco-bench embedding
# plain vs FCO_BENCH_SYM=1 (bf16, f32). Then the chunks question of run 4de9ac2: commit a70f468
# (session 5's closing run) built from build/old (git archive) and its gemm bench beside HEAD's.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=5d02c14
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
(cd build/old && FCO_COMMIT=a70f468 make -j14 NCCL_HOME=$NCCL_HOME > $OUT/build-old.log 2>&1; echo "old build rc=$?" > $OUT/build-old.rc) &
OLD=$!
for t in nccl local; do
  el "test embedding $t"
  FCO_TEST_TRACE=1 FCO_TRANSPORT=$t timeout 150 build/tests/test_embedding_alltoall > $OUT/test-$t.log 2>&1; echo "rc=$?"
  grep -vE '^>|^ea-prof' $OUT/test-$t.log | tail -2; grep -E '^>' $OUT/test-$t.log | tail -1
done
E="build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -n 10 -w 2 -D 1"
{ for d in bf16 f32; do
    el "$d plain"; timeout 60 $E -d $d 2>&1 | grep -E '^ +[0-9]|rror'
    el "$d sym"; FCO_BENCH_SYM=1 timeout 60 $E -d $d 2>&1 | grep -E '^ +[0-9]|rror'
  done; } > $OUT/ea.txt 2>&1
cut -c1-140 $OUT/ea.txt
wait $OLD; cat $OUT/build-old.rc; tail -3 $OUT/build-old.log
G="gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 20 -w 3 -D 0,2"
el "gemm chunks old"; FCO_COMMIT=a70f468 timeout 90 build/old/build/bin/fco-bench $G > $OUT/ga-old.txt 2>&1; echo rc=$?
el "gemm chunks new"; timeout 90 build/bin/fco-bench $G > $OUT/ga-new.txt 2>&1; echo rc=$?
el "gemm chunks old again"; FCO_COMMIT=a70f468 timeout 90 build/old/build/bin/fco-bench $G > $OUT/ga-old2.txt 2>&1; echo rc=$?
for f in old new old2; do echo "== $f"; grep -E '^ +[0-9]|rror' $OUT/ga-$f.txt | cut -c1-120; done
el all done
