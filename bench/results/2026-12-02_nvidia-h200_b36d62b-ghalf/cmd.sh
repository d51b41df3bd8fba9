#!/bin/bash
# Session 22 (one H200, commit b36d62b): grouped gemv tiles push their partials in the dtype (half the bytes;
# FCO_GEMV_GROUP_FP32=1 the fp32 ones) — the C suites (quick) on local P = 1..4 and nccl P = 1, the install check, and
# fco-bench gemv_allreduce at M 48 / 64 on local P = 2 and 4, impl 1 (grouped) beside 0 and 3, dtype vs fp32 partials.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=b36d62b
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
NK="8192x8192,4096x14336,8192x28672"
for g in 2 4; do
  FCO_BENCH_GEMV_NK="$NK" FCO_BENCH_GEMV_M="48,64" build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1,3 -R 3 > $O/gemv-g$g-half.txt 2>&1; echo bench g$g half rc=$?
  FCO_GEMV_GROUP_FP32=1 FCO_BENCH_GEMV_NK="$NK" FCO_BENCH_GEMV_M="48,64" build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1,3 -R 3 > $O/gemv-g$g-fp32.txt 2>&1; echo bench g$g fp32 rc=$?
  pack
done
el bench done
tail -n 3 $O/install.txt; tail -n 2 $O/tests-local.txt; tail -n 2 $O/tests-nccl.txt
for f in $O/gemv-g*; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-150; done
