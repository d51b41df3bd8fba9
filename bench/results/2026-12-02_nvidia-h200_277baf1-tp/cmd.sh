#!/bin/bash
# Session 27 (one H200): impl 2 (two-phase) on impl 1's grouped tiles at M 33..64 (run_twophase_group). First the
# grouped-tile tests (FCO_TEST_GROUP=only: impl 1's rows + twophase_group_tests) on local P = 1..4 and the operator's
# test (local); then fco-bench gemv_allreduce: P = 1 impl 0 / 1 at the four shapes (the refactor of the one-shot's
# group loop against run a732302-final), local P = 2 and P = 4 (M 48 / 64, the four shapes, every impl); then the
# whole C suite (local, quick), the gemv tests on nccl P = 1, pytest -m gpu (quick).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 timeout 200 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local rc=$?
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 120 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
tail -n 3 $O/test-group-local.txt; grep -m3 -iE "fail|error" $O/test-group-local.txt
pack
b() { local tag=$1 g=$2 nk=$3 m=$4 d=$5; shift 5; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D $d -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
P2="8192x8192,8192x28672,4096x14336,16384x16384"
b p1 1 "$P2" "64" 0,1
b tp-p2 2 "$P2" "48,64" all
b tp-p4 4 "$P2" "48,64" all
pack
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-150; done
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-local.txt 2>&1; echo tests local rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-nccl.txt 2>&1; echo tests nccl rc=$?
cp -r build/tests/logs $O/; rm -f $O/build.log; pack
tail -n 4 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt
(export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so FCO_TEST_QUICK=1; timeout 100 python3 -m pytest tests/python -m gpu -q -p no:cacheprovider -rs -k gemv > $O/pytest.txt 2>&1; echo pytest gemv rc=$?)
pack
tail -n 3 $O/pytest.txt
