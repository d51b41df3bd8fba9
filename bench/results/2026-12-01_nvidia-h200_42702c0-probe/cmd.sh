#!/bin/bash
# Session 15 run 1 (one H200, commit 42702c0):
# (1) the last missed one-GPU gemv target, 4096×14336 M = 16 at P = 1 (0.751 of HBM): impl 1 with
#     FCO_GEMV_PIPE unset / 0 / 1 and FCO_GEMV_WIDE 0 / 1, cuBLAS beside (fco-bench, graphs);
# (2) gemv_stream_probe on 4096×14336 (P = 1) and 4096×7168, every tile-loop variant;
# (3) gemv_group_probe 20 (the "tmawkN ... fix" rows of session 14, never run).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=42702c0
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
B="build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 20 -w 5 -R 3"
export FCO_BENCH_GEMV_NK=4096x14336 FCO_BENCH_GEMV_M=1,16
for cfg in "" "FCO_GEMV_PIPE=0" "FCO_GEMV_PIPE=1" "FCO_GEMV_WIDE=0 FCO_GEMV_PIPE=0" "FCO_GEMV_WIDE=0 FCO_GEMV_PIPE=1"; do
  el "gemv P=1 [$cfg]"; env $cfg timeout 60 $B > $O/gemv-"${cfg// /_}".txt 2>&1; echo rc=$?
  grep -E '^ +[0-9]|wrong' $O/gemv-"${cfg// /_}".txt | cut -c1-200
done
pack
el "stream probe"; FCO_PROBE_SHAPES=4096x14336,4096x7168 timeout 150 build/probe/gemv_stream_probe 30 > $O/stream-probe.txt 2>&1; echo rc=$?
cat $O/stream-probe.txt
pack
el "group probe"; timeout 240 build/probe/gemv_group_probe 20 > $O/group-probe.txt 2>&1; echo rc=$?
pack
cat $O/group-probe.txt | cut -c1-200
el all done
