#!/bin/bash
# Session 23 (one H200, commit bef5cbf): the TMA-fed grouped gemv tile in the operator (FCO_GEMV_GROUP_TMA=1:
# groups of 8 tiles = 128 columns, 2 64-k boxes a stage, 32-bit producer loop, K split by pick_split) —
# the gemv kernel tests on local P = 1..4 (quick), then fco-bench gemv_allreduce at M 48 / 64, local P = 1 and 2,
# impl 1 with FCO_GEMV_GROUP_TMA=0 and =1 alternated (twice each) beside impl 0 / 3 and cuBLAS alone (gemv column).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 FCO_TEST_GROUP=only build/tests/test_gemv_allreduce_kernels > $O/tests-group.txt 2>&1; echo group-only rc=$?
tail -n 3 $O/tests-group.txt; pack
el group tests done
NK="8192x8192,4096x14336,8192x28672,16384x16384"
for rep in 1 2; do
  for g in 1 2; do
    for t in 0 1; do
      FCO_GEMV_GROUP_TMA=$t FCO_BENCH_GEMV_NK="$NK" FCO_BENCH_GEMV_M="48,64" timeout 120 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1,3 -R 3 > $O/gemv-g$g-tma$t-r$rep.txt 2>&1; echo bench g$g tma$t r$rep rc=$?
    done
  done
  pack
done
el bench done
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-local.txt 2>&1; echo tests rc=$?
cp -r build/tests/logs $O/; rm -f $O/build.log; pack
el tests done
tail -n 4 $O/tests-local.txt
for f in $O/gemv-g*; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-150; done
