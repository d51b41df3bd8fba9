"""embedding_alltoall.py — fco_embedding_alltoall as the torch op fco::embedding_alltoall
(DLRM's model-parallel pooled lookup + the All-to-All to the sample owners), with a fake impl,
autograd (through the op fco::embedding_alltoall_backward) and the wrapper
fco.embedding_alltoall(weight, indices, offsets, table_rows, tables_per_rank, batch_per_rank,
per_sample_weights=None, mode="sum", group=None, impl="auto").

C function (include/fco.h, semantics there and in docs/embedding_alltoall.md):
  fco_embedding_alltoall(comm, weight, table_rows, tables_per_rank, batch_per_rank, dim, dtype,
                         offsets, indices, num_indices, index_type, per_sample_weights,
                         pooling, out, impl, stream)
Rank r owns T_r tables (packed in one weight [Σ rows, D]) and looks them up for the whole
global batch B = Σ_s b_s; rank s receives out [b_s, T, D]: its samples, every table in global
order. The same as F.embedding_bag per table, all_to_all_single and a permute.
impls: 0 = lookup, all-to-all, permute ("baseline"), 1 = fused, -1 = auto.

Autograd. Each rank's output is its own (data-parallel samples), the loss is the sum of the
ranks' losses: the backward sends every sample's output gradient back to the table owners (the
reverse all-to-all: torch.distributed.all_to_all_single on the group) and accumulates it into
the rows the bags read, as F.embedding_bag's dense backward: Σ over the bag's entries of
w_k · g (sum) or w_k · g / n (mean, n = the bag's length); the gradient of per_sample_weights is
<g, row_k> (/ n for mean). Unfused, and it synchronises the host on CUDA (repeat_interleave of
the bag lengths); the table gradient is accumulated in fp32 and rounded once.
"""
import ctypes
import functools
from typing import Optional, Sequence

import torch

from .. import _comm, _lib
from .._lib import FcoError
from . import _common

IMPLS = {"baseline": 0, "copy": 0, "nccl": 0, "fused": 1}
POOLING = {"sum": 0, "mean": 1}  # fco_emb_pooling_t
MAX_TABLES, MAX_DIM = 1024, 65536
_OP = "fco.embedding_alltoall"
_c_fn = None


def _fn():
    global _c_fn
    if _c_fn is None:
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        _c_fn = _lib.bind("fco_embedding_alltoall", [
            _lib.comm_t, vp, ctypes.POINTER(i64), ctypes.POINTER(ctypes.c_int32),
            ctypes.POINTER(i64), i64, ctypes.c_int, vp, vp, i64, ctypes.c_int, vp, ctypes.c_int,
            vp, ctypes.c_int, vp])
    return _c_fn


def _check_splits(tables_per_rank, batch_per_rank, size, op=_OP):
    """Checks of tables_per_rank and batch_per_rank (tuples of ints); returns (T, B)."""
    if len(tables_per_rank) != size or len(batch_per_rank) != size:
        raise _common.bad(op, f"tables_per_rank (length {len(tables_per_rank)}) and "
                          f"batch_per_rank (length {len(batch_per_rank)}) need one entry per "
                          f"rank of the group ({size})")
    if any(t < 0 for t in tables_per_rank) or any(b < 0 for b in batch_per_rank):
        raise _common.bad(op, f"negative entry in tables_per_rank {list(tables_per_rank)} or "
                          f"batch_per_rank {list(batch_per_rank)}")
    T, B = sum(tables_per_rank), sum(batch_per_rank)
    if not 1 <= T <= MAX_TABLES:
        raise _common.bad(op, f"tables_per_rank sums to {T}; expected 1..{MAX_TABLES}")
    if not 1 <= B < 2 ** 31:
        raise _common.bad(op, f"batch_per_rank sums to {B}; expected 1..2^31-1")
    return T, B


