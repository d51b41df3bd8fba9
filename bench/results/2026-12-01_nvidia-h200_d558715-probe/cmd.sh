#!/bin/bash
# Session 16 run 1 (one H200, commit d558715): ga_grouped_probe (per-expert cuBLAS vs grouped);
# gemm at one rank, tiles vs impl 0 over tokens x K (the one-rank AUTO rule); gemm P = 1 on the
# standard workloads with -R 4 (fco-bench's balanced column order, AUTO beside its impl).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=d558715
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
mkdir -p build/probe && nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude bench/probe/ga_grouped_probe.cu -lcublas -o build/probe/ga_grouped_probe >> $O/build.log 2>&1
el build done
timeout 120 build/probe/ga_grouped_probe 20 > $O/probe.txt 2>&1; echo rc=$?; cat $O/probe.txt
pack
S=""
for t in 256 512 1024 2048 4096; do for k in 2048 4096 8192 14336; do S="$S$t,$k,4096,8,2;"; done; done
for t in 128 256 512 1024 2048; do S="$S$t,2048,7168,32,8;"; done
el "gemm P=1 sweep"; FCO_BENCH_GA_SHAPES="${S%;}" timeout 200 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 10 -w 2 -R 2 -J $O/ga-sweep.json > $O/ga-sweep.txt 2>&1; echo rc=$?
pack
el "gemm P=1 standard, -R 4"; FCO_BENCH_PROGRESS=1 timeout 150 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -G 1 -d bf16 -n 10 -w 2 -R 4 -J $O/ga-p1.json > $O/ga-p1.txt 2> $O/ga-p1.err; echo rc=$?
pack
for f in ga-sweep ga-p1; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|^# +[tB]|auto ran' $O/$f.txt | cut -c1-200; done
el all done
