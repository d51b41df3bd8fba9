#!/bin/bash
# Session 25 (one H200): the TMA tile's groups split in 3 and 4 as clusters of 3 / 4 blocks, the helpers' slices
# handed over in the owner's finished ring (GroupTma::hand_buf) instead of the split area + flag + L2 reads (on by
# default with FCO_GEMV_SPLIT_PAIR; =0: the split area). The gemv tests (local P = 1..4 and nccl P = 1, quick);
# fco-bench gemv_allreduce P = 1 at the N where the split is 3 or 4 (M 48 / 64): clusters, FCO_GEMV_SPLIT_PAIR=0 and
# FCO_GEMV_SPLIT=2 in this build, and the session's starting gemv_allreduce.o relinked (build/obj/old: A/B in one
# run; and build/obj/swz: the same source with -DFCO_GEMV_OUT_SWZ, out's float4s swizzled); P = 2 (local) M 64 at the issue's shapes (pairs: unchanged path); pytest -m gpu (torch operators and Triton);
# then the FCO_GEMV_TRACE build (make gemv-trace) relinked: blocks 0 / 1's timeline with clusters and the split area.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
cp -a build/obj/src/cuda/gemv_allreduce.o /tmp/new.o
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-local.txt 2>&1; echo tests local rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-nccl.txt 2>&1; echo tests nccl rc=$?
cp -r build/tests/logs $O/; pack
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1 -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
SP="4096x14336,4096x7168,5120x8192,2048x8192,8192x8192"
P2="8192x8192,4096x14336,8192x28672,16384x16384"
b cluster 1 "$SP" "48,64"
b area 1 "$SP" "48,64" FCO_GEMV_SPLIT_PAIR=0
b split2 1 "$SP" "48,64" FCO_GEMV_SPLIT=2
b p2 2 "$P2" 64
pack
relink() { cp "$1" build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o && make -j16 NCCL_HOME=$NCCL_HOME >> $O/build.log 2>&1 || { echo relink failed; tail -5 $O/build.log; }; }
relink build/obj/old/gemv_allreduce.o
b old 1 "$SP" "48,64"
b p2-old 2 "$P2" 64
relink build/obj/swz/gemv_allreduce.o
b swz 1 "$SP" "48,64"
b p2-swz 2 "$P2" 64
relink /tmp/new.o
b cluster2 1 "$SP" "48,64"
pack
relink build/obj/trace/gemv_allreduce.o
tr() { local tag=$1 nk=$2; shift 2; env "$@" FCO_BENCH_GEMV_NK=$nk FCO_BENCH_GEMV_M=64 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -G 1 -d bf16 -n 20 -w 2 -R 1 -D 1 > $O/gtrace-$tag-$nk.txt 2>&1; echo trace $tag $nk rc=$?; }
tr cluster 4096x14336; tr area 4096x14336 FCO_GEMV_SPLIT_PAIR=0; tr pair 8192x8192
relink /tmp/new.o
(export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so; timeout 200 python3 -m pytest tests/python -m gpu -q -p no:cacheprovider > $O/pytest.txt 2>&1; echo pytest rc=$?)
rm -f $O/build.log; pack
tail -n 3 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt
tail -n 3 $O/pytest.txt
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-120; done
for f in $O/gtrace-*; do echo "== $(basename $f)"; grep gtrace $f | tail -2 | sed 's/.*view/view/' | cut -c1-120; done
python3 - $O <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + '/gemv-g1-*.json')):
    d = json.load(open(f))
    plans = sorted({r.get('plan', '') for r in d['results'] if 'impl 1' in r.get('plan', '')})
    print(os.path.basename(f), '|'.join(p.split('tma ')[-1][:40] for p in plans))
PY
