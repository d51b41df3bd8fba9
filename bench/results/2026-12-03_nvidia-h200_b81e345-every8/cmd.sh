#!/bin/bash
# Session 32 (one H200): the late SMs of run 2026-12-03_nvidia-h200_d1b3d0a-owners again, with two more trace slots
# between the rank view and run()'s entry ("ctx": past the kernel's context set-up and checks; "path": the start of
# the one-shot's group path), and the print kernel after every call (EVERY=1, as in d1b3d0a) or after every 8th only
# (EVERY=8: seven calls back to back as without the trace, then the printed one). FCO_GEMV_TRACE build only (the
# normal one's times are run d1b3d0a's). Local transport, P = 1, bf16, CUDA graphs.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
cp build/obj/trace/gemv_allreduce.o build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
CONF=(
  "def-f1 4096x7168 64"
  "g8-f1 8192x4096 64"
  "g4 8192x4096 64 FCO_GEMV_GROUP_TMA=4"
  "m16 4096x4096 16"
)
for ev in 8 1; do
  for c in "${CONF[@]}"; do
    set -- $c; tag=$1 nk=$2 m=$3; shift 3
    env "$@" FCO_GEMV_TRACE_EVERY=$ev FCO_BENCH_GEMV_NK=$nk FCO_BENCH_GEMV_M=$m timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -n 20 -w 2 -R 1 -D 1 > $O/gtrace-$tag-e$ev.txt 2>&1; echo trace $tag every $ev rc=$?
  done
done
python3 bench/probe/gtrace_summary.py $O/gtrace-*.txt > $O/summary.txt
xz -T8 $O/gtrace-*.txt; pack
cat $O/summary.txt
