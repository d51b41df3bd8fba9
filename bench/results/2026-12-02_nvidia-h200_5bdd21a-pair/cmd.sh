#!/bin/bash
# Session 23 (one H200, commit 5bdd21a): the TMA grouped tile's split 2 as cluster pairs (the helper's slice through
# distributed shared memory; FCO_GEMV_SPLIT_PAIR=0 the split area + flag as before) — the group tests and
# test_gemv_allreduce (local P = 1..4, quick); fco-bench gemv_allreduce with CUDA graphs at M 64, local P = 1 over a
# K sweep at N = 8192 (where does the fixed cost sit?) and the listed shapes, pair on / off; P = 2 at M 48 / 64.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=5bdd21a
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_GROUP=only timeout 250 build/tests/test_gemv_allreduce_kernels > $O/tests-group.txt 2>&1; echo group-only rc=$?
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 250 build/tests/test_gemv_allreduce > $O/tests-gar.txt 2>&1; echo gemv_allreduce rc=$?
tail -n 2 $O/tests-group.txt $O/tests-gar.txt; pack
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_GEMV_GROUP_TMA=1 FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1,3 -R 3 -G 1 > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
SW="8192x2048,8192x4096,8192x8192,8192x16384,8192x28672,4096x14336,16384x16384"
b pair 1 "$SW" 64
b nopair 1 "$SW" 64 FCO_GEMV_SPLIT_PAIR=0
b pair-again 1 "$SW" 64
NK="8192x8192,4096x14336,8192x28672,16384x16384"
b pair 2 "$NK" "48,64"
b nopair 2 "$NK" "48,64" FCO_GEMV_SPLIT_PAIR=0
rm -f $O/build.log; pack
for f in $O/gemv-g*; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-150; done
