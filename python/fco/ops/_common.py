"""_common.py — what every fco torch op shares: dtype mapping, input checks that raise FcoError
with a message naming the op, argument and value, the group-name argument, impl parsing, the
current CUDA stream.

An op module (see allreduce.py) has: the ctypes prototype of its C function (_lib.bind), a
torch.library.custom_op whose arguments are tensors, the group *name* (process groups are not
op arguments) and an int impl; a fake impl; an autograd formula; a Python wrapper with a
docstring. Checks run in both the real and the fake impl, so torch.compile reports bad input
while tracing, and eager mode before any C call.
"""
import operator

import torch

from .. import _lib
from .._lib import FcoError

DTYPES = {torch.float32: _lib.F32, torch.float16: _lib.F16, torch.bfloat16: _lib.BF16}


def group_name(group):
    """The op argument naming a process group: "" for the default group (resolved when the op
    runs, so torch.compile traces no distributed state), else group.group_name."""
    if group is None:
        return ""
    if isinstance(group, str):
        return group
    try:
        return group.group_name
    except AttributeError:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"group {group!r} is not a torch.distributed ProcessGroup, a group name "
                       "or None (the default group)") from None


INT32_MAX = 2 ** 31 - 1


def impl_id(impl, names, op):
    """impl as an int: "auto" → FCO_IMPL_AUTO (-1), a name from `names`, or an int -1..2^31-1
    (the C impl argument is an int: ctypes would wrap a larger one, 2^32 + 1 running impl 1; the
    Python-only ids below -1, such as "triton", are taken by name only)."""
    if isinstance(impl, bool):
        raise FcoError(_lib.INVALID_ARGUMENT, f"{op}: impl {impl!r} is not an int or a name")
    if not isinstance(impl, (int, str)):
        try:  # numpy ints, 0-d integer tensors: as every other host int argument
            impl = operator.index(impl)
        except TypeError:
            pass
    if isinstance(impl, int):
        if not _lib.IMPL_AUTO <= impl <= INT32_MAX:
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"{op}: impl {impl} is not -1 ('auto'), an int in 0..2^31-1 or one "
                           f"of {sorted(names)}")
        return impl
    if impl == "auto":
        return _lib.IMPL_AUTO
    if isinstance(impl, str) and impl in names:  # a list or dict: unhashable, no TypeError
        return names[impl]
    raise FcoError(_lib.INVALID_ARGUMENT,
                   f"{op}: impl {impl!r} is not 'auto', an int or one of {sorted(names)}")


def raw_impl(impl, op, extra=()):
    """The torch.ops.fco.* kernels' (real and fake) check of their impl argument, which their
    schema takes as a 64-bit int and ctypes would wrap into the C int (2^32 + 1 running impl 1):
    -1 (auto), 0..2^31-1, or one of `extra` (Python-only ids such as IMPL_TRITON)."""
    if isinstance(impl, int) and not (_lib.IMPL_AUTO <= impl <= INT32_MAX or impl in extra):
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: impl {impl} is not -1 (auto) or an int in 0..2^31-1")


def fco_dtype(t, op, arg):
    dt = DTYPES.get(t.dtype)
    if dt is None:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} has dtype {t.dtype}; fco supports torch.float32, "
                       "torch.float16 and torch.bfloat16")
    return dt


def require_tensor(t, op, arg):
    """The wrappers' first check, so a non-tensor gets FcoError rather than a schema error."""
    if not isinstance(t, torch.Tensor):
        raise FcoError(_lib.INVALID_ARGUMENT, f"{op}: {arg} is a {type(t).__name__}, not a Tensor")


def check_tensor(t, op, arg):
    """A dense, contiguous CPU or CUDA tensor of an fco dtype; returns the fco dtype."""
    require_tensor(t, op, arg)
    if t.device.type not in ("cpu", "cuda", "meta"):
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} is on {t.device}; fco runs on CUDA (nccl transport) and CPU "
                       "(cpu transport) tensors")
    if t.layout != torch.strided:
        raise FcoError(_lib.INVALID_ARGUMENT, f"{op}: {arg} has layout {t.layout}, not strided")
    dt = fco_dtype(t, op, arg)
    if not t.is_contiguous():
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} is not contiguous (shape {tuple(t.shape)}, stride "
                       f"{tuple(t.stride())}); call .contiguous() first")
    return dt


def check_current_device(t, op, arg):
    """fco runs one process per GPU: a CUDA tensor must be on the current device."""
    if t.device.type == "cuda":
        cur = torch.cuda.current_device()
        if t.device.index != cur:
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"{op}: {arg} is on {t.device} but the current CUDA device is "
                           f"cuda:{cur} (fco runs one process per GPU: "
                           "torch.cuda.set_device(local_rank))")


