#!/bin/bash
# Session 13 run 2 (1 H200, commit e9c20d3): wide blocks for the plain one-shot — test_gemv_allreduce
# on local (P 1..4), then fco-bench gemv at P = 1 (nccl -g 1, one rank, graphs, -R 3) with
# FCO_GEMV_WIDE 0 / 1: the issue's shapes, and the two-GPU rank slices (K / 2) at M 1 / 16 with
# FCO_GEMV_PIPE 0 / 1 at M = 16.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=e9c20d3
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p /tmp/o; O=/tmp/o
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=170 VERBOSE=1 timeout 200 tests/run.sh test_gemv_allreduce > $O/tests.txt 2>&1
grep -E "^(PASS|FAIL)|passed" $O/tests.txt
B="build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 20 -w 5 -R 3"
for wd in 0 1; do
  FCO_GEMV_WIDE=$wd $B -J $O/issue-w$wd.json > $O/issue-w$wd.txt 2>&1
  FCO_GEMV_WIDE=$wd FCO_BENCH_GEMV_NK=8192x4096,4096x7168,8192x14336,16384x8192 FCO_BENCH_GEMV_M=1,16 $B -J $O/slice-w$wd.json > $O/slice-w$wd.txt 2>&1
  for pp in 0 1; do
    FCO_GEMV_PIPE=$pp FCO_GEMV_WIDE=$wd FCO_BENCH_GEMV_NK=8192x4096,4096x7168,8192x14336,16384x8192 FCO_BENCH_GEMV_M=16 $B -J $O/slice-w$wd-pipe$pp.json > $O/slice-w$wd-pipe$pp.txt 2>&1
  done
done
python3 bench/targets.py $O/issue-w1.json > $O/targets.txt 2>&1
tar czf $OUT/out.tgz -C $O .
for f in $O/issue-w*.txt $O/slice-w*.txt; do echo "== $(basename $f)"; grep -vE "^#|^\s*$" $f | cut -c1-160; done
