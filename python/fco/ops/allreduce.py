"""allreduce.py — fco_allreduce as the torch ops fco::allreduce (out of place) and
fco::allreduce_ (in place), with a fake impl (torch.compile), autograd and the wrapper
fco.allreduce(t, group=None, impl="auto").

C function (include/fco.h):
  fco_allreduce(comm, in, out, count, dtype, impl, stream)   sum over the ranks, in == out ok
impls: 0 = baseline (ncclAllReduce on nccl; shared-memory copy then reduce on cpu),
1 = one-shot over the peer table, -1 = auto.
Autograd: y = Σ_r x_r on every rank, so dL/dx_r = Σ_s dL/dy_s: the gradient is the allreduce
of the output gradient (same group, same impl).
"""
import ctypes

import torch

from .. import _comm, _lib
from .._lib import FcoError
from . import _common

IMPLS = {"baseline": 0, "nccl": 0, "copy": 0, "oneshot": 1}
_OP = "fco.allreduce"
_c_allreduce = None


def _fn():
    global _c_allreduce
    if _c_allreduce is None:
        _c_allreduce = _lib.bind("fco_allreduce", [
            _lib.comm_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
            ctypes.c_int, ctypes.c_void_p])
    return _c_allreduce


def _check(t, op):
    dt = _common.check_tensor(t, op, "t")
    _common.check_current_device(t, op, "t")
    return dt


def _launch(inp, out, dt, group_name, impl):
    n = inp.numel()
    if n == 0:  # nothing to reduce (the same on every rank: counts must match)
        return
    h = _comm.get(group_name, inp.device).handle
    r = _fn()(h, inp.data_ptr(), out.data_ptr(), n, dt, impl, _common.stream_of(inp))
    if r:
        raise FcoError(r, _lib.last_error(h) or _lib.result_string(r), "fco_allreduce")


@torch.library.custom_op("fco::allreduce", mutates_args=())
def _allreduce(t: torch.Tensor, group_name: str, impl: int) -> torch.Tensor:
    _common.raw_impl(impl, _OP)
    dt = _check(t, _OP)
    out = torch.empty_like(t)
    _launch(t, out, dt, group_name, impl)
    return out


@_allreduce.register_fake
def _allreduce_fake(t, group_name, impl):
    _common.raw_impl(impl, _OP)
    _common.check_tensor(t, _OP, "t")
    return torch.empty_like(t)


def _setup_context(ctx, inputs, output):
    _, ctx.group_name, ctx.impl = inputs


def _backward(ctx, grad):
    return torch.ops.fco.allreduce(grad.contiguous(), ctx.group_name, ctx.impl), None, None


_allreduce.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("fco::allreduce_", mutates_args=("t",))
def _allreduce_inplace(t: torch.Tensor, group_name: str, impl: int) -> None:
    _common.raw_impl(impl, "fco.allreduce_")
    _launch(t, t, _check(t, "fco.allreduce_"), group_name, impl)


@_allreduce_inplace.register_fake
def _allreduce_inplace_fake(t, group_name, impl):
    _common.raw_impl(impl, "fco.allreduce_")
    _common.check_tensor(t, "fco.allreduce_", "t")


def allreduce(t, group=None, impl="auto"):
    """Sum of `t` over the ranks of `group`, returned as a new tensor (t is not modified).

    t      contiguous float32 / float16 / bfloat16 tensor, the same shape and dtype on every
           rank. CUDA: on the current device, the op runs on the current stream (capturable in
           a CUDA graph); CPU: cpu transport (ranks on one host), done when the call returns.
    group  torch.distributed ProcessGroup (None: the default group). Its fco communicator is
           created on first use (collective); call fco.init(group) before torch.compile'd or
           graph-captured code.
    impl   "auto", "baseline" (0: ncclAllReduce / shared-memory copy), "oneshot" (1), or an int.
    Sums in fp32 in rank order, so every rank gets bit-identical results. Differentiable: the
    gradient is the allreduce of the output gradient. Raises fco.FcoError for bad input
    (dtype, device, non-contiguous, shapes that differ across ranks).
    """
    _common.require_tensor(t, _OP, "t")
    gname, iid = _common.group_name(group), _common.impl_id(impl, IMPLS, _OP)
    if _common.direct_ok(t):
        dt = _check(t, _OP)
        out = torch.empty_like(t)
        _launch(t, out, dt, gname, iid)
        return out
    return torch.ops.fco.allreduce(t, gname, iid)


def allreduce_(t, group=None, impl="auto"):
    """In-place allreduce: t becomes the sum over the ranks of `group`; returns t.
    Same arguments as allreduce(); no autograd (use allreduce() for differentiable code): a t
    that requires grad while grad mode is on raises FcoError (INVALID_USAGE) — autograd would
    not see the sum (wrong gradients); under torch.no_grad() it is allowed. t's version counter
    is bumped, as torch's in-place ops do: a backward that saved t raises. An inference tensor
    outside torch.inference_mode() raises FcoError (INVALID_USAGE), as torch refuses in-place
    updates to it."""
    _common.require_tensor(t, "fco.allreduce_", "t")
    if t.requires_grad and torch.is_grad_enabled():  # both paths: the op has no autograd
        raise FcoError(_lib.INVALID_USAGE,
                       "fco.allreduce_: t requires grad, and the in-place op has no autograd "
                       "(its gradient would be wrong): use y = fco.allreduce(t), or run it "
                       "under torch.no_grad()")
    if not _common.writable(t):  # both paths: torch's custom ops let such a write through
        raise FcoError(_lib.INVALID_USAGE,
                       "fco.allreduce_: t is an inference tensor: Inplace update to inference "
                       "tensor outside InferenceMode is not allowed (torch's rule); clone it, "
                       "or call this under torch.inference_mode()")
    gname, iid = _common.group_name(group), _common.impl_id(impl, IMPLS, "fco.allreduce_")
    if _common.direct_ok(t):
        _launch(t, t, _check(t, "fco.allreduce_"), gname, iid)
        _common.written(t)  # as the op's mutates_args does: autograd sees t changed
    else:
        torch.ops.fco.allreduce_(t, gname, iid)
    return t


def workspace_bytes(t, group=None, impl="auto"):
    """Workspace bytes per rank fco_allreduce needs for a tensor like t (for comm.reserve())."""
    dt = _common.check_tensor(t, _OP, "t")
    comm = _comm.get(_common.group_name(group), t.device)
    out = ctypes.c_size_t()
    f = _lib.bind("fco_allreduce_workspace", [_lib.comm_t, ctypes.c_size_t, ctypes.c_int,
                                              ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)])
    _lib.check(f(comm.handle, max(t.numel(), 1), dt, _common.impl_id(impl, IMPLS, _OP),
                 ctypes.byref(out)), comm.handle, "fco_allreduce_workspace")
    return out.value
