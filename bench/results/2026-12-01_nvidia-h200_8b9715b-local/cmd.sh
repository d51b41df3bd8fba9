#!/bin/bash
# Session 16 run 6 (one H200, commit 8b9715b): the three fused operators at P = 2 on the local
# transport (two virtual ranks on one GPU: both ranks share its HBM and SMs, so the numbers are
# the issues' one-GPU fallback "fused vs baseline on the local transport", not a 2-GPU result);
# every impl + AUTO, bf16, CUDA graphs, rounds in fco-bench's balanced order; targets.py.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=8b9715b
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o6; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
el gemv; timeout 150 build/bin/fco-bench gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 20 -w 5 -R 3 -J $O/gemv.json > $O/gemv.txt 2>&1; echo rc=$?
pack
el embedding; timeout 150 build/bin/fco-bench embedding_alltoall -t local -g 2 -G 1 -d bf16 -D 0,1,auto -n 10 -w 2 -R 3 -J $O/ea.json > $O/ea.txt 2>&1; echo rc=$?
pack
el gemm; timeout 150 build/bin/fco-bench gemm_alltoall -t local -g 2 -G 1 -d bf16 -n 10 -w 2 -R 4 -J $O/ga.json > $O/ga.txt 2>&1; echo rc=$?
python3 bench/targets.py $O/gemv.json $O/ea.json $O/ga.json > $O/targets.txt 2>&1
pack
for f in gemv ea ga; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|^# +[NBt]|auto ran' $O/$f.txt | cut -c1-230; done
echo "== targets"; tail -1 $O/targets.txt
el all done
