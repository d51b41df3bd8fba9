#!/bin/bash
# Session 56's last changes on a GPU (any one GPU, ~3 min warm): the whole local C suite (quick)
# at the commit — 94f4e30 (gemv LL waits past the epoch-limit record), 0ba7d3d (the capture
# query's device restore, gemm impl 0's barrier, the embedding sender's wait for the out offset,
# late_peer_rounds' forced path, test_device_keep's gemm group), ce61c83 (test helpers) ran on no
# GPU — then the Triton GPU tests of the epoch-limit change (pytest -m gpu -k "triton and not
# test_gemm_tma").
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
FCO_LIB=$PWD/build/lib/libfco.so timeout 240 python3 -m pytest tests/python -q -m gpu \
  -k "triton and not test_gemm_tma" -p no:cacheprovider > $O/pytest.txt 2>&1
echo "pytest rc=$?"
cp -r build/tests/logs $O/test-logs 2>/dev/null
tar czf $OUT/out.tgz -C $O .
grep -v "^PASS" $O/tests.txt | tail -20; tail -3 $O/pytest.txt
