#!/bin/bash
# Session 24 (one H200, commit d7bbbe6; its kernels are fe80fc1's — the commits after it change comments, docs and the order of
# two device functions in a header, compiled on the CPU machine): the closing GPU run at the final kernels — the install
# check and the whole C suite, quick, on the local transport (P = 1..4). Device time was short: no nccl suite, no bench.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-d7bbbe6}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
BUILD=build tests/install/check.sh > $O/install.txt 2>&1; echo install rc=$?
pack
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-local.txt 2>&1; echo local rc=$?
cp -r build/tests/logs $O/; rm -f $O/build.log; pack
tail -n 2 $O/install.txt; tail -n 3 $O/tests-local.txt
