#!/bin/bash
# Session 19 run 4 (one H200, commit 88a6af4): gemv AUTO on local revised with Σ K_r (fco_gemv_ar_agree:
# impl 0 at M 9..16 where N·ΣK_r ≥ 2^27) — test_gemv_allreduce (+ _kernels) on local with worlds up to
# P = 8 and on nccl (P = 1), then fco-bench gemv_allreduce on local at P = 2, 4, 8 (bf16, graphs,
# -R 2): AUTO against impl 0, as run dcbed43-local-auto.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=88a6af4
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o3; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
FCO_TEST_MAX_RANKS=8 FCO_TEST_QUICK=1 FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 tests/run.sh test_gemv_allreduce test_gemv_allreduce_kernels > $O/test-gemv-local8.txt 2>&1; echo rc=$?
cp build/tests/logs/local/test_gemv_allreduce.log $O/test_gemv_allreduce-local.log
FCO_TEST_QUICK=1 FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 tests/run.sh test_gemv_allreduce test_gemv_allreduce_kernels > $O/test-gemv-nccl.txt 2>&1; echo rc=$?
cp build/tests/logs/nccl/test_gemv_allreduce.log $O/test_gemv_allreduce-nccl.log
pack; tail -2 $O/test-gemv-local8.txt $O/test-gemv-nccl.txt
for P in 2 4 8; do
  el gemv P=$P; timeout 100 build/bin/fco-bench gemv_allreduce -t local -g $P -G 1 -d bf16 -n 20 -w 5 -R 2 -J $O/gemv-p$P.json > $O/gemv-p$P.txt 2>&1; echo rc=$?
  pack
done
python3 bench/targets.py $O/gemv-p*.json > $O/targets.txt 2>&1; pack
for P in 2 4 8; do echo "== P=$P"; grep -E '^ +[0-9]|wrong|rror|auto ran' $O/gemv-p$P.txt | awk '{print $1,$2,$3,$8,$9,$10,$12,$13,$14,$15,$16,$17,$NF}'; done
echo "== targets"; grep -c "auto >= impl 0.*MISSED" $O/targets.txt; tail -1 $O/targets.txt
el all done
