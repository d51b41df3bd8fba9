#!/bin/bash
# Session 14 run 8 (1 H200, commit 155b90c): gemv_group_probe (launches timed back to back) with its
# 17-valued inputs and with FCO_PROBE_RANDOM=1 (fco-bench-like random bf16): does the grouped
# tile's time (probe 40 µs, the operator's kernel 50–53 at 64×8192×8192) depend on the data?
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/o
timeout 250 build/probe/gemv_group_probe 20 > /tmp/o/probe.txt 2>&1; echo "probe rc $?"
FCO_PROBE_RANDOM=1 timeout 250 build/probe/gemv_group_probe 20 > /tmp/o/probe-random.txt 2>&1; echo "probe random rc $?"
tar czf $OUT/out.tgz -C /tmp/o .
paste <(grep -E "^ +[0-9]" /tmp/o/probe.txt | cut -c1-60) <(grep -E "^ +[0-9]" /tmp/o/probe-random.txt | awk '{print $(NF-3)}')
