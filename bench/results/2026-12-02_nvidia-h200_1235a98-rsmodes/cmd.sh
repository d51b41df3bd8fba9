#!/bin/bash
# Session 21 runs 2-3 (1 H200, commit 1235a98; the SASS dump ran on 4790d7f's build, same kernel):
# the RS tile's SASS around the slab loop, then gemv_rs_probe with the timing-only modes
# xfix (x staged once: no st.shared / fence.proxy.async in the loop) and xfix-nobar (no block
# barrier either).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
F='_Z9rs_kernelILi2ELi2ELi4EEvPK13__nv_bfloat16S2_Pfiii'
/usr/local/cuda-13.0/bin/cuobjdump -sass -fun $F build/probe/gemv_rs_probe > $OUT/sass.txt 2>&1
timeout 200 build/probe/gemv_rs_probe 30 > $OUT/probe.txt 2>&1; echo rc $?; cat $OUT/probe.txt
