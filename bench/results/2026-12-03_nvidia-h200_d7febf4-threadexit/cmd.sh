#!/bin/bash
# Session 35 (one H200), commit d7febf4 (main + branch session34-thread-exit): a thread that ends gives impl 2's
# push streams and events back. test_streams on local and nccl; the same test against a leaky build of the same
# gemm_alltoall.cu (its ThreadRes destructor returns at once: build/oldga/, compiled on the dev machine, linked
# with the other objects of build/obj/src into /tmp/oldlib/libfco.so) must FAIL the threads_give_back part;
# then the quick local suite of the tests that run impl 2 (P 1..4) and nccl P = 1.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj build/oldga -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
mkdir -p /tmp/oldlib
g++ -shared -o /tmp/oldlib/libfco.so $(find build/obj/src -name '*.o' ! -path '*/cuda/gemm_alltoall.o') build/oldga/gemm_alltoall.o \
  -L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt -L$NCCL_HOME/lib -l:libnccl.so.2 -lpthread -lrt -lm > $O/oldlib.txt 2>&1; echo "leaky lib link rc=$?"
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 120 build/tests/test_streams > $O/streams-$tr.txt 2>&1; echo "test_streams $tr rc=$?"
  LD_LIBRARY_PATH=/tmp/oldlib:$NCCL_HOME/lib FCO_TRANSPORT=$tr timeout 120 build/tests/test_streams > $O/streams-leaky-$tr.txt 2>&1
  echo "test_streams against the leaky build, $tr rc=$? (want nonzero)"
  LD_LIBRARY_PATH=/tmp/oldlib:$NCCL_HOME/lib ldd build/tests/test_streams | grep fco >> $O/oldlib.txt
done
pack
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 TEST_TIMEOUT=150 timeout 250 tests/run.sh \
  test_gemm_alltoall test_gemm_alltoall_checks test_mixed_ops test_streams > $O/suite-local.txt 2>&1; echo local rc=$?
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 TEST_TIMEOUT=100 timeout 150 tests/run.sh test_gemm_alltoall test_mixed_ops test_streams > $O/suite-nccl.txt 2>&1; echo nccl rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
for f in $O/streams-*.txt; do echo "== $f"; grep -v "^$" $f | tail -4; done
cat $O/oldlib.txt | tail -3
grep -h "^PASS\|^FAIL\|^#" $O/suite-*.txt
