"""gemm_alltoall.py — TODO (issue 6): fco::gemm_alltoall, NOT registered yet.

Waits for fco_gemm_alltoall in include/fco.h (src/ops/gemm_alltoall.c). When it lands, this
file follows allreduce.py:
  - _lib.bind("fco_gemm_alltoall", [...]) with the header's argument list;
  - @torch.library.custom_op("fco::gemm_alltoall", mutates_args=()): the MoE expert
    down-projection + combine: rows of this rank's experts' activations times their weights,
    each row sent back to the rank it came from (split sizes per rank as a tensor or a list of
    ints, as all_to_all_single's output_split_sizes / input_split_sizes);
  - fake impl: output rows = sum of the receive splits (data-dependent sizes must be passed in,
    not computed from data, so torch.compile can trace it);
  - autograd: reverse all-to-all of grad_out, then the GEMM gradients (grad_h = grad @ W,
    grad_W = grad.T @ h per expert), unfused is fine;
  - wrapper fco.gemm_alltoall(h, w, send_splits, recv_splits, group=None, impl="auto");
  - tests/python/test_gemm_alltoall.py against torch (per-expert matmul + all_to_all_single).
"""
