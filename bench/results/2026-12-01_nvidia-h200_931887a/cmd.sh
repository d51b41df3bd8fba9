#!/bin/bash
# Session 15 run 4 (one H200, commit 931887a): after the embedding / gemm launchers name their kernels
# (931887a) and the grouped gemv tiles at P = 1 without the slot round trip (609e84a): the whole
# C suite on local (quick), then fco-bench gemv (P = 1 nccl and P = 2 local, M 1 / 16 / 64, -J: the plan per column) and
# embedding / gemm on local P = 2 (a short sanity pass: 0 wrong, plan recorded).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=931887a
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
el "C suite local"; FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 timeout 400 tests/run.sh > $O/tests-local.txt 2>&1; echo rc=$?
tail -5 $O/tests-local.txt; grep -E "FAIL" $O/tests-local.txt | head
pack
el "gemv P=1"; FCO_BENCH_GEMV_NK=8192x8192,4096x14336,8192x28672,16384x16384 FCO_BENCH_GEMV_M=1,16,64 timeout 90 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -n 10 -w 3 -J $O/gemv-p1.json > $O/gemv-p1.txt 2>&1; echo rc=$?
el "gemv local P=2"; FCO_BENCH_GEMV_NK=8192x8192,4096x14336 FCO_BENCH_GEMV_M=1,16,64 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 10 -w 3 -J $O/gemv-local2.json > $O/gemv-local2.txt 2>&1; echo rc=$?
el "embedding local P=2"; timeout 90 build/bin/fco-bench embedding_alltoall -t local -g 2 -G 1 -d bf16 -n 5 -w 2 -J $O/ea-local2.json > $O/ea-local2.txt 2>&1; echo rc=$?
el "embedding P=1"; timeout 90 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -d bf16 -n 5 -w 2 -J $O/ea-p1.json > $O/ea-p1.txt 2>&1; echo rc=$?
el "gemm local P=2"; timeout 90 build/bin/fco-bench gemm_alltoall -t local -g 2 -G 1 -d bf16 -n 5 -w 2 -J $O/ga-local2.json > $O/ga-local2.txt 2>&1; echo rc=$?
pack
for f in gemv-p1 gemv-local2 ea-local2 ea-p1 ga-local2; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror' $O/$f.txt | cut -c1-200; python3 -c "
import json,sys; d=json.load(open('$O/$f.json')); seen=set()
for r in d['results']:
  k=(r['impl'], r.get('plan'))
  if k not in seen: seen.add(k); print('  plan', r['impl'], '|', r.get('plan'))
" | head -24; done
el all done
