#!/bin/bash
# Session 33 (one H200): test_mixed_ops (new: random sequences of all four operators back to back, no sync between calls, and rounds captured in one CUDA graph;
# calls, every output checked) on local P = 1..8 (full: 12 rounds a world) and on nccl (P = 1), twice each with
# fresh seeds; then fco-bench's --help on the GPU build.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for i in 1 2; do
  FCO_TRANSPORT=local FCO_TEST_MAX_RANKS=8 timeout 200 build/tests/test_mixed_ops > $O/mixed-local8-$i.txt 2>&1; echo "local P 1..8 run $i rc=$?"
  FCO_TRANSPORT=nccl timeout 60 build/tests/test_mixed_ops > $O/mixed-nccl-$i.txt 2>&1; echo "nccl run $i rc=$?"
  pack
done
build/bin/fco-bench --help > $O/bench-help.txt 2>&1; echo "fco-bench --help rc=$?"
pack
grep -h "seed\|P=\|PASS\|FAIL\|^[agem ] " $O/mixed-*.txt | head -60
