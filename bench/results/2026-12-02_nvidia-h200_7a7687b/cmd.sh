#!/bin/bash
# Session 21 run 5 (one H200, commit 7a7687b): GroupWgmma's template gained kProxyFence (default true, the
# operator unchanged; a header of every gemv object): the C suite (quick) on local P = 1..4 and
# nccl P = 1, the install check, and fco-bench gemv_allreduce on local P = 2 at M 1 and 64.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=7a7687b
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
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-local.txt 2>&1; echo rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-nccl.txt 2>&1; echo rc=$?
cp -r build/tests/logs $O/; pack
el C suites done
FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=1,64 build/bin/fco-bench gemv_allreduce -t local -g 2 -d bf16 -G 1 > $O/gemv-local.txt 2>&1; echo bench rc=$?
pack
el bench done
tail -n 3 $O/install.txt; tail -n 2 $O/tests-local.txt; tail -n 2 $O/tests-nccl.txt; head -14 $O/gemv-local.txt; grep -E "^ +[0-9]|wrong" $O/gemv-local.txt
