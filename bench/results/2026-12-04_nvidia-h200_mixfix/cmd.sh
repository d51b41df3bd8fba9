#!/bin/bash
# Session 41 (one H200): the fused lean kernel's default tile order read FCO_EA_LEAN_MIX as a 0 / 1 flag
# (d324e11), so MIX = 2..100 was warned about and ignored (claimed order); fixed to "static where MIX > 0", and
# test_embedding_alltoall's knob table now checks fco_last_plan ("static mix=100", "static mix=37", ...).
# (1) the test against 3a81dfb's fused object (build-old/eafl_base.o, linked into /tmp/lib-old): must FAIL on
# the mix entry; (2) tests/gpu/run.sh's C suites at this tree (FCO_GPU_PREBUILT=1, no bench, no pytest): the
# kernel checks and every C test on local (P = 1..4) and nccl (one rank), session 40's pending
# test_embedding_alltoall_bad case C among them. build/obj carried as build/carry.tgz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=$OUT/o; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
E=build/obj/src/cuda/embedding_alltoall_fused_lean.o
cp $E /tmp/fl_new.o
mkdir -p /tmp/lib-old
cp build-old/eafl_base.o $E; touch $E
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { echo "link old failed"; tail -5 $O/build.log; }
cp build/lib/libfco.so /tmp/lib-old/
cp /tmp/fl_new.o $E; touch $E
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
el builds
LD_LIBRARY_PATH=/tmp/lib-old FCO_TRANSPORT=nccl timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-nccl-oldlib.log 2>&1
el "test_embedding_alltoall nccl, 3a81dfb's fused object: rc=$? (expected 1)"; grep -E "FAIL|lacks|PASS|warn|MIX" $O/test-ea-nccl-oldlib.log | head -6
FCO_GPU_PREBUILT=1 FCO_GPU_BENCH=0 FCO_GPU_PYTEST=0 FCO_GPU_TORCH=0 FCO_GPU_BUDGET=420 OUT=$O/suite bash tests/gpu/run.sh > $O/suite.txt 2>&1
el "tests/gpu/run.sh rc=$?"; tail -25 $O/suite.txt
grep -h "MIX" $O/suite/tests-*.log | head -3
