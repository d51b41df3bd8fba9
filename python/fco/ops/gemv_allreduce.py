"""gemv_allreduce.py — fco_gemv_allreduce as the torch op fco::gemv_allreduce (the row-parallel
linear of tensor-parallel decode), with a fake impl (torch.compile), autograd and the wrapper
fco.gemv_allreduce(x, w, bias=None, group=None, impl="auto").

C function (include/fco.h):
  fco_gemv_allreduce(comm, x, w, bias, y, M, N, K, dtype, impl, stream)
    y [M, N] = Σ_r x_r [M, K_r] · W_r^T [K_r, N] (+ bias once), M ≤ 64, fp32 accumulation
impls: 0 = cuBLAS + ncclAllReduce ("baseline"), 1 = fused one-shot, 2 = fused two-phase,
-1 = auto. M > 64 with impl "auto": addmm with the bias on group rank 0 (the rank whose bias
impls 0 and 3 add), matmul on the others, then fco_allreduce in place (the C op is a GEMV;
explicit impls return FCO_ERR_UNSUPPORTED there, naming the limit); that path has no check that
every rank has a bias or none (the C op's check; one more collective otherwise).
K_r = 0 on a rank: it calls the C op with x, w of zeros and K = 1 (the C op refuses K = 0).

Autograd (Megatron's RowParallelLinear, and DTensor's RowwiseParallel): what follows the op is
replicated (every rank computes the same loss from the same y), so dL/dy is the same on every
rank and the backward needs no collective:
  dx_r = dy · W_r      dW_r = dy^T · x_r      dbias = Σ_M dy   (every rank, identical)
This is NOT fco.allreduce's convention (torch.distributed.nn: the loss is the sum of the ranks'
losses, so the gradient is allreduced): a hand-written fco.allreduce(x @ w.T) gives gradients
P times these when the loss is replicated.
"""
import ctypes
from typing import Optional

import torch

from .. import _comm, _lib
from .._lib import FcoError
from . import _common
from . import allreduce as _allreduce

IMPL_TRITON = -2  # Python-only id (never passed to C): the Triton kernel of fco.triton
IMPLS = {"baseline": 0, "cublas_nccl": 0, "oneshot": 1, "twophase": 2, "cublas_oneshot": 3,
         "triton": IMPL_TRITON}
MAX_M = 64  # FCO_GEMV_ALLREDUCE_MAX_M
_OP = "fco.gemv_allreduce"
_c_fn = None


def _fn():
    global _c_fn
    if _c_fn is None:
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        _c_fn = _lib.bind("fco_gemv_allreduce", [_lib.comm_t, vp, vp, vp, vp, sz, sz, sz,
                                                 ctypes.c_int, ctypes.c_int, vp])
    return _c_fn


def _check(x, w, bias, op=_OP):
    """Everything that can be checked from the tensors alone (real and fake impl alike)."""
    dt = _common.check_tensor(x, op, "x")
    _common.check_tensor(w, op, "w")
    _common.check_like(w, x, op, "w", "x")
    if x.dim() < 1:
        raise _common.bad(op, "x is a 0-d tensor; expected [..., K]")
    if w.dim() != 2 or w.shape[1] != x.shape[-1]:
        raise _common.bad(op, f"w has shape {tuple(w.shape)}; expected [N, K] with K = "
                          f"x.shape[-1] = {x.shape[-1]} (x has shape {tuple(x.shape)})")
    if bias is not None:
        _common.check_tensor(bias, op, "bias")
        _common.check_like(bias, x, op, "bias", "x")
        if bias.dim() != 1 or bias.shape[0] != w.shape[0]:
            raise _common.bad(op, f"bias has shape {tuple(bias.shape)}; expected [N] = "
                              f"[{w.shape[0]}]")
    return dt


