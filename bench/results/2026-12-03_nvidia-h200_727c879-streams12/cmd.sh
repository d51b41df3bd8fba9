#!/bin/bash
# Session 34 (one H200): test_streams' new part (impl 2 on 12 fresh streams at once, past the 8 push streams a
# thread keeps, and captured on one more) on local and nccl; test_gemm_alltoall (quick, local P 1..4: its graph
# part now refills A through the fixture's ga_refill_a); bench/gemm_alltoall_torch.py --nproc 1 (the floor's rate:
# the probe's, or the row's gemm column's where higher).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 120 build/tests/test_streams > $O/streams-$tr.txt 2>&1; echo "test_streams $tr rc=$?"
done
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 150 tests/run.sh test_gemm_alltoall > $O/suite-local.txt 2>&1; echo local rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so timeout 120 python3 bench/gemm_alltoall_torch.py --nproc 1 --fco none --iters 10 --warmup 3 > $O/torch.txt 2>&1; echo "torch rc=$?"
pack
for f in $O/streams-*.txt; do echo "== $f"; grep -v "^$" $f | tail -4; done
grep -h "^PASS\|^FAIL\|^#" $O/suite-local.txt; grep "rate\|^  " $O/torch.txt
