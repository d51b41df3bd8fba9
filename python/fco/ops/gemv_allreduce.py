"""gemv_allreduce.py — TODO (issue 6): fco::gemv_allreduce, NOT registered yet.

Waits for fco_gemv_allreduce in include/fco.h (src/ops/gemv_allreduce.c). When it lands, this
file follows allreduce.py exactly:
  - _lib.bind("fco_gemv_allreduce", [...]) with the header's argument list;
  - @torch.library.custom_op("fco::gemv_allreduce", mutates_args=()) over
    (x: Tensor [M, K_r], w: Tensor [N, K_r], bias: Optional[Tensor] [N], group_name: str,
    impl: int) -> Tensor [M, N]: out = allreduce(x @ w.T) (+ bias once, not per rank) — the
    row-parallel linear of tensor-parallel decode; checks with _common.check_tensor per
    argument plus shape checks (x.shape[1] == w.shape[1], M ≤ the C op's limit) in both the
    real and the fake impl;
  - fake impl: x.new_empty((x.shape[0], w.shape[0]));
  - autograd (row-parallel linear backward, unfused is fine): grad_x = grad_out @ w,
    grad_w = grad_out.T @ x, grad_bias = grad_out.sum(0) (grad_out is already the same on every
    rank; no collective in the backward);
  - wrapper fco.gemv_allreduce(x, w, bias=None, group=None, impl="auto") with a docstring,
    exported from fco/__init__.py; import it in fco/ops/__init__.py;
  - tests/python/test_gemv_allreduce.py against torch: dist.all_reduce(x @ w.T) (+ bias),
    gradients against torch.autograd on the plain-torch version, compile and bad input.
"""
