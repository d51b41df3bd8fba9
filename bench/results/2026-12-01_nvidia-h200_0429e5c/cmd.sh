#!/bin/bash
# Session 15 run 2 (one H200, commit 0429e5c): the gemv knobs read once by the op layer, FCO_GEMV_PIPE
# auto off in wide blocks, the P = 1 one-shot without the slot round trip, fco_last_plan.
# (1) test_gemv_allreduce on local (quick, P 1..4: split groups now asserted through
#     fco_last_plan; refused knob values), test_last_plan on local;
# (2) fco-bench gemv P = 1 (nccl, one rank) at the shapes, M 1 / 4 / 16 / 64, -J, and
#     targets.py (the one-GPU fallback: GEMV phase >= 80 % of HBM at M <= 16);
# (3) 4096×14336 M = 16 with FCO_GEMV_PIPE=1 and with FCO_GEMV_PDL=0 beside.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=0429e5c
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
for t in test_gemv_allreduce test_last_plan; do
  el "$t local"; FCO_TEST_QUICK=1 FCO_TRANSPORT=local timeout 200 build/tests/$t > $O/$t-local.txt 2>&1; echo rc=$?; tail -3 $O/$t-local.txt
done
grep -m3 "FCO_GEMV_.*=.*:" $O/test_gemv_allreduce-local.txt
pack
B="build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -n 20 -w 5 -R 3"
el "gemv P=1 issue shapes"; FCO_BENCH_GEMV_M=1,4,16,64 timeout 150 $B -D 0,1,auto -J $O/gemv-p1.json > $O/gemv-p1.txt 2>&1; echo rc=$?
for cfg in FCO_GEMV_PIPE=1 FCO_GEMV_PDL=0; do
  el "4096x14336 M 1,16 $cfg"; env $cfg FCO_BENCH_GEMV_NK=4096x14336 FCO_BENCH_GEMV_M=1,16 timeout 60 $B -D 1 > $O/gemv-$cfg.txt 2>&1; echo rc=$?
done
python3 bench/targets.py $O/gemv-p1.json > $O/targets.txt 2>&1
pack
for f in gemv-p1 gemv-FCO_GEMV_PIPE=1 gemv-FCO_GEMV_PDL=0; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|^# +N' $O/$f.txt | cut -c1-200; done
echo "== targets"; cat $O/targets.txt | head -40
el all done
