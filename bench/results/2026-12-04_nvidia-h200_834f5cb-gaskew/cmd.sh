#!/bin/bash
# Session 36 (one H200): gemm_alltoall's multi-rank AUTO rule (tiles where K <= 2048; on local above two ranks only
# where a_rows <= 2048) against skewed routing, which its comment lists as unmeasured at K 2048: fco-bench on the
# local transport (P = 2 and 4 virtual ranks), bf16, every impl and AUTO, graphs, -R 4, hints passed; skew =
# expert 0's rows / the mean. Shapes: examples/moe_layer.py's (2048 tokens, K 1408, N 2048, 16 experts, top-2),
# the fine-grained one (512, 2048, 7168, 32, top-8), 1024 tokens at K 2048 / N 4096, and K 14336 for contrast.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
S="2048,1408,2048,16,2;2048,1408,2048,16,2,2;2048,1408,2048,16,2,4;512,2048,7168,32,8,2;512,2048,7168,32,8,4"
S="$S;1024,2048,4096,8,2;1024,2048,4096,8,2,2;1024,2048,4096,8,2,4;1024,14336,4096,8,2,2"
for g in 2 4; do
  FCO_BENCH_GA_SHAPES="$S" timeout 250 build/bin/fco-bench gemm_alltoall -t local -g $g -d bf16 -D all -G 1 -R 4 -n 10 -w 3 \
    -J $O/ga-local$g.json > $O/ga-local$g.txt 2> $O/ga-local$g.err; echo "P=$g rc=$?"
  pack
done
for g in 2 4; do echo "== local P=$g"; grep -v "^#  " $O/ga-local$g.txt | grep "^ \|^# tok\|wrong" | cut -c1-160; done
