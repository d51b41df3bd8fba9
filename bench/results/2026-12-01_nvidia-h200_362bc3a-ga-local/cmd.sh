#!/bin/bash
# Session 18 run 9 (one H200, commit 362bc3a): gemm AUTO's local rule above two ranks (tiles only
# where a_rows <= 2048) — test_gemm_alltoall (quick) on local P = 1..4 (multi_rank_auto_rule) and
# nccl P = 1, then fco-bench gemm_alltoall on local P = 3, 4, 8 (bf16, graphs, -R 2).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=362bc3a
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o9; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
for t in local nccl; do
  FCO_TRANSPORT=$t FCO_TEST_QUICK=1 timeout 200 build/tests/test_gemm_alltoall > $O/test-gemm-$t.txt 2>&1; echo "test gemm $t rc=$?"; tail -1 $O/test-gemm-$t.txt
done
pack
for P in 3 4 8; do
  el gemm P=$P; timeout 150 build/bin/fco-bench gemm_alltoall -t local -g $P -G 1 -d bf16 -n 5 -w 2 -R 2 -J $O/ga-p$P.json > $O/ga-p$P.txt 2>&1; echo rc=$?
  grep -E '^# +tokens|^ +[0-9]|wrong|auto ran' $O/ga-p$P.txt | cut -c1-200
  pack
done
rm -f $O/build.log; pack
el all done
