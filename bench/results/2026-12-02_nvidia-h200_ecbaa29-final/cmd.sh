#!/bin/bash
# Session 21 run 9 (one H200, commit ecbaa29): after fco::tile::mbar_arrive_cluster's change (a header of
# every GEMM object; the operator's default tile does not call it) — the C suites (quick) on local
# P = 1..4 and nccl P = 1, the install check, test_gemm_alltoall(_checks) on local with
# FCO_GA_TILE=tma2 (the cluster-pair tile that does call it), and fco-bench gemm_alltoall tiles
# (-D 0,1) on local P = 2 at 512 tokens and decode, default tile and tma2.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=ecbaa29
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
FCO_GA_TILE=tma2 FCO_DEBUG=1 FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 tests/run.sh test_gemm_alltoall test_gemm_alltoall_checks > $O/tests-tma2.txt 2>&1; echo tma2 tests rc=$?
cp -r build/tests/logs $O/logs-tma2; pack
el tma2 tests done
S="512,2048,7168,32,8;128,2048,7168,32,8"
FCO_BENCH_GA_ecbaa29PES="$S" build/bin/fco-bench gemm_alltoall -t local -g 2 -d bf16 -D 0,1 -R 3 > $O/ga-default.txt 2>&1; echo bench rc=$?
FCO_GA_TILE=tma2 FCO_BENCH_GA_ecbaa29PES="$S" build/bin/fco-bench gemm_alltoall -t local -g 2 -d bf16 -D 0,1 -R 3 > $O/ga-tma2.txt 2>&1; echo bench tma2 rc=$?
pack
el bench done
tail -n 3 $O/install.txt; tail -n 2 $O/tests-local.txt; tail -n 2 $O/tests-nccl.txt; tail -n 4 $O/tests-tma2.txt
grep -E "^ +[0-9]|wrong|tile" $O/ga-default.txt | head -8; grep -E "^ +[0-9]|wrong|tile" $O/ga-tma2.txt | head -8
