#!/bin/bash
# Session 36 (one H200): gemm_alltoall's AUTO rule at one rank (tiles when every expert has <= 256 rows, from
# counts_host) against skew. examples/moe_layer.py at one rank (2048 tokens, K 1408, N 2048, 16 experts, top-2:
# mean 256 rows, random routing puts ~300 on the largest) got impl 0, 266 us eager against tiles' 79 (run
# ..._d9de2c3-examples). impl 0 / tiles at P = 1 (nccl, bf16, hints passed) for mean 128..512 rows and skew 1..4,
# eager (-G 0) and graphs (-G 1).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
S="2048,1408,2048,16,2;2048,1408,2048,16,2,1.25;2048,1408,2048,16,2,1.5;2048,1408,2048,16,2,2;2048,1408,2048,16,2,4"
S="$S;1024,14336,4096,8,2;1024,14336,4096,8,2,1.25;1024,14336,4096,8,2,2"
S="$S;512,2048,7168,32,8,2;512,2048,7168,32,8,3;512,2048,7168,32,8,4"
S="$S;1536,2048,4096,8,2;1536,14336,4096,8,2;2048,1408,2048,16,4;2048,1408,2048,16,4,1.25"
for g in 0 1; do
  FCO_BENCH_GA_SHAPES="$S" timeout 250 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -d bf16 -D 0,1 -G $g -R 4 -n 20 -w 5 \
    -J $O/ga-G$g.json > $O/ga-G$g.txt 2> $O/ga-G$g.err; echo "G$g rc=$?"
  pack
done
for g in 0 1; do echo "== -G $g"; grep -v "^#  " $O/ga-G$g.txt | cut -c1-150; done
