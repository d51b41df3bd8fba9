#!/bin/bash
# Session 40's leftover for one H200 (~60 s after the build; the device was not lent again):
# test_embedding_alltoall_bad with its new case — impl 0's lookup in the claimed order
# (FCO_EA_LOOKUP_DYN=1) on bad data — on local (P = 1..4) and nccl (one rank). build/obj carried as build/carry.tgz
# (`tar czf build/carry.tgz build/obj` after `make -j2 && make -j2 tests` and stripping). Copy into
# bench/results/<date>_nvidia-h200_<commit>/cmd.sh when it runs.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=/tmp/o; rm -rf $O; mkdir -p $O
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tests > $O/build.log 2>&1 || { tail -30 $O/build.log; tar czf $OUT/out.tgz -C $O .; exit 1; }
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 100 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-$tr.log 2>&1; echo "test_embedding_alltoall_bad $tr rc=$?"; tail -2 $O/test-ea-bad-$tr.log
done
tar czf $OUT/out.tgz -C $O .
