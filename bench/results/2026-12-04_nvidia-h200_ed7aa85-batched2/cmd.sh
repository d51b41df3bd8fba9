#!/bin/bash
# Session 37 (one H200): after run 27ecec1-batched — impl 0's strided batched GEMM only where rows · N <= 2^21,
# local AUTO's tiles bound lowered to a_rows / E_r · N < 2^20. test_gemm_alltoall (quick) and _checks on local
# (P 1..4) and nccl (P 1); fco-bench gemm_alltoall at P = 1, local P = 2 and 4, balanced and random rows,
# impl 0 / tiles / AUTO, graphs, -R 4.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for t in local nccl; do
  for x in test_gemm_alltoall test_gemm_alltoall_checks; do
    FCO_TEST_QUICK=1 FCO_TRANSPORT=$t timeout 200 build/tests/$x > $O/$x-$t.txt 2>&1; echo "$x $t rc=$?"
  done
done
pack
S="4096,14336,4096,8,2;1024,14336,4096,8,2;512,2048,7168,32,8;128,2048,7168,32,8;1024,2048,4096,8,2;2048,1408,2048,16,2"
S="$S;2048,1408,2048,16,2,r;512,2048,7168,32,8,r;128,2048,7168,32,8,r;1024,2048,4096,8,2,r"
for g in 1 2 4; do
  FCO_BENCH_GA_SHAPES="$S" timeout 150 build/bin/fco-bench gemm_alltoall -t local -g $g -d bf16 -D tiles,auto -G 1 -R 4 -n 10 -w 3 \
    -J $O/ga-local$g.json > $O/ga-local$g.txt 2> $O/ga-local$g.err; echo "P=$g rc=$?"
  pack
done
for f in $O/ga-*.txt; do echo "== $(basename $f)"; grep -v "^#  " $f | grep "^ \|^# tok\|wrong\|auto ran" | cut -c1-150; done