@functools.lru_cache(maxsize=256)
def _check_lists(table_rows, tables_per_rank, batch_per_rank, rank, size, op=_OP):
    """Checks of the split lists (tuples), cached: they are the same every call.
    Returns (T, B, T_r, rows of this rank's tables)."""
    T, B = _check_splits(tables_per_rank, batch_per_rank, size, op)
    Tr = tables_per_rank[rank]
    if len(table_rows) != Tr:
        raise _common.bad(op, f"table_rows has {len(table_rows)} entries but "
                          f"tables_per_rank[{rank}] (this rank) = {Tr}")
    if any(n < 0 for n in table_rows):
        raise _common.bad(op, f"table_rows {list(table_rows)} has a negative entry")
    return T, B, Tr, sum(table_rows)


def _check_weight(weight, op):
    """weight [rows, D]; returns the fco dtype."""
    dt = _common.check_tensor(weight, op, "weight")
    if weight.dim() != 2:
        raise _common.bad(op, f"weight has shape {tuple(weight.shape)}; expected [rows, D] "
                          "(the local tables packed one after the other)")
    D = weight.shape[1]
    if not 1 <= D <= MAX_DIM:
        raise _common.bad(op, f"dim D = {D} is not in 1..{MAX_DIM}")
    return dt


def _check(weight, indices, offsets, psw, table_rows, tables_per_rank, batch_per_rank, pooling,
           rank, size, op=_OP):
    """Everything checkable from the arguments and (rank, size) of the group. Returns the
    fco dtype, T and B."""
    dt = _check_weight(weight, op)
    _common.check_index(indices, op, "indices", weight)
    _common.check_index(offsets, op, "offsets", weight)
    if indices.dim() != 1 or offsets.dim() != 1:
        raise _common.bad(op, f"indices {tuple(indices.shape)} and offsets "
                          f"{tuple(offsets.shape)} must be 1-d")
    if offsets.dtype != indices.dtype:
        raise _common.bad(op, f"offsets has dtype {offsets.dtype} but indices has "
                          f"{indices.dtype}; they must match")
    lists = (tuple(table_rows), tuple(tables_per_rank), tuple(batch_per_rank), rank, size, op)
    try:
        T, B, Tr, rows = _check_lists(*lists)
    except TypeError:  # SymInts (torch.compile with dynamic sizes) are not hashable
        T, B, Tr, rows = _check_lists.__wrapped__(*lists)
    if rows != weight.shape[0]:
        raise _common.bad(op, f"table_rows {list(table_rows)} sum to {rows} but weight has "
                          f"{weight.shape[0]} rows")
    if offsets.numel() != Tr * B + 1:
        raise _common.bad(op, f"offsets has {offsets.numel()} elements; expected T_r·B + 1 = "
                          f"{Tr}·{B} + 1 = {Tr * B + 1} (table-major CSR over the global "
                          "batch)")
    if psw is not None:
        _common.check_tensor(psw, op, "per_sample_weights")
        if psw.dtype != torch.float32:
            raise _common.bad(op, f"per_sample_weights has dtype {psw.dtype}; the op takes "
                              "torch.float32 (the wrapper converts)")
        if psw.device != weight.device:
            raise _common.bad(op, f"per_sample_weights is on {psw.device}, weight on "
                              f"{weight.device}")
        if psw.shape != indices.shape:
            raise _common.bad(op, f"per_sample_weights has shape {tuple(psw.shape)}; expected "
                              f"indices' {tuple(indices.shape)}")
    if pooling not in (0, 1):
        raise _common.bad(op, f"pooling {pooling} is not 0 (sum) or 1 (mean)")
    return dt, T, B


