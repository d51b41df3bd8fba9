#!/bin/bash
# Session 18 run 2 (one H200, commit fbf94bb): the TMA-fed grouped gemv tile (FCO_GEMV_GROUP_TMA=1)
# first on a GPU — test_gemv_allreduce's grouped part (FCO_TEST_GROUP=only) on local (P = 1..4)
# and nccl (P = 1), then fco-bench gemv at M = 48 / 64, P = 1 (nccl) and P = 2 (local), with
# the knob off and on in the same call (-R 3: columns interleaved per round).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=fbf94bb
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o2; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
for t in local nccl; do
  FCO_TRANSPORT=$t FCO_TEST_GROUP=only timeout 200 build/tests/test_gemv_allreduce > $O/test-group-$t.txt 2>&1; echo "test group $t rc=$?"; tail -2 $O/test-group-$t.txt
done
pack
NK=8192x8192,8192x4096,4096x14336,4096x7168,8192x28672,16384x16384
for tma in 0 1; do
  el "gemv P=1 tma=$tma"; FCO_GEMV_GROUP_TMA=$tma FCO_BENCH_GEMV_NK=$NK FCO_BENCH_GEMV_M=48,64 timeout 120 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -n 10 -w 3 -R 3 -D 1,3 -J $O/gemv-p1-tma$tma.json > $O/gemv-p1-tma$tma.txt 2>&1; echo rc=$?
  el "gemv local P=2 tma=$tma"; FCO_GEMV_GROUP_TMA=$tma FCO_BENCH_GEMV_NK=8192x8192,4096x14336,16384x16384 FCO_BENCH_GEMV_M=64 timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 10 -w 3 -R 3 -D 1,3 -J $O/gemv-local2-tma$tma.json > $O/gemv-local2-tma$tma.txt 2>&1; echo rc=$?
  pack
done
for f in gemv-p1-tma0 gemv-p1-tma1 gemv-local2-tma0 gemv-local2-tma1; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror' $O/$f.txt | cut -c1-170; python3 -c "
import json,sys; d=json.load(open('$O/$f.json')); seen=set()
for r in d['results']:
  k=(r['impl'], r.get('plan'))
  if k not in seen and r['impl_id']==1: seen.add(k); print('  plan', r['impl'], '|', r.get('plan'))
" 2>&1 | head -8; done
el all done
