#!/bin/bash
# Session 22 final (one H200, commit 9128ded): after GroupWgmma's kSub template (default 1: the operator's loop) — the
# gemv tests on local P = 1..4 and nccl P = 1 (quick), objects built on the CPU machine and carried.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=9128ded
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce test_gemv_allreduce_kernels test_example_gemv_allreduce > $O/tests-local.txt 2>&1; echo rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce test_gemv_allreduce_kernels > $O/tests-nccl.txt 2>&1; echo rc=$?
cp -r build/tests/logs $O/; pack
el tests done
tail -n 5 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt
