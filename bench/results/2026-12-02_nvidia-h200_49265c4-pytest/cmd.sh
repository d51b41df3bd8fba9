#!/bin/bash
# Session 27 (one H200): pytest -m gpu (quick) in one call with the session's library (impl 2 on the grouped tiles,
# local AUTO at M 33..64): the torch operators, torch.compile, the Triton kernels on the GPU. Session 26's call stopped
# at its 200 s timeout after 41 of 59.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
(export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so FCO_TEST_QUICK=1; timeout 520 python3 -m pytest tests/python -m gpu -q -p no:cacheprovider -rs --durations=15 > $O/pytest.txt 2>&1; echo pytest rc=$?)
rm -f $O/build.log; pack
tail -n 25 $O/pytest.txt
