#!/bin/bash
# Session 20 run 5 (one H200): gemm_alltoall's AUTO-vs-chunks gap looked for with CUDA graphs
# (the two-GPU runs that show it use graphs; run 1 was eager): local P = 2, bf16, the skewed
# and balanced 1024-token workloads, FCO_GEMM_A2A_AUTO=2 (AUTO runs impl 2): (a) both columns in
# one invocation, -R 4 (rounds alternate their order); (b) impl 0 + one of them per invocation,
# twice each (neither follows the other).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=7833a8e
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o5; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
export FCO_GEMM_A2A_AUTO=2
B="build/bin/fco-bench gemm_alltoall -t local -g 2 -d bf16 -G 1 -n 10 -w 2"
for s in "1024,14336,4096,8,2,4" "1024,14336,4096,8,2"; do
  echo "## $s both -R 4" >> $O/ga.txt; FCO_BENCH_GA_SHAPES="$s" timeout 90 $B -R 4 -D 2,auto >> $O/ga.txt 2>&1
  for D in 0,2 0,auto 0,2 0,auto; do
    echo "## $s -D $D -R 2" >> $O/ga.txt; FCO_BENCH_GA_SHAPES="$s" timeout 60 $B -R 2 -D $D >> $O/ga.txt 2>&1
  done
  pack
done
el done
grep -E "^## |^ +[0-9]" $O/ga.txt
