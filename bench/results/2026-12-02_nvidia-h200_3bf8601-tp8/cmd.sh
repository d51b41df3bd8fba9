#!/bin/bash
# Session 27 (one H200): the two-phase schedules' order and flags through TwoPhaseOrder (one-tile and grouped), then
# the grouped-tile tests at local P = 1..8 (FCO_TEST_MAX_RANKS=8: 5..8 virtual ranks leave 16..26 slots a rank, so up
# to 8 groups a block), the operator's test (local P 1..4) and the gemv tests on nccl P = 1; fco-bench gemv_allreduce
# at local P = 8 (M 48 / 64, the four shapes, every impl).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_MAX_RANKS=8 FCO_TEST_GROUP=only FCO_TEST_QUICK=1 timeout 300 build/tests/test_gemv_allreduce_kernels > $O/test-group-local8.txt 2>&1; echo group tests local P 1..8 rc=$?
tail -n 10 $O/test-group-local8.txt | grep -E "P=|PASS|FAIL"; grep -m3 -iE "fail|error" $O/test-group-local8.txt
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 120 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-nccl.txt 2>&1; echo tests nccl rc=$?
pack
b() { local tag=$1 g=$2 nk=$3 m=$4 d=$5; shift 5; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D $d -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
b tp-p8 8 "8192x8192,8192x28672,4096x14336,16384x16384" "48,64" all
pack
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-175; done