def _run(weight, indices, offsets, psw, table_rows, tables_per_rank, batch_per_rank, pooling,
         group_name, impl, out=None):
    rank, size = _common.rank_size(group_name, weight.device)
    dt, T, B = _check(weight, indices, offsets, psw, table_rows, tables_per_rank, batch_per_rank,
                      pooling, rank, size)
    _common.check_current_device(weight, _OP, "weight")
    comm = _comm.get(group_name, weight.device)
    D = weight.shape[1]
    if out is None:
        out = weight.new_empty((batch_per_rank[rank], T, D))
    else:  # the caller's (e.g. fco.empty_symmetric: peers store into it)
        _common.check_out(out, weight, (batch_per_rank[rank], T, D), _OP)
    h = comm.handle
    i64 = ctypes.c_int64
    r = _fn()(h, _common.ptr(weight), _common.int_array(i64, tuple(table_rows)),
              _common.int_array(ctypes.c_int32, tuple(tables_per_rank)),
              _common.int_array(i64, tuple(batch_per_rank)), D, dt, offsets.data_ptr(),
              _common.ptr(indices), indices.numel(), 1 if indices.dtype == torch.int64 else 0,
              None if psw is None else _common.ptr(psw), pooling, _common.ptr(out), impl,
              _common.stream_of(weight))
    if r:
        _common.raise_last(r, h, "fco_embedding_alltoall")
    return out


@torch.library.custom_op("fco::embedding_alltoall", mutates_args=())
def _embedding_alltoall(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor,
                        per_sample_weights: Optional[torch.Tensor], table_rows: Sequence[int],
                        tables_per_rank: Sequence[int], batch_per_rank: Sequence[int],
                        pooling: int, group_name: str, impl: int) -> torch.Tensor:
    _common.raw_impl(impl, _OP)
    return _run(weight, indices, offsets, per_sample_weights, table_rows, tables_per_rank,
                batch_per_rank, pooling, group_name, impl)


@_embedding_alltoall.register_fake
def _embedding_alltoall_fake(weight, indices, offsets, per_sample_weights, table_rows,
                             tables_per_rank, batch_per_rank, pooling, group_name, impl):
    _common.raw_impl(impl, _OP)
    rank, size = _common.rank_size(group_name)
    _, T, _ = _check(weight, indices, offsets, per_sample_weights, table_rows, tables_per_rank,
                     batch_per_rank, pooling, rank, size)
    return weight.new_empty((batch_per_rank[rank], T, weight.shape[1]))


# ---- backward ------------------------------------------------------------------------------

