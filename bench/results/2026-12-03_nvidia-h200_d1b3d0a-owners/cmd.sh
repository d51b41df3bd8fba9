#!/bin/bash
# Session 32 (one H200): does every cluster pair's owner start its math late, or only pair 0's (run
# 2026-12-03_nvidia-h200_e40d507-fintrace traced blocks 0 and 1 only)? The FCO_GEMV_TRACE build now records the
# first 288 blocks (their SM, run()/run_rounds() entry by thread 0 and by the producer). Local transport, P = 1, bf16,
# CUDA graphs, M 64 (and M 16 at 4096x4096): 4096x7168 (pairs by default) with / without the split finalise, 8192x4096
# in pairs of groups of 8 (the default) with / without it, and unsplit groups of 4 (FCO_GEMV_GROUP_TMA=4) as the
# baseline without pairs. The normal build first: the same configurations timed (-R 3), for the plans and times.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
CONF=(
  "def-f1 4096x7168 64"
  "def-f0 4096x7168 64 FCO_GEMV_PAIR_FIN=0"
  "g8-f1 8192x4096 64"
  "g8-f0 8192x4096 64 FCO_GEMV_PAIR_FIN=0"
  "g4 8192x4096 64 FCO_GEMV_GROUP_TMA=4"
  "m16 4096x4096 16"
)
for c in "${CONF[@]}"; do
  set -- $c; tag=$1 nk=$2 m=$3; shift 3
  env "$@" FCO_BENCH_GEMV_NK=$nk FCO_BENCH_GEMV_M=$m timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 0,1 -R 3 -G 1 -J $O/time-$tag.json > $O/time-$tag.txt 2>&1; echo time $tag rc=$?
done
pack
cp build/obj/trace/gemv_allreduce.o build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o && make -j16 NCCL_HOME=$NCCL_HOME >> $O/build.log 2>&1 || { echo relink failed; tail -5 $O/build.log; }
for c in "${CONF[@]}"; do
  set -- $c; tag=$1 nk=$2 m=$3; shift 3
  env "$@" FCO_BENCH_GEMV_NK=$nk FCO_BENCH_GEMV_M=$m timeout 90 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -n 10 -w 2 -R 1 -D 1 > $O/gtrace-$tag.txt 2>&1; echo trace $tag rc=$?
done
rm -f $O/build.log; pack
python3 - $O <<'PY'
import json, glob, re, sys
for f in sorted(glob.glob(sys.argv[1] + '/time-*.json')):
    for x in json.load(open(f))['results']:
        s = x['shape']
        print('%-8s %5dx%-5d M %2d impl %d %8.2f us wrong %d  %s' % (f.split('time-')[1][:-5], s['N'], s['K'], s['M'], x['impl_id'], x['time_us'], x['wrong'], x.get('plan', '')))
PY
python3 bench/probe/gtrace_summary.py $O/gtrace-*.txt | tee $O/summary.txt