_DIRECT = _lib.env_flag("FCO_TORCH_DIRECT", True)  # 0 / 1; another value: warned, on


def direct_ok(*tensors, out=None):
    """May an eager wrapper call the op's kernel directly instead of through the dispatcher?

    torch.ops.fco.* costs ~7 µs of dispatch per call (custom_op + autograd wrapper), as much as
    a small fused collective on the GPU. The wrappers skip it exactly when the dispatcher would
    add nothing: not tracing (torch.compile), plain CPU/CUDA tensors (no subclass such as
    FakeTensor or DTensor), no gradient to record, no torch-function or dispatch mode, no
    profiler (which should see fco::<op>). FCO_TORCH_DIRECT=0 turns it off.
    `tensors`: the inputs (None entries skipped); `out`: the caller's out= (None: none), checked
    as they are — an out that requires grad needs the op + copy_, which autograd records (or
    refuses, for a leaf) — and writable (below).
    """
    if not _DIRECT or torch.compiler.is_compiling() or torch.autograd.profiler._is_profiler_enabled:
        return False
    grad = torch.is_grad_enabled()
    for t in tensors + (out,):
        if t is None:
            continue
        if type(t) is not torch.Tensor or (grad and t.requires_grad) or \
                t.device.type not in ("cpu", "cuda"):
            return False
    if not writable(out):  # after the type checks: out is a tensor here (a str reaches check_out)
        return False
    return not (torch._C._is_torch_function_mode_enabled() or
                torch._C._len_torch_dispatch_stack() > 0)


def writable(t):
    """May the direct path write into t, a caller's tensor (allreduce_'s t, an out=; None: none)?
    Not an inference tensor outside torch.inference_mode(): torch refuses in-place updates to
    those — an out= then takes the dispatcher path, whose copy_ raises torch's error (allreduce_
    raises FcoError: a custom op's mutation is not refused)."""
    return t is None or not t.is_inference() or torch.is_inference_mode_enabled()


def written(t):
    """After the direct path wrote into t (a caller's tensor; None: nothing was): bump its
    version counter, as torch's in-place ops do, so autograd raises where it saved t before (it
    read the new values silently: wrong gradients). ~0.25 µs; a no-op for inference tensors."""
    if t is not None:
        torch.autograd.graph.increment_version(t)


try:
    _raw_stream = torch._C._cuda_getCurrentRawStream  # what inductor's generated code uses
except AttributeError:  # pragma: no cover — a torch without it
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


def stream_of(t):
    """cudaStream_t (as int) of the current stream on t's device; None for CPU tensors. Under
    CUDA-graph capture this is the capturing stream, so fco's kernels are captured."""
    if t.device.type == "cuda":
        return _raw_stream(t.device.index)
    return None


def check_like(t, ref, op, arg, ref_arg):
    """t has ref's dtype and device (the ops take one dtype for all their float tensors)."""
    if t.dtype != ref.dtype:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} has dtype {t.dtype} but {ref_arg} has {ref.dtype}; they "
                       "must match")
    if t.device != ref.device:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} is on {t.device} but {ref_arg} is on {ref.device}")


def check_index(t, op, arg, ref):
    """A dense, contiguous int32/int64 tensor on ref's device (indices, offsets, counts)."""
    require_tensor(t, op, arg)
    if t.layout != torch.strided:
        raise FcoError(_lib.INVALID_ARGUMENT, f"{op}: {arg} has layout {t.layout}, not strided")
    if t.dtype not in (torch.int32, torch.int64):
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} has dtype {t.dtype}; expected torch.int32 or torch.int64")
    if t.device != ref.device:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} is on {t.device} but the data is on {ref.device}")
    if not t.is_contiguous():
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"{op}: {arg} is not contiguous (shape {tuple(t.shape)}, stride "
                       f"{tuple(t.stride())}); call .contiguous() first")


def check_out(out, like, shape, op):
    """An `out=` tensor: dense, contiguous, `like`'s dtype and device, shape `shape`."""
    require_tensor(out, op, "out")
    if out.dtype != like.dtype or out.device != like.device or tuple(out.shape) != tuple(shape) \
            or not out.is_contiguous():
        raise bad(op, f"out is {out.dtype} {tuple(out.shape)} on {out.device} "
                      f"(contiguous: {out.is_contiguous()}); expected a contiguous {like.dtype} "
                      f"tensor of shape {tuple(shape)} on {like.device}")


