#!/bin/bash
# Session 25 (one H200), the session's last run: the launcher lowers an automatic split to the largest whose clusters fit
# (run 4ee3277-cluster: 32 clusters of 4 / 40 of 3 did not fit; pairs beat the wider split through the split area there);
# the plan names the split that did not fit. The gemv tests (local P = 1..4 and nccl P = 1, quick); fco-bench
# gemv_allreduce P = 1 (M 48 / 64) at the shapes of that run, with this build and the session's starting object relinked
# (285f0a8 = fe80fc1's kernels, build/obj/old,
# A/B in one run), P = 2 (local) M 64 at 2048×8192 (16 groups a rank: was split 4 through the split area), 4096×14336;
# pytest -m gpu (torch operators and Triton) last.
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
P2="2048x8192,4096x14336"
b rule 1 "$SP" "48,64"
b p2 2 "$P2" "48,64"
pack
relink() { cp "$1" build/obj/src/cuda/gemv_allreduce.o && touch build/obj/src/cuda/gemv_allreduce.o && make -j16 NCCL_HOME=$NCCL_HOME >> $O/build.log 2>&1 || { echo relink failed; tail -5 $O/build.log; }; }
relink build/obj/old/gemv_allreduce.o
b old 1 "$SP" "48,64"
b p2-old 2 "$P2" "48,64"
relink /tmp/new.o
pack
(export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so; timeout 330 python3 -m pytest tests/python -m gpu -q -p no:cacheprovider -rs > $O/pytest.txt 2>&1; echo pytest rc=$?)
rm -f $O/build.log; pack
tail -n 3 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt
tail -n 4 $O/pytest.txt
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-110; done
python3 - $O <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + '/gemv-g*-rule.json') + glob.glob(sys.argv[1] + '/gemv-g2-p2.json')):
    d = json.load(open(f))
    for r in d['results']:
        if 'impl 1' in r.get('plan', ''): print(os.path.basename(f), r['plan'].split('tma ')[-1][:100])
PY
