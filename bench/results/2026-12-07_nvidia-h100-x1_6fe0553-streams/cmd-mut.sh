#!/bin/bash
# Session 64 (one GPU), after pending/session63/cmd.sh: mutants of impl 2's failure paths and of
# the relaxed capture mode; each must make tests/test_streams fail on local P <= 2.
#  A: `RelaxedCapture relaxed;` removed (blas.cu, gemm_alltoall.cu; compiled here, seconds)
#  B: impl 2's JoinBack disarmed       (gemm_alltoall.o from build/mut.tgz: make_mut.sh)
#  C: local.c's back-join after a failed launch removed (compiled here)
#  D: `mid_call.on = true;` removed    (gemm_alltoall.o from build/mut.tgz): the failing world
#     must then not keep the error (test_streams' expect_kept fails)
# Carry: build/carry.tgz build/mut.tgz (make_carry.sh, make_mut.sh). Run: FCO_COMMIT=<commit> bash cmd-mut.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_TIMEOUT_MS=15000 FCO_TEST_QUICK=1
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o64m; mkdir -p $O; echo "commit ${FCO_COMMIT:-?}" > $O/commit.txt
pack() { tar czf $OUT/out.tgz -C $O .; }
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
tar xzf build/mut.tgz -C /tmp
mk() { make -j16 NCCL_HOME="$NCCL_HOME" >> $O/build-$1.log 2>&1 || echo "make $1 failed"; }
run() {
  FCO_TRANSPORT=local FCO_TEST_MAX_RANKS=2 timeout 150 build/tests/test_streams > $O/m$1.txt 2>&1
  echo "mutant $1 ($2): test_streams local rc=$? ${SECONDS}s (want != 0)"
  # which case failed decides: a mutant caught by another case's failure shows nothing
  grep -m4 -E "FAIL|fail|error|while:" $O/m$1.txt | cut -c1-300; pack
}
mk base
G=build/obj/src/cuda/gemm_alltoall.o; cp $G /tmp/g.o; cp src/transport/local.c /tmp/l.c
cp src/cuda/blas.cu /tmp/b.cu; cp src/cuda/gemm_alltoall.cu /tmp/g.cu
sed -i 's/RelaxedCapture relaxed;/(void)0;/' src/cuda/blas.cu src/cuda/gemm_alltoall.cu
mk A; run A "no relaxed capture mode"
cp /tmp/b.cu src/cuda/blas.cu; cp /tmp/g.cu src/cuda/gemm_alltoall.cu; mk A2
cp /tmp/mut/gemm_alltoall_B.o $G; touch $G; mk B; run B "JoinBack disarmed"
cp /tmp/g.o $G; touch $G
python3 - <<'PY'
p = 'src/transport/local.c'; s = open(p).read()
old = "if (num_others > 0 && cudaEventRecord(w->join, s0) == cudaSuccess)"
assert s.count(old) == 1; open(p, 'w').write(s.replace(old, "if (0)", 1))
PY
mk C; run C "no local back-join"
cp /tmp/l.c src/transport/local.c; mk C2
cp /tmp/mut/gemm_alltoall_D.o $G; touch $G; mk D; run D "mid_call.on removed"
cp /tmp/g.o $G; touch $G; mk end
FCO_TRANSPORT=local FCO_TEST_MAX_RANKS=2 timeout 150 build/tests/test_streams > $O/unmutated.txt 2>&1
echo "unmutated again: test_streams local rc=$? ${SECONDS}s (want 0)"; pack
