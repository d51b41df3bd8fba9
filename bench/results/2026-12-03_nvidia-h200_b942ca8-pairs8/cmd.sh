#!/bin/bash
# Session 29 (one H200): the launcher's group-size rule gives the tie of pairs of groups of 8 against unsplit groups of
# 4 to the pairs (impl 1, one rank a GPU: since the split finalise). (1) The grouped-tile tests (FCO_TEST_GROUP=only,
# quick, local P = 1..2; a new call at N 8192, M 64 hits the tie at P = 1) and the operator's test (local, quick).
# (2) fco-bench gemv_allreduce impl 0 / 1 at P = 1 on N 8192 (the per-GPU slices of 8192² and 8192x28672 at P = 2),
# M 48 / 64, the rule unset: the plans should say "kG=8 split=2 pair fin-split" and ", pairs)".
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_GROUP=only FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=2 timeout 150 build/tests/test_gemv_allreduce_kernels > $O/test-group-local.txt 2>&1; echo group tests local rc=$?
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 60 build/tests/test_gemv_allreduce > $O/test-op-local.txt 2>&1; echo op test local rc=$?
tail -n 3 $O/test-group-local.txt; grep -m5 -iE "fail|error|trap" $O/test-group-local.txt; pack
FCO_BENCH_GEMV_NK="8192x4096,8192x14336" FCO_BENCH_GEMV_M=48,64 timeout 60 build/bin/fco-bench gemv_allreduce -t local -g 1 -d bf16 -D 0,1 -R 3 -G 1 -J $O/gemv-rule.json > $O/gemv-rule.txt 2>&1; echo bench rc=$?
rm -f $O/build.log; pack
grep -E "^ +[0-9]" $O/gemv-rule.txt | cut -c1-110
python3 -c "
import json,sys; d=json.load(open('$O/gemv-rule.json'))
for x in d['results']:
    if x['impl_id'] == 1: print(x['shape']['N'], x['shape']['K'], x['shape']['M'], x['time_us'], x['plan'][x['plan'].find('kG='):])"
