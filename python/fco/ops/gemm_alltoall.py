"""gemm_alltoall.py — fco_gemm_alltoall as the torch op fco::gemm_alltoall (MoE expert
down-projection + combine), with a fake impl, autograd (through the op
fco::gemm_alltoall_backward) and the wrapper fco.gemm_alltoall(a, w, counts, out_rows=None,
counts_host=None, recv_rows=None, w_layout="kn", group=None, impl="auto").

C function (include/fco.h):
  fco_gemm_alltoall(comm, a, a_rows, w, w_layout, num_experts, counts, counts_host,
                    recv_rows_host, out, out_rows, k, n, dtype, impl, stream)
Rank r hosts E_r experts; a [a_rows, K] holds their rows grouped by expert, then by source
rank; counts [E_r, P] (int32, on a's device) says how many rows of expert e came from rank s.
Every row times its expert's weight goes back to the rank it came from: out [out_rows, N] on
rank s holds the rows from rank 0 (its expert 0's, expert 1's, ...), then from rank 1, ...
= per-expert matmul, permute, all_to_all_single. impls: 0 = GEMM per expert + all-to-all
("baseline"), 1 = fused tiles, 2 = chunked GEMM pushed while the next chunk computes, -1 = auto;
"triton" (Python only, CUDA): fco.triton's persistent tile kernel (python/fco/triton/
gemm_alltoall.py), impl 1's protocol on the same communicator. Rows of out past the received
total are zero.

Autograd. Each rank's output holds its own tokens and the loss is the sum of the ranks' losses,
so the backward sends every output row's gradient back to the rank that computed it (the
reverse all-to-all, torch.distributed.all_to_all_single on the group), puts it in a's row order
and takes the GEMM gradients per expert: KN (Y = A·W_e): dA = dY·W_eᵀ, dW_e = Aᵀ·dY;
NK (Y = A·W_eᵀ): dA = dY·W_e, dW_e = dYᵀ·A. Rows of a past Σ counts get zero gradient.
It needs the counts on the host: counts_host / recv_rows when given, else a copy of counts
(a host sync on CUDA) and an all-to-all of the row totals. Unfused.
"""
import ctypes
import operator
from typing import Optional

import torch

from .. import _comm, _lib
from .._lib import FcoError
from . import _common

IMPL_TRITON = -2  # Python-only id (never passed to C): the Triton kernel of fco.triton
IMPLS = {"baseline": 0, "nccl": 0, "tiles": 1, "fused": 1, "chunks": 2, "triton": IMPL_TRITON}
LAYOUTS = {"kn": 0, "nk": 1}  # FCO_W_KN: w [E, K, N]; FCO_W_NK: w [E, N, K] (Linear weight)
MAX_EXPERTS = 256
_OP = "fco.gemm_alltoall"
_c_fn = None


def _fn():
    global _c_fn
    if _c_fn is None:
        vp, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        _c_fn = _lib.bind("fco_gemm_alltoall", [
            _lib.comm_t, vp, i64, vp, c_int, c_int, vp, vp, vp, vp, i64, i64, i64, c_int, c_int,
            vp])
    return _c_fn


def _nk(w, w_layout):
    """(N, K) of the expert weights."""
    return (w.shape[2], w.shape[1]) if w_layout == 0 else (w.shape[1], w.shape[2])


def _check_host_ints(t, op, arg, shape):
    _common.require_tensor(t, op, arg)
    if t.device.type != "cpu" or t.dtype != torch.int32 or tuple(t.shape) != shape or \
            not t.is_contiguous():
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} is {t.dtype} {tuple(t.shape)} on {t.device}; expected a "
                       f"contiguous CPU torch.int32 tensor of shape {shape}")