@torch.library.custom_op("fco::embedding_alltoall_backward", mutates_args=())
def _embedding_alltoall_backward(
        grad: torch.Tensor, weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor,
        per_sample_weights: Optional[torch.Tensor], table_rows: Sequence[int],
        tables_per_rank: Sequence[int], batch_per_rank: Sequence[int], pooling: int,
        group_name: str, psw_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad of weight [rows, D], grad of per_sample_weights [num_indices] or [0])."""
    rank, size = _common.rank_size(group_name)
    T, B, D = sum(tables_per_rank), sum(batch_per_rank), weight.shape[1]
    Tr, br = tables_per_rank[rank], batch_per_rank[rank]
    # Reverse all-to-all: my samples' gradient of rank q's tables goes to q, which gets
    # [b_s, T_q, D] from every s in rank order: [B, T_q, D], sample-major as the lookup.
    g = grad.reshape(br, T, D)
    toff = [sum(tables_per_rank[:q]) for q in range(size)]
    send = torch.cat([g[:, toff[q]:toff[q] + tables_per_rank[q]].reshape(-1, D)
                      for q in range(size)])
    recv = _common.all_to_all(send, [b * Tr for b in batch_per_rank],
                              [br * t for t in tables_per_rank], group_name, (D,))
    acc = torch.promote_types(weight.dtype, torch.float32)  # float32 for fco's dtypes
    gw = torch.zeros(weight.shape, dtype=acc, device=weight.device)
    gp = weight.new_zeros((indices.numel() if psw_grad else 0,), dtype=acc)
    if Tr == 0 or indices.numel() == 0:
        return gw.to(weight.dtype), gp
    gb = recv.view(B * Tr, D)  # row b·T_r + t: bag (t, b)
    off = offsets.long()
    lo, hi = int(off[0]), int(off[-1])
    lengths = (off[1:] - off[:-1]).clamp_min(0)
    bag = torch.repeat_interleave(torch.arange(Tr * B, device=off.device), lengths,
                                  output_size=hi - lo)  # bag k = t·B + b of entries lo..hi
    t, b = bag // B, bag % B
    idx = indices[lo:hi].long()
    rows = torch.tensor(table_rows, device=off.device)
    base = torch.cumsum(rows, 0) - rows
    ok = (idx >= 0) & (idx < rows[t])  # the forward skipped indices outside their table
    scale = torch.ones(hi - lo, dtype=acc, device=off.device)
    if per_sample_weights is not None:
        scale = scale * per_sample_weights[lo:hi]
    if pooling == 1:
        scale = scale / lengths[bag].to(acc)
    g_entry = gb[b * Tr + t].to(acc)
    r_entry = torch.where(ok, base[t] + idx, 0)
    gw.index_add_(0, r_entry, g_entry * (scale * ok)[:, None])
    if psw_grad:
        dot = (g_entry * weight[r_entry].to(acc)).sum(-1) * ok
        if pooling == 1:
            dot = dot / lengths[bag].to(acc)
        gp[lo:hi] = dot
    return gw.to(weight.dtype), gp


@_embedding_alltoall_backward.register_fake
def _embedding_alltoall_backward_fake(grad, weight, indices, offsets, per_sample_weights,
                                      table_rows, tables_per_rank, batch_per_rank, pooling,
                                      group_name, psw_grad):
    return torch.empty_like(weight), weight.new_empty(
        (indices.numel() if psw_grad else 0,), dtype=torch.promote_types(weight.dtype,
                                                                          torch.float32))


def _setup_context(ctx, inputs, output):
    weight, indices, offsets, psw = inputs[:4]
    ctx.save_for_backward(weight, indices, offsets, psw)
    ctx.args = inputs[4:9]  # table_rows, tables_per_rank, batch_per_rank, pooling, group_name


def _backward(ctx, grad):
    weight, indices, offsets, psw = ctx.saved_tensors
    need_w, need_p = ctx.needs_input_grad[0], ctx.needs_input_grad[3]
    gw, gp = torch.ops.fco.embedding_alltoall_backward(grad, weight, indices, offsets, psw,
                                                       *ctx.args, bool(need_p))
    return (gw if need_w else None, None, None, gp if need_p else None) + (None,) * 6


_embedding_alltoall.register_autograd(_backward, setup_context=_setup_context)


def _ints(v, arg):
    """A host list as a list of ints (a CPU tensor's tolist()); a float in it (2.0) is refused,
    and so is what is no list at all (None, a number, a 0-d tensor, a tensor on a device)."""
    if isinstance(v, torch.Tensor) and v.device.type != "cpu":
        raise _common.bad(_OP, f"{arg} is a tensor on {v.device}; expected a list of ints or a "
                          "CPU tensor")
    try:
        ints = v.tolist() if isinstance(v, torch.Tensor) else list(v)
    except TypeError:
        ints = None
    if not isinstance(ints, list):
        raise _common.bad(_OP, f"{arg} {v!r} is not a list of ints")
    _common.check_ints(ints, _OP, arg)
    return ints


def embedding_alltoall(weight, indices, offsets, table_rows, tables_per_rank, batch_per_rank,
                       per_sample_weights=None, mode="sum", group=None, impl="auto", out=None):
    """Pooled lookup of this rank's tables for the global batch, then the All-to-All that gives
    every rank its own samples' vectors of every table (TorchRec table-wise sharding).

    weight           [Σ_t table_rows[t], D] this rank's T_r tables packed one after the other
                     (float32 / float16 / bfloat16, contiguous; may have 0 rows when T_r = 0)
    indices          [num_indices] int32 or int64: rows within their table
    offsets          [T_r·B + 1], indices' dtype: CSR, table-major over the GLOBAL batch: bag
                     (t, b) is indices[offsets[t·B + b] : offsets[t·B + b + 1]]
    table_rows       T_r ints (list, or a CPU tensor): rows of each local table
    tables_per_rank  P ints: T_q of every rank (global table ids in rank order)
    batch_per_rank   P ints: b_s, the samples owned by rank s, in rank order (B = Σ b_s)
    per_sample_weights  [num_indices] or None: w_k multiplies entry k (converted to float32)
    mode             "sum" or "mean" (Σ w_k·row_k / bag length; an empty bag gives zeros)
    out              optional [b_me, T, D] tensor (weight's dtype and device, contiguous) to
                     write into and return — from fco.empty_symmetric (nbytes: the largest
                     rank's), the peers store their vectors straight into it (fused impl on
                     CUDA: no landing copy). In place in eager calls without gradients (an out
                     that requires grad counts as one); elsewhere computed as usual and copied
                     into it
    → out            [b_me, T, D] in weight's dtype: out[i, toff_q + t] = pooled bag (t,
                     bstart_me + i) of rank q's table t
    The lists are the same on every rank except table_rows. CUDA: current device and stream,
    capturable once the shapes ran eagerly (workspace); CPU: the cpu transport. An index
    outside its table or bad offsets raise fco.FcoError (INVALID_ARGUMENT naming the global
    table and position) — on CPU from the call, on CUDA from comm.check_async_error() / the
    next call. Differentiable in weight and per_sample_weights (reverse all-to-all, then the
    embedding_bag backward; dense gradient).
    """
    for t, name in ((weight, "weight"), (indices, "indices"), (offsets, "offsets")):
        _common.require_tensor(t, _OP, name)
    if not isinstance(mode, str) or mode not in POOLING:  # a list: unhashable
        raise FcoError(_lib.INVALID_ARGUMENT, f"{_OP}: mode {mode!r} is not 'sum' or 'mean'")
    if per_sample_weights is not None:
        _common.require_tensor(per_sample_weights, _OP, "per_sample_weights")
        if per_sample_weights.dtype in (torch.float16, torch.bfloat16, torch.float64):
            per_sample_weights = per_sample_weights.float()
    gname, iid = _common.group_name(group), _common.impl_id(impl, IMPLS, _OP)
    args = (_ints(table_rows, "table_rows"), _ints(tables_per_rank, "tables_per_rank"),
            _ints(batch_per_rank, "batch_per_rank"), POOLING[mode], gname, iid)
    if _common.direct_ok(weight, indices, offsets, per_sample_weights, out=out):
        y = _run(weight, indices, offsets, per_sample_weights, *args, out=out)
        _common.written(out)
        return y
    _common.check_op_out(out, (weight, indices, offsets, per_sample_weights), _OP,
                         ("weight", "indices", "offsets", "per_sample_weights"))
    res = torch.ops.fco.embedding_alltoall(weight, indices, offsets, per_sample_weights, *args)
    if out is None:
        return res
    _common.check_out(out, res, res.shape, _OP)
    return out.copy_(res)


def workspace_bytes(weight, tables_per_rank, batch_per_rank, group=None, impl="auto"):
    """Workspace bytes per rank fco_embedding_alltoall needs (for comm.reserve()); the arguments
    are checked as fco.embedding_alltoall checks them."""
    dt = _check_weight(weight, _OP)
    tables_per_rank = tuple(_ints(tables_per_rank, "tables_per_rank"))
    batch_per_rank = tuple(_ints(batch_per_rank, "batch_per_rank"))
    iid = _common.impl_id(impl, IMPLS, _OP)
    comm = _comm.get(_common.group_name(group), weight.device)
    _check_splits(tables_per_rank, batch_per_rank, comm.size)
    out = ctypes.c_size_t()
    f = _lib.bind("fco_embedding_alltoall_workspace", [
        _lib.comm_t, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int64),
        ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)])
    _lib.check(f(comm.handle, _common.int_array(ctypes.c_int32, tables_per_rank),
                 _common.int_array(ctypes.c_int64, batch_per_rank), weight.shape[1], dt, iid,
                 ctypes.byref(out)),
               comm.handle, "fco_embedding_alltoall_workspace")
    return out.value