def _run(x, w, bias, dt, group_name, impl, out=None):
    N, K = w.shape
    _common.check_current_device(x, _OP, "x")
    shape = tuple(x.shape[:-1]) + (N,)
    if out is None:
        y = x.new_empty(shape)
    else:  # the caller's (a decode loop's buffer); libfco refuses one that overlaps x, w, bias
        _common.check_out(out, x, shape, _OP)
        y = out
    M = y.numel() // N if N else 0
    if M == 0 or N == 0:  # nothing to compute or reduce (the same on every rank)
        return y
    if K == 0:  # no features on this rank (K_r may differ): join the collective with zeros
        x, w, K = x.new_zeros(shape[:-1] + (1,)), w.new_zeros((N, 1)), 1
    if M > MAX_M and impl == _lib.IMPL_AUTO:  # a GEMM, not a GEMV: unfused
        if out is not None:  # refused as libfco refuses it at M <= 64 (matmul would misread x)
            _common.check_no_overlap(out, (x, w, bias), _OP, ("x", "w", "bias"))
        x2, y2 = x.reshape(M, K), y.view(M, N)
        if bias is not None and _comm.get(group_name, x.device).rank == 0:
            torch.addmm(bias, x2, w.t(), out=y2)  # rounded once (y += bias after: twice)
        else:
            torch.matmul(x2, w.t(), out=y2)
        _allreduce._launch(y, y, dt, group_name, _lib.IMPL_AUTO)
        return y
    if impl == IMPL_TRITON:  # fco.triton's one-shot kernel over the same communicator
        if x.device.type != "cuda":
            raise FcoError(_lib.UNSUPPORTED, f"{_OP}: impl 'triton' runs on CUDA tensors (nccl "
                           f"transport); x is on {x.device}: use another impl on the cpu transport")
        from ..triton.gemv_allreduce import gemv_allreduce_comm
        y2 = gemv_allreduce_comm(_comm.get(group_name, x.device), x.reshape(M, K), w, bias)
        return y2.reshape(shape) if out is None else out.copy_(y2.reshape(shape))
    h = _comm.get(group_name, x.device).handle
    r = _fn()(h, x.data_ptr(), w.data_ptr(), None if bias is None else bias.data_ptr(),
              y.data_ptr(), M, N, K, dt, impl, _common.stream_of(x))
    if r:
        _common.raise_last(r, h, "fco_gemv_allreduce")
    return y


@torch.library.custom_op("fco::gemv_allreduce", mutates_args=())
def _gemv_allreduce(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor],
                    group_name: str, impl: int) -> torch.Tensor:
    _common.raw_impl(impl, _OP, (IMPL_TRITON,))
    return _run(x, w, bias, _check(x, w, bias), group_name, impl)


@_gemv_allreduce.register_fake
def _gemv_allreduce_fake(x, w, bias, group_name, impl):
    _common.raw_impl(impl, _OP, (IMPL_TRITON,))
    _check(x, w, bias)
    return x.new_empty(tuple(x.shape[:-1]) + (w.shape[0],))


def _setup_context(ctx, inputs, output):
    x, w, bias, _, _ = inputs
    ctx.save_for_backward(x, w)
    ctx.has_bias = bias is not None


def _backward(ctx, dy):
    x, w = ctx.saved_tensors
    N, K = w.shape
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = dy @ w
    M = x.shape[:-1].numel()  # not reshape(-1, ...): ambiguous when K or N is 0
    dy2 = dy.reshape(M, N)
    if ctx.needs_input_grad[1]:
        dw = dy2.t() @ x.reshape(M, K)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = dy2.sum(0)
    return dx, dw, db, None, None


_gemv_allreduce.register_autograd(_backward, setup_context=_setup_context)


def gemv_allreduce(x, w, bias=None, group=None, impl="auto", out=None):
    """Row-parallel linear: y = Σ_r x_r @ w_r.T (+ bias) over the ranks of `group`, on every rank.

    x      [..., K_r] this rank's slice of the input features (M = x.numel() / K_r rows, the
           same M on every rank; K_r may differ per rank, and be 0: that rank adds nothing)
    w      [N, K_r] this rank's slice of the weight, torch Linear layout (row n = output n)
    bias   [N] or None; the same tensor on every rank (a replicated parameter), added once.
           A bias on some ranks only raises FcoError on every rank — except for M > 64 under
           "auto" (addmm / matmul + fco.allreduce, unfused), where nothing detects it: group
           rank 0's bias (or none) is added to its partial product before the sum, as impls 0
           and 3 add rank 0's; the other ranks' biases are not read
    → y    [..., N] (a new tensor, or out), identical on every rank (fp32 accumulation,
           rank-order sum)
    All float tensors share one dtype: float32, float16 or bfloat16; contiguous. CUDA: on the
    current device, runs on the current stream, capturable in a CUDA graph once the shape ran
    eagerly (workspace, cuBLAS handle) or after comm.reserve(fco.gemv_allreduce_workspace_bytes
    (x, w)); CPU: the cpu transport, done when the call returns.
    group  torch.distributed ProcessGroup (None: the default group).
    impl   "auto", "baseline" (0: GEMM + NCCL allreduce), "oneshot" (1), "twophase" (2),
           "cublas_oneshot" (3: GEMM + fco's one-shot allreduce, unfused), "triton", or an
           int. The fused op takes M ≤ 64; "auto" runs larger M as matmul + fco.allreduce.
    out    optional [..., N] tensor (x's dtype and device, contiguous, not overlapping x, w or
           bias) to write y into and return — a decode loop's buffer, no allocation a call.
           Written in place in eager calls without gradients (an out that requires grad
           counts as a gradient); elsewhere (autograd, torch.compile) y is computed as usual
           and copied into it.
    Differentiable as Megatron's RowParallelLinear (the loss is replicated over the group):
    dx = dy @ w, dw = dy.T @ x, dbias = dy summed over the rows, no collective.
    Raises fco.FcoError (INVALID_ARGUMENT naming the argument) for bad input, and with
    libfco's message for what only the ranks together can see (M or N differ across ranks).
    """
    _common.require_tensor(x, _OP, "x")
    _common.require_tensor(w, _OP, "w")
    if bias is not None:
        _common.require_tensor(bias, _OP, "bias")
    gname, iid = _common.group_name(group), _common.impl_id(impl, IMPLS, _OP)
    if _common.direct_ok(x, w, bias, out=out):
        y = _run(x, w, bias, _check(x, w, bias), gname, iid, out=out)
        _common.written(out)
        return y
    _common.check_op_out(out, (x, w, bias), _OP, ("x", "w", "bias"))
    res = torch.ops.fco.gemv_allreduce(x, w, bias, gname, iid)
    if out is None:
        return res
    _common.check_out(out, res, res.shape, _OP)
    return out.copy_(res)


def workspace_bytes(x, w, group=None, impl="auto"):
    """Workspace bytes per rank fco_gemv_allreduce needs for x, w (for comm.reserve())."""
    dt = _check(x, w, None)
    N, K = w.shape
    M = x.shape[:-1].numel()  # not x.numel() // K: 0 on a rank with K_r = 0
    iid = _common.impl_id(impl, IMPLS, _OP)
    if M > MAX_M and iid == _lib.IMPL_AUTO:
        return _allreduce.workspace_bytes(x.new_empty((M, N)), group)
    comm = _comm.get(_common.group_name(group), x.device)
    if iid == IMPL_TRITON:
        from ..triton import gemv_allreduce as tg
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count \
            if x.device.type == "cuda" else 132  # the launch's SM count (132: an H200)
        block_n = tg.plan(M, N, x.element_size(), sms)[1]
        return tg.workspace_bytes(comm.size, M, N, block_n)
    out = ctypes.c_size_t()
    f = _lib.bind("fco_gemv_allreduce_workspace", [
        _lib.comm_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
        ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)])
    _lib.check(f(comm.handle, max(M, 1), max(N, 1), max(K, 1), dt, iid, ctypes.byref(out)),
               comm.handle, "fco_gemv_allreduce_workspace")
    return out.value
