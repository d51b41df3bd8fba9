#!/bin/bash
# Session 24 (one H200, commit 9722748; its kernels are 8e2c19f's, later commits comments and docs): the closing GPU run —
# install check, the C suites (quick) on local P = 1..4 and nccl P = 1; fco-bench gemv_allreduce with CUDA graphs, local
# P = 1 at M 64 (K sweep at N = 8192) and P = 2 at M 48 / 64 with the defaults.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-9722748}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
BUILD=build tests/install/check.sh > $O/install.txt 2>&1; echo install rc=$?
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-local.txt 2>&1; echo local rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-nccl.txt 2>&1; echo nccl rc=$?
cp -r build/tests/logs $O/; pack
el C suites done
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1,3 -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
b sweep 1 "8192x2048,8192x4096,8192x8192,8192x16384,8192x28672,4096x14336,16384x16384" 64
b default 2 "8192x8192,4096x14336,8192x28672,16384x16384" "48,64"
rm -f $O/build.log; pack
el bench done
tail -n 3 $O/install.txt; tail -n 3 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-150; done
