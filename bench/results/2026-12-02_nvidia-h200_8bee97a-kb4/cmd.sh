#!/bin/bash
# Session 26 (one H200), an experiment: the TMA tile's groups of 4 with 4 boxes of 64 k a stage (kKb = 4: 512
# contiguous bytes of each W row a request, 3 stages of 64 KB) instead of 2 (6 stages of 32 KB), built from kb4.patch
# (-DFCO_TMA4_KB=4, build/obj/kb4/gemv_allreduce.o, relinked in this run) against the landed build; and the landed
# build with 4 of its 6 stages in use (FCO_GEMV_TMA_STAGES=4). P = 1, M 48 / 64 at the shapes where the rule takes
# groups of 4; then the group tests (local P = 1..4, quick, FCO_TEST_GROUP=only) on the kb4 build.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
cp -a build/obj/src/cuda/gemv_allreduce.o /tmp/new.o
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 120 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1 -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
SP="4096x14336,4096x7168,8192x4096,8192x14336,8192x8192,2048x8192"
relink() { cp "$1" build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o && make -j16 NCCL_HOME=$NCCL_HOME >> $O/build.log 2>&1 || { echo relink failed; tail -5 $O/build.log; }; }
b kb2 1 "$SP" "48,64"
b kb2-st4 1 "$SP" "48,64" FCO_GEMV_TMA_STAGES=4
relink build/obj/kb4/gemv_allreduce.o
b kb4 1 "$SP" "48,64"
pack
FCO_TEST_GROUP=only FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels > $O/tests-kb4.txt 2>&1; echo tests kb4 rc=$?
cp -r build/tests/logs $O/; relink /tmp/new.o; rm -f $O/build.log; pack
tail -n 2 $O/tests-kb4.txt
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-100; done