def check_no_overlap(out, tensors, op, names):
    """out shares no byte with any of `tensors` (contiguous, so a tensor's bytes are one range;
    None entries skipped); `names` name them in the error."""
    lo = out.data_ptr()
    hi = lo + out.numel() * out.element_size()
    for t, name in zip(tensors, names):
        if t is None or t.device != out.device or not t.numel() or lo == hi:
            continue
        tlo = t.data_ptr()
        if tlo < hi and lo < tlo + t.numel() * t.element_size():
            raise bad(op, f"out overlaps {name}; give a separate tensor")


def check_op_out(out, tensors, op, names):
    """The dispatcher path's `out=` (autograd, a profiler, FCO_TORCH_DIRECT=0): refused before the
    op runs where it shares bytes with an input, as libfco refuses it on the direct path — the
    result would be right, but copied over an input (one autograd saved for the backward, say).
    Not checked while torch.compile traces (fake tensors have no addresses) nor for tensor
    subclasses; None entries of `tensors` skipped."""
    if out is None or type(out) is not torch.Tensor or torch.compiler.is_compiling():
        return
    plain = [(t, n) for t, n in zip(tensors, names) if type(t) is torch.Tensor]
    check_no_overlap(out, [t for t, _ in plain], op, [n for _, n in plain])


def check_ints(values, op, arg, shown=None):
    """values (a list of host ints; SymInts under torch.compile) holds only ints: a float such as
    2.0 raises INVALID_ARGUMENT naming `arg` (and `shown`, the caller's value, when values is a
    flattened copy of it). One sum, no scan: a sum of ints is an int, a float anywhere makes it
    a float."""
    try:
        s = sum(values)
        if not isinstance(s, (int, torch.SymInt)):
            operator.index(s)  # numpy ints, 0-d integer tensors
    except TypeError:
        odd = next((v for v in values if not isinstance(v, (int, torch.SymInt))), None)
        raise bad(op, f"{arg} {list(values) if shown is None else shown!r} holds {odd!r} "
                  f"({type(odd).__name__}); expected ints") from None


def bad(op, msg):
    """The FcoError (INVALID_ARGUMENT) of a failed check; callers build msg only on failure
    (`if not ok: raise bad(op, f"...")`): f-strings cost µs on the hot path."""
    return FcoError(_lib.INVALID_ARGUMENT, f"{op}: {msg}")


def ptr(t):
    """data_ptr() for ctypes; None for an empty tensor (the C ops accept NULL there)."""
    return t.data_ptr() if t.numel() else None


def raise_last(r, handle, func):
    """FcoError of a failed C call on communicator `handle`, with libfco's message."""
    raise FcoError(r, _lib.last_error(handle) or _lib.result_string(r), func)


_ARRAYS = {}


def int_array(ctype, values):
    """A ctypes array of the tuple `values`, cached by value: the ops pass the same split
    lists every call, so each array is built once (a few µs otherwise). Never mutated."""
    key = (ctype, values)
    arr = _ARRAYS.get(key)
    if arr is None:
        if len(_ARRAYS) > 256:
            _ARRAYS.clear()
        arr = (ctype * max(len(values), 1))(*values)
        _ARRAYS[key] = arr
    return arr


def process_group(group_name):
    """The ProcessGroup an op's group_name names ("" = the default group)."""
    import torch.distributed as dist

    from .. import _comm
    if not dist.is_available() or not dist.is_initialized():
        raise FcoError(_lib.INVALID_USAGE,
                       "torch.distributed is not initialized: call "
                       "torch.distributed.init_process_group() (and fco.init()) first")
    return _comm._resolve_group(group_name)


def all_to_all(inp, out_splits, in_splits, group_name, trailing=()):
    """torch.distributed.all_to_all_single along dim 0 (splits in rows) on the op's group, for
    the backward passes (a new output tensor)."""
    import torch.distributed as dist

    out = inp.new_empty((sum(out_splits),) + tuple(trailing))
    dist.all_to_all_single(out, inp.contiguous(), list(out_splits), list(in_splits),
                           group=process_group(group_name))
    return out


def rank_size(group_name, device=None):
    """(rank, size) in the group: from its communicator when one exists, else from
    torch.distributed; never creates a communicator (checks run before any collective)."""
    if device is not None:
        from .. import _comm
        c = _comm._fast.get((group_name, device))
        if c is not None:
            return c.rank, c.size
    import torch.distributed as dist

    pg = process_group(group_name)
    return dist.get_rank(pg), dist.get_world_size(pg)
