#!/bin/bash
# Session 58, third call (~6 min cold): ab.sh found HEAD's (2dd1701) embedding fused kernel 3 %
# slower than 036513a's, with symmetric and ordinary outs alike (59d4cef = 036513a: session 57's
# direct word cost nothing). 2dd1701 added a failure mask and a fault flag to the block's shared
# LeanBlk and a lambda in lean_signal; the fix under test keeps LeanBlk as it was (bit 31 of
# sent[k], bit 1 of cap). Builds 036513a (lib + fco-bench) and the tree under test (everything,
# tests too) on the device, runs test_embedding_alltoall_direct on local (the fault part included), then the
# embedding A/B, the two alternating, two passes (device time: ~600 s left).
# Carry: build/src57.tgz, build/srcnew2.tgz (git archive <commit> Makefile include src tools tests).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o58c; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
mkdir -p /tmp/t57 /tmp/tnew2 && tar xzf build/src57.tgz -C /tmp/t57 && tar xzf build/srcnew2.tgz -C /tmp/tnew2
(cd /tmp/t57 && make -j6 NCCL_HOME="$NCCL_HOME" build/lib/libfco.so build/bin/fco-bench \
  > $O/build-57.log 2>&1; echo "make 57 rc=$?") &
(cd /tmp/tnew2 && make -j10 NCCL_HOME="$NCCL_HOME" > $O/build-new2.log 2>&1; echo "make new2 rc=$?") &
wait
(cd /tmp/tnew2 && FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=160 tests/run.sh \
  test_embedding_alltoall_direct > $O/tests.txt 2>&1; echo "tests rc=$?"
  cp build/tests/logs/local/test_embedding_alltoall_direct.log $O/ 2>/dev/null)
tail -n 3 $O/tests.txt
export FCO_BENCH_EA_WORKLOADS=1,5,6
for pass in 1 2; do
  for t in 57 new2; do
    for sym in 1 0; do
      FCO_BENCH_SYM=$sym /tmp/t$t/build/bin/fco-bench embedding_alltoall -t local -g 2 -d bf16 -D 1 \
        -G 1 -n 20 -w 3 > $O/ea-$t-sym$sym-$pass.txt 2>&1
      echo "ea-$t-sym$sym-$pass rc=$?"
    done
  done
done
tar czf $OUT/out.tgz -C $O .
for f in $O/ea-*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-112 | cut -c70-; done
