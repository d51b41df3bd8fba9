#!/bin/bash
# Session 18 run 3 (one H200, commit 1362c40): gemv impl 4 "cublas_chunks" first on a GPU — the
# C suite (quick) on local (P = 1..4) and nccl (P = 1), then fco-bench gemv on local P = 2 and 4
# (impl 0, 1, 3, 4, auto; -R 3), and an nsys trace of impl 4 on local P = 2 (the overlap).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=1362c40
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o3; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 timeout 300 tests/run.sh > $O/tests-local.txt 2>&1; echo rc=$?
tail -n 1 $O/tests-local.txt; grep -E "^FAIL" $O/tests-local.txt
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=200 FCO_TEST_QUICK=1 timeout 300 tests/run.sh > $O/tests-nccl.txt 2>&1; echo rc=$?
tail -n 1 $O/tests-nccl.txt; grep -E "^FAIL" $O/tests-nccl.txt
cp -r build/tests/logs $O/; pack
el "C suites done"
for P in 2 4; do
  el "gemv local P=$P"; FCO_BENCH_GEMV_NK=8192x8192,4096x14336,8192x28672,16384x16384 FCO_BENCH_GEMV_M=1,16,64 timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $P -G 1 -d bf16 -n 10 -w 3 -R 3 -D 0,1,3,4,auto -J $O/gemv-local$P.json > $O/gemv-local$P.txt 2>&1; echo rc=$?
  pack
done
if command -v nsys > /dev/null; then
  el nsys; FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=64 timeout 120 nsys profile -o $O/chunks-trace -t cuda --force-overwrite true build/bin/fco-bench gemv_allreduce -t local -g 2 -G 0 -d bf16 -n 5 -w 2 -D 0,4 > $O/nsys.txt 2>&1; echo nsys rc=$?
  nsys stats -r cuda_gpu_trace --format csv -o $O/chunks-trace $O/chunks-trace.nsys-rep > /dev/null 2>&1; ls $O | head -20
  rm -f $O/chunks-trace.nsys-rep $O/chunks-trace.sqlite
else echo "no nsys"; fi
pack
for f in gemv-local2 gemv-local4; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror' $O/$f.txt | cut -c1-180; python3 -c "
import json,sys; d=json.load(open('$O/$f.json')); seen=set()
for r in d['results']:
  k=(r['impl'], r.get('plan'))
  if k not in seen and r['impl_id'] in (4,-1): seen.add(k); print('  plan', r['impl'], '|', r.get('plan'))
" 2>&1 | head -12; done
el all done
