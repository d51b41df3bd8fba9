#!/bin/bash
# Session 20 run 1 (one H200, commit 6514114): the tests' knobs through t_knob_set / t_knob_reset
# (the C suite, quick, on local P = 1..4 and nccl P = 1), make install + pkg-config consumer
# (tests/install/check.sh) with the CUDA build, and gemm_alltoall's AUTO-vs-chunks gap on the
# skewed workload (2×H200 runs read AUTO ~20 µs slower than the same impl 2) looked for on
# local P = 2 with FCO_GEMM_A2A_AUTO=2.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=6514114
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
for s in "1024,14336,4096,8,2,4" "1024,14336,4096,8,2"; do
  FCO_BENCH_GA_SHAPES="$s" FCO_GEMM_A2A_AUTO=2 build/bin/fco-bench gemm_alltoall -t local -g 2 -d bf16 -D 2,auto -R 3 >> $O/ga-auto2.txt 2>&1
  FCO_BENCH_GA_SHAPES="$s" FCO_GEMM_A2A_AUTO=2 build/bin/fco-bench gemm_alltoall -t local -g 2 -d bf16 -D auto,2 -R 3 >> $O/ga-auto2.txt 2>&1
done
pack
el gemm done
tail -n 3 $O/install.txt; tail -n 2 $O/tests-local.txt; tail -n 2 $O/tests-nccl.txt; grep -v "^#" $O/ga-auto2.txt | tail -20
