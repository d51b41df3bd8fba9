#!/bin/bash
# Session 10 run 11 (2xH200, commit 429aee0): grouped gemv tiles on wgmma — the group test
# (local P=1..4, nccl P=2), then fco-bench: P = 1 (local) M = 64 wgmma vs mma.sync tile, and
# P = 2 (nccl) M = 32, 64 with FCO_GEMV_GROUP unset / 4 / 2 / 0, impls 0, 1, 3, auto.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=429aee0
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for t in local nccl; do
  el "test $t"; FCO_TEST_GROUP=only FCO_TRANSPORT=$t timeout 150 build/tests/test_gemv_allreduce > $OUT/test-group-$t.txt 2>&1; echo rc=$?; tail -2 $OUT/test-group-$t.txt
done
for mma in 0 1; do
  echo "== P=1 group 4 mma=$mma"
  FCO_GEMV_GROUP=4 FCO_GEMV_GROUP_MMA=$mma FCO_BENCH_GEMV_NK=8192x8192,16384x16384 FCO_BENCH_GEMV_M=64 timeout 60 \
    build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -D 1 > $OUT/p1-mma$mma.txt 2>&1
  grep -E '^ +[0-9]' $OUT/p1-mma$mma.txt | cut -c1-180
done
B="build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -D 0,1,3,auto"
for gk in unset 4 2 0; do
  el "bench group=$gk"
  if [ $gk = unset ]; then unset FCO_GEMV_GROUP; else export FCO_GEMV_GROUP=$gk; fi
  FCO_BENCH_GEMV_M=32,64 timeout 100 $B > $OUT/gemv-g$gk.txt 2>&1; echo rc=$?
done
unset FCO_GEMV_GROUP
el all done
for gk in unset 4 2 0; do echo "== group $gk"; grep -E '^ +[0-9]|wrong|rror' $OUT/gemv-g$gk.txt | cut -c1-180; done
