#!/bin/bash
# Session 57's changes on one GPU (~8 min with a cold start): the whole local C suite (quick) at
# the commit — gemm impls 1 / 2 staging for a sender that freed a slot (FCO_GA_H_HELD,
# test_gemm_alltoall_freed), the embedding lean kernel's per-call direct word (R2,
# test_embedding_alltoall_direct b2b), the tiles test's plan assertions, the local path's shared
# check_receivers — then the Triton GPU tests (the gemm header word in fco.triton).
# Carry: `make -j2 && bash bench/results/pending/make_carry.sh` (no recompile on the device).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o1; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
make -j16 NCCL_HOME="$NCCL_HOME" > $O/build.log 2>&1
echo "make rc=$? ($(grep -c nvcc $O/build.log) nvcc lines)"
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=160 FCO_TEST_QUICK=1 tests/run.sh > $O/tests.txt 2>&1
echo "tests rc=$?"
FCO_LIB=$PWD/build/lib/libfco.so timeout 330 python3 -m pytest tests/python -q -m gpu \
  -k "triton and not test_gemm_tma" -p no:cacheprovider --durations=5 > $O/pytest.txt 2>&1
echo "pytest rc=$?"
cp -r build/tests/logs $O/test-logs 2>/dev/null
tar czf $OUT/out.tgz -C $O .
grep -v "^PASS" $O/tests.txt | tail -20; tail -8 $O/pytest.txt
