#!/bin/bash
# Session 35 (one H200), commit fddc352: tests/test_leaks.c on local (P 1..4) and nccl (P = 1): worlds made, used by
# every operator, destroyed; fds, threads and device memory in use must not grow. The same test against a leaky
# build (src/transport/local.c whose free_ws never frees the workspace: build/oldga/local.o, compiled on the dev
# machine, linked with the other objects of build/obj/src into /tmp/oldlib/libfco.so) should fail on local.
# Then the whole C suite, quick, on local (P 1..4) and nccl (P = 1).
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
g++ -shared -o /tmp/oldlib/libfco.so $(find build/obj/src -name '*.o' ! -path '*/transport/local.o') build/oldga/local.o \
  -L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt -L$NCCL_HOME/lib -l:libnccl.so.2 -lpthread -lrt -lm > $O/oldlib.txt 2>&1; echo "leaky lib link rc=$?"
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_leaks > $O/leaks-$tr.txt 2>&1; echo "test_leaks $tr rc=$?"
done
LD_LIBRARY_PATH=/tmp/oldlib:$NCCL_HOME/lib FCO_TRANSPORT=local timeout 200 build/tests/test_leaks > $O/leaks-leaky-local.txt 2>&1
echo "test_leaks against the leaky local transport rc=$? (want nonzero)"
LD_LIBRARY_PATH=/tmp/oldlib:$NCCL_HOME/lib ldd build/tests/test_leaks | grep fco >> $O/oldlib.txt
pack
FCO_TRANSPORT=local FCO_TEST_QUICK=1 TEST_TIMEOUT=200 timeout 400 tests/run.sh > $O/suite-local.txt 2>&1; echo local rc=$?
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 TEST_TIMEOUT=100 timeout 150 tests/run.sh > $O/suite-nccl.txt 2>&1; echo nccl rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
for f in $O/leaks-*.txt; do echo "== $f"; grep -v "^$" $f | tail -9; done
tail -2 $O/oldlib.txt
grep -h "^FAIL\|^#" $O/suite-*.txt
