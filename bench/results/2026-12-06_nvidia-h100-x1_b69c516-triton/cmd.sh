#!/bin/bash
# Session 54, one GPU, one short call (~200 s with a cold start): the Triton GPU tests after the
# fco.triton host-side fixes (overlap refusals, the occupancy cache keyed on Triton's
# specialisation, argument checks). No run.sh (no kernel checks: the C library did not change
# since run c30417e-suite): build (the carried objects link), then pytest on a selection.
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
nvidia-smi --query-gpu=name --format=csv,noheader
make -j16 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so > $OUT/build.log 2>&1; echo "make rc=$?"
K="test_vs_reference_and_c or test_gemm_vs_reference_and_c or test_gemm_streamk_skew_class"
K="$K or test_gemm_1024_token_class or test_gemm_bad_counts or test_gemm_cuda_graph_replay"
K="$K or test_op_impl_triton_vs_torch or test_many_calls_alternate_halves"
FCO_LIB=$PWD/build/lib/libfco.so timeout 200 python3 -m pytest tests/python/test_triton_gpu.py \
  -m gpu -rs -q -p no:cacheprovider --durations=10 -k "$K" > $OUT/pytest.log 2>&1
echo "pytest rc=$?"
tail -15 $OUT/pytest.log
