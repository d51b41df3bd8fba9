#!/bin/bash
# Session 55, one GPU, one short call: the bench audit's F0 — local (P = 2) rows timed eager
# against CUDA graphs (-G 1) at one commit, alternating, on the rows its evidence came from
# (gemv 8192² M 1 / 16; allreduce 1 KB .. 1 MB); and F9's new allreduce check values on a GPU
# transport (0 wrong expected). Carry build/carry.tgz (build/obj at the commit).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
nvidia-smi --query-gpu=name --format=csv,noheader
make -j16 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so build/bin/fco-bench > $OUT/build.log 2>&1
echo "make rc=$?"
B=build/bin/fco-bench
export FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=1,16
for i in 1 2; do
  $B gemv_allreduce -t local -g 2 -d bf16 -n 20 -w 3 -J $OUT/gemv-eager-$i.json > $OUT/gemv-eager-$i.txt 2>&1
  echo "gemv eager $i rc=$?"
  $B gemv_allreduce -t local -g 2 -G 1 -d bf16 -n 20 -w 3 -J $OUT/gemv-graph-$i.json > $OUT/gemv-graph-$i.txt 2>&1
  echo "gemv graph $i rc=$?"
done
$B allreduce -t local -g 2 -b 1K -e 1M -f 4 > $OUT/ar-eager.txt 2>&1; echo "ar eager rc=$?"
$B allreduce -t local -g 2 -G 1 -b 1K -e 1M -f 4 > $OUT/ar-graph.txt 2>&1; echo "ar graph rc=$?"
for f in gemv-eager-1 gemv-graph-1 gemv-eager-2 gemv-graph-2 ar-eager ar-graph; do
  echo "== $f"; grep -E "^ +[0-9]|wrong elements" $OUT/$f.txt
done
