#!/bin/bash
# Call 3 (one GPU, warm): mutants of session 63's capture fixes, rebuilt on the device from the
# carried objects; each must make tests/test_streams fail on local. Run from the repo root.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_TEST_QUICK=1
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])'); mkdir -p $OUT
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
cp src/cuda/blas.cu /tmp/b.cu; cp src/cuda/gemm_alltoall.cu /tmp/g.cu
sed -i 's/RelaxedCapture relaxed;/(void)0;/' src/cuda/blas.cu src/cuda/gemm_alltoall.cu
make -j16 NCCL_HOME="$NCCL_HOME" > $OUT/mA.log 2>&1
FCO_TRANSPORT=local timeout 120 build/tests/test_streams > $OUT/mA-local.txt 2>&1
echo "mutant A (no relaxed) local rc=$?"; tail -n 4 $OUT/mA-local.txt
cp /tmp/b.cu src/cuda/blas.cu; cp /tmp/g.cu src/cuda/gemm_alltoall.cu
sed -i 's/join_back{res, side, st, true}/join_back{res, side, st, false}/' src/cuda/gemm_alltoall.cu
make -j16 NCCL_HOME="$NCCL_HOME" > $OUT/mB.log 2>&1
FCO_TRANSPORT=local timeout 120 build/tests/test_streams > $OUT/mB-local.txt 2>&1
echo "mutant B (no JoinBack) local rc=$?"; tail -n 4 $OUT/mB-local.txt
cp /tmp/g.cu src/cuda/gemm_alltoall.cu
python3 - <<'PY'
p='src/transport/local.c'; s=open(p).read()
s=s.replace("if (num_others > 0 && cudaEventRecord(w->join, s0) == cudaSuccess)","if (0)",1); open(p,'w').write(s)
PY
make -j16 NCCL_HOME="$NCCL_HOME" > $OUT/mC.log 2>&1
FCO_TRANSPORT=local timeout 120 build/tests/test_streams > $OUT/mC-local.txt 2>&1
echo "mutant C (no local back-join) local rc=$?"; tail -n 4 $OUT/mC-local.txt
