#!/bin/bash
# Session 14 run 2 (1 H200, commit 92d7f1b): gemv_group_probe with tmawk (wide groups + split K) and
# the cluster variants on co-resident clusters. Binary built on the CPU machine with the probe's
# header command (carry build/probe).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/o
nvidia-smi -L > /tmp/o/meta.txt
timeout 300 build/probe/gemv_group_probe 30 > /tmp/o/probe.txt 2>&1; echo "probe rc $?"
tar czf $OUT/out.tgz -C /tmp/o .
cat /tmp/o/probe.txt
