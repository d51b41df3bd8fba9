#!/bin/bash
# Session 24 (one H200, commit fe80fc1): (1) the TMA kernel's PDL prefetch as TMA tensor prefetches of the ring's first W
# boxes by the producer thread (GroupTma::prefetch_w; every block) instead of prefetch_tile's 16 rows by threads 0..15,
# which delayed the owners' rank view ~3 us (run 1f6beb9-pdlknobs); (2) a pair's helper stores its fragments straight
# into the owner's pair buffer (GroupTma::run's to_owner; no out in its own smem, no pair_put). The gemv tests (local
# P = 1..4, quick); fco-bench gemv_allreduce (P = 1 K sweep at M 64, P = 2 at M 48 / 64, graphs, JSON); the same with
# 8e2c19f's gemv_allreduce.o relinked (build/obj/old: A/B in one run); then fe80fc1 with -DFCO_GEMV_TRACE.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-fe80fc1}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
cp -a build/obj/src/cuda/gemv_allreduce.o /tmp/new.o
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-local.txt 2>&1; echo tests rc=$?
cp -r build/tests/logs $O/; pack
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1,3 -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
SW="8192x2048,8192x4096,8192x8192,8192x16384,8192x28672,4096x14336,16384x16384"
P2="8192x8192,4096x14336,8192x28672,16384x16384"
b sweep 1 "$SW" 64
b shapes 2 "$P2" "48,64"
pack
relink() { cp "$1" build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o && make -j16 NCCL_HOME=$NCCL_HOME >> $O/build.log 2>&1 || { echo relink failed; tail -5 $O/build.log; }; }
relink build/obj/old/gemv_allreduce.o
b sweep-old 1 "$SW" 64
b shapes-old 2 "$P2" "48,64"
relink /tmp/new.o
b sweep-new2 1 "$SW" 64
pack
relink build/obj/trace/gemv_allreduce.o
for nk in 8192x2048 8192x8192; do
  FCO_BENCH_GEMV_NK=$nk FCO_BENCH_GEMV_M=64 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -n 20 -w 2 -R 1 -D 1 > $O/gtrace-$nk.txt 2>&1; echo trace $nk rc=$?
done
rm -f $O/build.log; pack
tail -n 4 $O/tests-local.txt
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-150; done
for f in $O/gtrace-*; do echo "== $(basename $f)"; grep gtrace $f | tail -2 | sed 's/.*view/view/' | cut -c1-120; done