def _check(a, w, counts, counts_host, recv_rows, out_rows, w_layout, size, op=_OP):
    """Everything checkable from the arguments and the group size; returns the fco dtype."""
    dt = _common.check_tensor(a, op, "a")
    _common.check_tensor(w, op, "w")
    _common.check_like(w, a, op, "w", "a")
    if w_layout not in (0, 1):
        raise _common.bad(op, f"w_layout {w_layout} is not 0 (kn) or 1 (nk)")
    if a.dim() != 2:
        raise _common.bad(op, f"a has shape {tuple(a.shape)}; expected [a_rows, K]")
    K = a.shape[1]
    if w.dim() != 3 or w.shape[1 + w_layout] != K:
        want = "[E, K, N]" if w_layout == 0 else "[E, N, K]"
        raise _common.bad(op, f"w has shape {tuple(w.shape)}; expected {want} with K = "
                          f"a.shape[1] = {K} (w_layout {'kn' if w_layout == 0 else 'nk'})")
    N = w.shape[2 - w_layout]
    if K < 1 or N < 1:  # libfco's k, n in 1..2^31-1: refused in the fake kernel (tracing) too
        raise _common.bad(op, f"K = {K}, N = {N}: both must be at least 1")
    E = w.shape[0]
    if not 1 <= E <= MAX_EXPERTS:
        raise _common.bad(op, f"w has {E} experts; expected 1..{MAX_EXPERTS}")
    if counts is not None:  # None: workspace_bytes (the op's schema requires counts)
        _common.check_index(counts, op, "counts", a)
        if counts.dtype != torch.int32 or counts.shape != (E, size):
            raise _common.bad(op, f"counts is {counts.dtype} {tuple(counts.shape)}; expected "
                              f"torch.int32 [E, P] = [{E}, {size}] (rows of local expert e "
                              "from rank s)")
    if counts_host is not None:
        _check_host_ints(counts_host, op, "counts_host", (E, size))
    if recv_rows is not None:
        _check_host_ints(recv_rows, op, "recv_rows", (size,))
    _check_out_rows(out_rows, op)
    return dt


def _check_out_rows(out_rows, op):
    if out_rows < 0:
        raise _common.bad(op, f"out_rows {out_rows} is negative")
    if out_rows > _common.INT32_MAX:  # libfco's limit; before new_zeros tries to allocate it
        raise _common.bad(op, f"out_rows {out_rows} is more than 2^31-1")


def _run(a, w, counts, counts_host, recv_rows, out_rows, w_layout, group_name, impl, out=None):
    _, size = _common.rank_size(group_name, a.device)
    dt = _check(a, w, counts, counts_host, recv_rows, out_rows, w_layout, size)
    _common.check_current_device(a, _OP, "a")
    N, K = _nk(w, w_layout)
    if out is not None:  # the caller's (e.g. fco.empty_symmetric: peers store into it)
        _common.check_out(out, a, (out_rows, N), _OP)
        if recv_rows is None:  # refused before zero_() (libfco refuses it too, after)
            _common.check_no_overlap(out, (a, w, counts), _OP, ("a", "w", "counts"))
            out.zero_()
    elif recv_rows is None:  # the received total is unknown on the host: zero everything
        out = a.new_zeros((out_rows, N))
    else:
        out = a.new_empty((out_rows, N))
    if impl == IMPL_TRITON:  # fco.triton's kernel over the same communicator
        if a.device.type != "cuda":
            raise FcoError(_lib.UNSUPPORTED, f"{_OP}: impl 'triton' runs on CUDA tensors (nccl "
                           f"transport); a is on {a.device}: use another impl on the cpu transport")
        from ..triton import gemm_alltoall as tg
        tg.check_host_args(size, a.shape[0], out_rows, K, N, counts_host, recv_rows, _OP)
        tg.gemm_alltoall_comm(_comm.get(group_name, a.device), a, w, counts, out_rows,
                              w_layout, out=out)
        _zero_tail(out, recv_rows, out_rows)
        return out
    h = _comm.get(group_name, a.device).handle
    r = _fn()(h, _common.ptr(a), a.shape[0], w.data_ptr(), w_layout, w.shape[0],
              counts.data_ptr(), None if counts_host is None else counts_host.data_ptr(),
              None if recv_rows is None else recv_rows.data_ptr(), _common.ptr(out), out_rows,
              K, N, dt, impl, _common.stream_of(a))
    if r:
        _common.raise_last(r, h, "fco_gemm_alltoall")
    _zero_tail(out, recv_rows, out_rows)
    return out


def _zero_tail(out, recv_rows, out_rows):
    """Zero out's rows past the received total (recv_rows given: the rest was not zeroed first).
    sum(tolist()) rather than int(recv_rows.sum()), and no call where nothing is left: a torch
    op costs µs of host time on every eager call (run 2026-12-04_nvidia-h200_0a86bd6-wrapcost:
    int(recv.sum()) 3.8 µs, an empty slice's zero_() 3.2)."""
    if recv_rows is not None:
        got = sum(recv_rows.tolist())
        if got < out_rows:
            out[got:].zero_()


