#!/bin/bash
# Session 17 run 2 (one H200, commit 7a8c689): test_gemv_allreduce on local with worlds up to P = 8
# (the split expectation now read from the plan's slots), then fco-bench of the three fused
# operators at P = 4 and P = 8 virtual ranks on one GPU (bf16, CUDA graphs, -R 2): issue 7's
# preparation — the ranks share one GPU's HBM and SMs, so these are not scale-up results.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=7a8c689
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o2; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
FCO_TEST_MAX_RANKS=8 FCO_TEST_QUICK=1 FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=200 tests/run.sh test_gemv_allreduce > $O/test-gemv-local8.txt 2>&1; echo rc=$?
cp build/tests/logs/local/test_gemv_allreduce.log $O/; pack; tail -3 $O/test-gemv-local8.txt
for P in 8 4; do
  el gemv P=$P; timeout 100 build/bin/fco-bench gemv_allreduce -t local -g $P -G 1 -d bf16 -n 20 -w 5 -R 2 -J $O/gemv-p$P.json > $O/gemv-p$P.txt 2>&1; echo rc=$?
  pack
  el embedding P=$P; timeout 120 build/bin/fco-bench embedding_alltoall -t local -g $P -G 1 -d bf16 -D 0,1,auto -n 10 -w 2 -R 2 -J $O/ea-p$P.json > $O/ea-p$P.txt 2>&1; echo rc=$?
  pack
  el gemm P=$P; timeout 120 build/bin/fco-bench gemm_alltoall -t local -g $P -G 1 -d bf16 -n 5 -w 2 -R 2 -J $O/ga-p$P.json > $O/ga-p$P.txt 2>&1; echo rc=$?
  pack
done
python3 bench/targets.py $O/*.json > $O/targets.txt 2>&1; pack
for f in gemv-p8 ea-p8 ga-p8 gemv-p4 ea-p4 ga-p4; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|auto ran' $O/$f.txt | cut -c1-200; done
echo "== targets"; tail -1 $O/targets.txt
el all done
