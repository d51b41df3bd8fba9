#!/bin/bash
# Session 37 (one H200): impl 0's batched GEMM at K 14336 with 384-512 rows an expert — the per-rank GEMMs of the
# 1024- and 1536-token Mixtral workloads at P = 2, where nccl's AUTO runs chunks (impl 2): does the batched impl 0 now
# beat chunks? fco-bench gemm_alltoall at P = 1 and local P = 2, bf16, graphs, -R 4, impl 0 / chunks / AUTO, batched
# (default) then FCO_GA_BLAS=loop. Then the wrapper-cost probe (gemm_alltoall's wrapper after 4c6d122, not re-timed).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for g in 1 2; do
  [ $g = 1 ] && S="1024,14336,4096,8,2;1536,14336,4096,8,2;2048,14336,4096,8,2" || S="1024,14336,4096,8,2;512,14336,4096,8,2"
  for blas in batched loop; do
    FCO_GA_BLAS=$blas FCO_BENCH_GA_SHAPES="$S" timeout 120 build/bin/fco-bench gemm_alltoall -t local -g $g -d bf16 -D chunks,auto -G 1 -R 4 -n 10 -w 3 \
      -J $O/ga-$blas-local$g.json > $O/ga-$blas-local$g.txt 2> $O/ga-$blas-local$g.err; echo "$blas P=$g rc=$?"
    pack
  done
done
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
timeout 150 torchrun --nproc-per-node 1 --standalone bench/probe/wrapper_cost_probe.py > $O/wrapper_cost.txt 2>&1; echo "probe rc=$?"
pack
for f in $O/ga-*.txt; do echo "== $(basename $f)"; grep -v "^#  " $f | grep "^ \|^# tok\|wrong" | cut -c1-150; done
grep -v "^W12\|^\*\*\*" $O/wrapper_cost.txt | cut -c1-140 | head -40