@torch.library.custom_op("fco::gemm_alltoall", mutates_args=())
def _gemm_alltoall(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor,
                   counts_host: Optional[torch.Tensor], recv_rows: Optional[torch.Tensor],
                   out_rows: int, w_layout: int, group_name: str, impl: int) -> torch.Tensor:
    _common.raw_impl(impl, _OP, (IMPL_TRITON,))
    return _run(a, w, counts, counts_host, recv_rows, out_rows, w_layout, group_name, impl)


@_gemm_alltoall.register_fake
def _gemm_alltoall_fake(a, w, counts, counts_host, recv_rows, out_rows, w_layout, group_name,
                        impl):
    _common.raw_impl(impl, _OP, (IMPL_TRITON,))
    _check(a, w, counts, counts_host, recv_rows, out_rows, w_layout,
           _common.rank_size(group_name)[1])
    return a.new_empty((out_rows, _nk(w, w_layout)[0]))


# ---- backward ------------------------------------------------------------------------------

def _a_order(C):
    """Index of each of a's rows (expert-major, then source rank) in the gradient as it comes
    back (source-rank-major, then expert). C: counts [E, P] (int64, on the gradient's device)."""
    E, P = C.shape
    lens_back = C.t().reshape(-1)                         # block (s, e) of the returned rows
    start_back = (torch.cumsum(lens_back, 0) - lens_back).view(P, E).t().reshape(-1)
    lens = C.reshape(-1)                                  # block (e, s) of a
    n = int(lens.sum())
    start = torch.cumsum(lens, 0) - lens
    pos = torch.arange(n, device=C.device)
    return torch.repeat_interleave(start_back - start, lens, output_size=n) + pos


