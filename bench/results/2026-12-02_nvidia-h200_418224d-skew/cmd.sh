#!/bin/bash
# Session 23 (one H200, commit 418224d): the TMA grouped gemv tile (FCO_GEMV_GROUP_TMA=1) with CUDA graphs (-G 1), M 48 / 64:
# local P = 1 and 2, TMA 0 / 1; at P = 1 also TMA with FCO_GEMV_SPLIT=1 (one block a group, no helper hand-off),
# FCO_GEMV_PDL=0, and FCO_GEMV_SPLIT_SKEW=15 / 30 (the owner's slice larger, so its helper's partial is there first);
# then the group tests (local P = 1..4, quick) with the skew rows.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=418224d
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
NK="8192x8192,4096x14336,8192x28672,16384x16384"
b() { local tag=$1 g=$2; shift 2; env "$@" FCO_BENCH_GEMV_NK="$NK" FCO_BENCH_GEMV_M="48,64" timeout 120 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1,3 -R 3 -G 1 > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
for g in 1 2; do b tma0 $g FCO_GEMV_GROUP_TMA=0; b tma1 $g FCO_GEMV_GROUP_TMA=1; done
b tma1-split1 1 FCO_GEMV_GROUP_TMA=1 FCO_GEMV_SPLIT=1
b tma1-nopdl 1 FCO_GEMV_GROUP_TMA=1 FCO_GEMV_PDL=0
b tma1-skew15 1 FCO_GEMV_GROUP_TMA=1 FCO_GEMV_SPLIT_SKEW=15
b tma1-skew30 1 FCO_GEMV_GROUP_TMA=1 FCO_GEMV_SPLIT_SKEW=30
b tma1-again 1 FCO_GEMV_GROUP_TMA=1
pack
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_GROUP=only timeout 250 build/tests/test_gemv_allreduce_kernels > $O/tests-group.txt 2>&1; echo group-only rc=$?
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 250 build/tests/test_gemv_allreduce > $O/tests-gar.txt 2>&1; echo gemv_allreduce rc=$?
tail -n 2 $O/tests-group.txt $O/tests-gar.txt
rm -f $O/build.log; pack
for f in $O/gemv-g*; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-150; done
