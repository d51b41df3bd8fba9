#!/bin/bash
# Session 24 (one H200, commit 1f6beb9; kernels of 8e2c19f): the owner blocks' late rank view (runs 5913396-prime,
# 8e2c19f-evict: 3.7-4.5 us from the kernel's start against the helpers' 1.5-2.1). Owners, not helpers, run the PDL
# prologue's L2 prefetch of W (FCO_GEMV_PDL_PREFETCH, 32 KB a block). fco-bench gemv_allreduce (graphs, -R 3) at P = 1,
# M 64 (K sweep at N = 8192) and P = 2, M 64, with the defaults, FCO_GEMV_PDL_PREFETCH=0 and FCO_GEMV_PDL=0 side by
# side; then the FCO_GEMV_TRACE build (build/obj/trace, 8e2c19f) with the same three settings.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-1f6beb9}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1 -R 3 -G 1 > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
SW="8192x2048,8192x4096,8192x8192,8192x28672,4096x14336,16384x16384"
b default 1 "$SW" 64
b nopf 1 "$SW" 64 FCO_GEMV_PDL_PREFETCH=0
b nopdl 1 "$SW" 64 FCO_GEMV_PDL=0
b default-again 1 "$SW" 64
b default 2 "8192x8192,4096x14336,8192x28672" 64
b nopf 2 "8192x8192,4096x14336,8192x28672" 64 FCO_GEMV_PDL_PREFETCH=0
b nopdl 2 "8192x8192,4096x14336,8192x28672" 64 FCO_GEMV_PDL=0
pack
cp build/obj/trace/gemv_allreduce.o build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o && make -j16 NCCL_HOME=$NCCL_HOME >> $O/build.log 2>&1 || echo relink failed
tr() { local tag=$1; shift; for nk in 8192x2048 8192x8192; do
  env "$@" FCO_BENCH_GEMV_NK=$nk FCO_BENCH_GEMV_M=64 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -n 20 -w 2 -R 1 -D 1 > $O/gtrace-$nk-$tag.txt 2>&1; echo trace $nk $tag rc=$?
done; }
tr default
tr nopf FCO_GEMV_PDL_PREFETCH=0
tr nopdl FCO_GEMV_PDL=0
rm -f $O/build.log; pack
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-100; done
for f in $O/gtrace-*; do echo "== $(basename $f)"; grep gtrace $f | tail -2 | cut -c60-230; done
