#!/bin/bash
# Session 35 (one H200), commit d324e11: the closing run — on/off knobs through fco_env_flag (0 / 1, others ignored and
# said once), test_mixed_ops' thread-per-rank rounds (cpu and nccl), test_group's local refusal of a partial call,
# fco.triton gemm_alltoall's resolve() in the launcher. The whole C suite, quick, on local (P 1..4) and nccl (P = 1);
# then the Triton GEMM + All-to-All GPU tests that launch through resolve() (pytest -m gpu, quick).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local FCO_TEST_QUICK=1 TEST_TIMEOUT=200 timeout 280 tests/run.sh > $O/suite-local.txt 2>&1; echo local rc=$?
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 TEST_TIMEOUT=100 timeout 160 tests/run.sh > $O/suite-nccl.txt 2>&1; echo nccl rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so FCO_TEST_QUICK=1 timeout 130 python3 -m pytest -q -m gpu \
  tests/python/test_triton_gpu.py -k "test_gemm_vs_reference_and_c or test_gemm_cuda_graph_replay_new_counts" \
  > $O/pytest-triton-gemm.txt 2>&1; echo pytest rc=$?
pack
grep -h "^FAIL\|^#" $O/suite-*.txt
tail -3 $O/pytest-triton-gemm.txt
grep -h "thread per rank\|on/off" $O/logs/*/test_mixed_ops.log $O/logs/*/test_config_env.log 2>/dev/null | head -12
