#!/bin/bash
# Session 38 (one H200): the lean warp tile's row split (equal rows a lane group, segmented scan
# for bags across shares; per-row bag ends). (1) the tests that run the lean kernels: local
# (P = 1..4 virtual ranks) and nccl (one rank); (2) fco-bench embedding_alltoall P = 1 on all nine
# workloads, bf16 and f32, impl 0 and fused; (3) the ragged rows at local P = 2; (4) tile size
# (FCO_EA_LEAN_CHUNKS) on workloads 0, 1, 7, 8 again now that shares are equal in rows.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o3; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log; el build
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr rc=$?"; tail -6 $O/test-ea-$tr.log
done
FCO_TRANSPORT=local timeout 100 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-local.log 2>&1; el "test_embedding_alltoall_bad local rc=$?"
B="build/bin/fco-bench embedding_alltoall -R 3 -n 10 -w 3"
for d in bf16 f32; do
  timeout 120 $B -t nccl -g 1 -G 1 -d $d -D 0,1 -J $O/p1-$d.json > $O/p1-$d.txt 2>&1; el "p1 $d rc=$?"
done
FCO_BENCH_EA_WORKLOADS=0,1,7,8 timeout 120 $B -t local -g 2 -d bf16 -D 0,1 -J $O/local2.json > $O/local2.txt 2>&1; el "local2 rc=$?"
export FCO_BENCH_EA_WORKLOADS=0,1,7,8
for c in 16 32; do
  FCO_EA_LEAN_CHUNKS=$c timeout 60 $B -t nccl -g 1 -G 1 -d bf16 -D 0,1 > $O/chunks-$c.txt 2>&1; el "chunks $c rc=$?"
done
pack
for f in $O/p1-bf16.txt $O/p1-f32.txt $O/local2.txt $O/chunks-*.txt; do echo "== $(basename $f)"; grep -v "^#  " $f | grep "^ \|wrong" | cut -c1-150; done