@torch.library.custom_op("fco::gemm_alltoall_backward", mutates_args=())
def _gemm_alltoall_backward(grad: torch.Tensor, a: torch.Tensor, w: torch.Tensor,
                            counts: torch.Tensor, counts_host: Optional[torch.Tensor],
                            recv_rows: Optional[torch.Tensor], w_layout: int, group_name: str,
                            need_a: bool, need_w: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad of a or [0], grad of w or [0])."""
    C = (counts_host if counts_host is not None else counts.cpu()).long()
    sent = C.sum(0)  # rows this rank sent to each rank in the forward: they come back
    if recv_rows is None:  # rows each rank sent here = its counts' column for this rank
        recv = _common.all_to_all(sent.to(counts.device), [1] * len(sent), [1] * len(sent),
                                  group_name).cpu()
    else:
        recv = recv_rows.long()
    N, K = _nk(w, w_layout)
    recv_l, sent_l = recv.tolist(), sent.tolist()
    dy = _common.all_to_all(grad[:sum(recv_l)], sent_l, recv_l, group_name, (N,))
    dy = dy[_a_order(C.to(dy.device))]  # a's row order
    da = torch.zeros_like(a) if need_a else a.new_empty(0)
    dw = torch.zeros_like(w) if need_w else w.new_empty(0)
    row = 0
    for e, n in enumerate(C.sum(1).tolist()):
        if n == 0:
            continue
        ae, dye, we = a[row:row + n], dy[row:row + n], w[e]
        if need_a:
            da[row:row + n] = dye @ (we.t() if w_layout == 0 else we)
        if need_w:
            dw[e] = ae.t() @ dye if w_layout == 0 else dye.t() @ ae
        row += n
    return da, dw


@_gemm_alltoall_backward.register_fake
def _gemm_alltoall_backward_fake(grad, a, w, counts, counts_host, recv_rows, w_layout,
                                 group_name, need_a, need_w):
    return (torch.empty_like(a) if need_a else a.new_empty(0),
            torch.empty_like(w) if need_w else w.new_empty(0))


def _setup_context(ctx, inputs, output):
    a, w, counts, counts_host, recv_rows, _, w_layout, group_name, _ = inputs
    ctx.save_for_backward(a, w, counts, counts_host, recv_rows)
    ctx.w_layout, ctx.group_name = w_layout, group_name


def _backward(ctx, grad):
    a, w, counts, counts_host, recv_rows = ctx.saved_tensors
    need_a, need_w = bool(ctx.needs_input_grad[0]), bool(ctx.needs_input_grad[1])
    da, dw = torch.ops.fco.gemm_alltoall_backward(grad, a, w, counts, counts_host, recv_rows,
                                                  ctx.w_layout, ctx.group_name, need_a, need_w)
    return (da if need_a else None, dw if need_w else None) + (None,) * 7


_gemm_alltoall.register_autograd(_backward, setup_context=_setup_context)


# the integer CPU dtypes a host hint may have besides int32 (converted to it, range checked)
_HOST_INT_DTYPES = (torch.int8, torch.int16, torch.int64, torch.uint8, torch.uint16, torch.uint32)


def _host_ints(v, op, arg):
    """A host hint as a CPU int32 tensor (lists and other integer CPU tensors converted; a list
    holding a float such as 2.5 is refused: torch.tensor would truncate it)."""
    if v is None:
        return None
    if isinstance(v, torch.Tensor):
        if v.device.type == "cpu" and v.dtype in _HOST_INT_DTYPES:
            v = v.to(torch.int64)  # lossless for each of them (uint64 is not one: it could wrap)
            if v.numel():  # refused as a list's would be: no wrap
                lo, hi = (int(m) for m in torch.aminmax(v))
                if lo < -2 ** 31 or hi > _common.INT32_MAX:
                    raise _common.bad(op, f"{arg} holds {lo if lo < -2 ** 31 else hi}, "
                                      "outside int32")
            return v.to(torch.int32).contiguous()
        return v
    if not isinstance(v, (list, tuple)):
        raise FcoError(_lib.INVALID_ARGUMENT, f"{op}: {arg} {v!r} is not a list of ints")
    try:
        t = torch.tensor(v, dtype=torch.int32)
    except (TypeError, ValueError, RuntimeError) as e:
        raise FcoError(_lib.INVALID_ARGUMENT, f"{op}: {arg} is not a list of ints: {e}") from None
    # torch.tensor truncates 2.7 to 2: refuse what is not an int (counts_host is [E][P])
    flat = [x for row in v for x in row] if len(v) and isinstance(v[0], (list, tuple)) else v
    _common.check_ints(flat, op, arg, shown=v)
    return t


def gemm_alltoall(a, w, counts, out_rows=None, counts_host=None, recv_rows=None, w_layout="kn",
                  group=None, impl="auto", out=None):
    """MoE expert down-projection + combine: every row of `a` times its local expert's weight,
    sent back to the rank the row came from.

    a            [a_rows, K] rows of this rank's E experts, grouped by expert, then by source
                 rank (expert 0's rows from rank 0, from rank 1, ..., then expert 1's, ...);
                 a_rows (capacity ≥ Σ counts) is the same on every rank
    w            [E, K, N] (w_layout "kn": y = a_e @ w[e]) or [E, N, K] ("nk": y = a_e @ w[e].T,
                 torch Linear weights); a's dtype: float32, float16 or bfloat16
    counts       [E, P] torch.int32 on a's device: rows of expert e that came from rank s. On
                 CUDA read on the device only (impl 1): captured graphs replay with new counts
    out_rows     rows of the output (capacity, the same on every rank; default a_rows)
    counts_host  optional host copy of counts (a list, nested or flat, or a CPU integer tensor,
                 int8..int64 or uint8..uint32):
                 lets impls 0/2 size their GEMMs without a device→host copy, and the backward
                 skip that copy
    recv_rows    optional [P] host ints (list or CPU tensor): rows this rank receives from
                 each rank (= the input splits of the dispatch all-to-all); zero-fills only the
                 output's tail; needed by impl 0 on nccl under capture
    impl         "auto", "baseline" (0), "tiles" (1), "chunks" (2), an int, or "triton" (CUDA
                 only: fco.triton's tile kernel, device counts only like impl 1)
    out          optional [out_rows, N] tensor (a's dtype and device, contiguous, sharing no
                 byte with a, w or counts) to write into and return — from
                 fco.empty_symmetric, the peers store their rows straight into it (impls 1, 2
                 on CUDA: no staging, no landing copy). Written in place in eager calls without
                 gradients (an out that requires grad counts as a gradient); elsewhere
                 (autograd, torch.compile) the result is computed as usual and copied into it
    → out        [out_rows, N]: rows from rank 0 (its expert 0's, 1's, ...), then rank 1, ...;
                 rows past the received total are zero
    CUDA: current device and stream; capturable once the shapes ran eagerly (workspace) with
    impl 1 or "triton", or with the host hints (their values are baked into the graph). CPU:
    the cpu transport. Differentiable in a and w (reverse all-to-all, then per-expert GEMM
    gradients).
    Raises fco.FcoError for bad input; counts that are negative or need more rows than a_rows /
    out_rows raise INVALID_ARGUMENT on every rank and no row is written (on CUDA with impl 1
    or "triton": from comm.check_async_error() / the next call) — but a given `out` without
    `recv_rows`, written in place (eager, no gradients), was zero-filled before the call (the
    received total is unknown on the host); where the op runs apart and is copied into `out`
    (autograd, torch.compile), a failed call leaves `out` as it was.
    An out overlapping a, w or counts raises INVALID_ARGUMENT (without recv_rows: before the
    zero-fill, so the caller's tensors keep their values); so do host hints and out_rows that
    are not ints (2.5, 4.0: never truncated).
    """
    for t, name in ((a, "a"), (w, "w"), (counts, "counts")):
        _common.require_tensor(t, _OP, name)
    layout, out_rows = _host_args(a, w_layout, out_rows)
    counts_host = _host_ints(counts_host, _OP, "counts_host")
    recv_rows = _host_ints(recv_rows, _OP, "recv_rows")
    if counts_host is not None and counts_host.dim() == 1 and \
            counts_host.numel() == counts.numel() and counts.dim() == 2:
        counts_host = counts_host.view(counts.shape)  # a flat list, e-major
    gname, iid = _common.group_name(group), _common.impl_id(impl, IMPLS, _OP)
    args = (counts_host, recv_rows, out_rows, layout, gname, iid)
    if _common.direct_ok(a, w, counts, out=out):
        y = _run(a, w, counts, *args, out=out)
        _common.written(out)
        return y
    _common.check_op_out(out, (a, w, counts), _OP, ("a", "w", "counts"))
    res = torch.ops.fco.gemm_alltoall(a, w, counts, *args)
    if out is None:
        return res
    _common.check_out(out, res, res.shape, _OP)
    return out.copy_(res)


def _host_args(a, w_layout, out_rows):
    """(w_layout as an int, out_rows as an int: default a_rows), checked as the op checks them
    (a float out_rows is refused, never truncated; out_rows ≤ 2^31-1, libfco's limit)."""
    if not isinstance(w_layout, str) or w_layout not in LAYOUTS:  # a list: unhashable
        raise FcoError(_lib.INVALID_ARGUMENT, f"{_OP}: w_layout {w_layout!r} is not 'kn' or 'nk'")
    if out_rows is None:
        out_rows = a.shape[0] if a.dim() else 0  # a 0-d a: the shape check says so
    elif not isinstance(out_rows, (int, torch.SymInt)):
        try:
            out_rows = operator.index(out_rows)  # numpy ints; never a float's truncation
        except TypeError:
            raise _common.bad(_OP, f"out_rows {out_rows!r} is not an int") from None
    _check_out_rows(out_rows, _OP)  # here too: 2^64 would fail the op's schema first
    return LAYOUTS[w_layout], out_rows


def workspace_bytes(a, w, out_rows=None, w_layout="kn", group=None, impl="auto"):
    """Workspace bytes per rank fco_gemm_alltoall needs (for comm.reserve()); the arguments are
    checked as fco.gemm_alltoall checks them."""
    _common.require_tensor(a, _OP, "a")
    _common.require_tensor(w, _OP, "w")
    layout, out_rows = _host_args(a, w_layout, out_rows)
    iid = _common.impl_id(impl, IMPLS, _OP)
    comm = _comm.get(_common.group_name(group), a.device)
    dt = _check(a, w, None, None, None, out_rows, layout, comm.size)
    N, K = _nk(w, layout)
    if iid == IMPL_TRITON:  # impl 1's layout
        from ..triton import gemm_alltoall as tg
        # The stream-K scratch of the launch (FCO_TRITON_GA_STREAMK, read as the op reads it),
        # for the tile the op will pick: reserving this before capturing is then enough.
        bm, bn, bk = tg.config(a.element_size(), N, a.shape[0], w.shape[0], comm.size)["tile"][:3]
        scratch = tg.sk_scratch_bytes(tg.streamk_config(None, -(-K // bk)), bm, bn)
        return tg.workspace_bytes(comm.size, out_rows, N, a.element_size(), scratch)
    out = ctypes.c_size_t()
    i64 = ctypes.c_int64
    f = _lib.bind("fco_gemm_alltoall_workspace", [_lib.comm_t, i64, i64, i64, i64, ctypes.c_int,
                                                  ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)])
    _lib.check(f(comm.handle, a.shape[0], out_rows, K, N, dt, iid, ctypes.byref(out)),
               comm.handle, "fco_gemm_alltoall_workspace")
    return out.value
