"""host.py — what a Triton kernel needs from an fco communicator, on the host.

    st = fco.triton.device_state(comm)   # comm: fco.Communicator or a raw fco_comm_t handle
    st.addr        int: device address of the rank's fco_dev_rank_t (pass it to the kernel)
    st.rank, st.nranks, st.device
    fco.triton.ensure_workspace([comm], nbytes)   # collective growth (never while capturing)

The address comes from the C accessor

    fco_result_t fco_comm_device_state(fco_comm_t comm, void** dev_state, size_t* bytes,
                                       uint32_t* version);

(GPU transports; declared in include/fco.h, see docs/triton.md). When the loaded libfco lacks
it, device_state raises FcoError(UNSUPPORTED) saying so; a layout version or size other than
layout.py's raises FcoError(INTERNAL) (this binding and libfco disagree on dev.h).
Nothing here imports triton or needs a GPU, so CPU tests cover the argument checks.
"""
import ctypes
import operator

from .. import _lib
from .._lib import FcoError, int_arg  # int_arg: host.int_arg for the launchers
from . import layout

_ACCESSOR = "fco_comm_device_state"
_accessor = None


class DeviceState:
    """One rank's device state as a Triton kernel sees it (an int64 address + what the host
    knows). Valid until the communicator is destroyed; the address never changes (workspace
    growth rewrites the table in place), so it can be baked into a CUDA graph."""

    __slots__ = ("addr", "rank", "nranks", "handle", "device")

    def __init__(self, addr, rank, nranks, handle, device=None):
        self.addr, self.rank, self.nranks, self.handle, self.device = addr, rank, nranks, handle, device

    def __repr__(self):
        return (f"<fco.triton.DeviceState rank={self.rank}/{self.nranks} addr=0x{self.addr:x} "
                f"device={self.device}>")


def handle_of(comm):
    """The fco_comm_t (int) of an fco.Communicator or a raw handle; FcoError for anything else."""
    h = getattr(comm, "handle", comm) if not isinstance(comm, int) else comm
    if getattr(comm, "handle", 0) is None:
        raise FcoError(_lib.INVALID_USAGE, f"{comm!r} was destroyed (fco.shutdown)",
                       "fco.triton")
    if isinstance(h, ctypes.c_void_p):
        h = h.value
    if not isinstance(h, int) or isinstance(h, bool) or h <= 0:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"comm is {comm!r}; expected an fco.Communicator or an fco_comm_t handle "
                       "(a non-zero int)", "fco.triton")
    return h


def _bind_accessor():
    global _accessor
    if _accessor is None:
        L = _lib.lib()
        f = getattr(L, _ACCESSOR, None)
        if f is None:
            raise FcoError(_lib.UNSUPPORTED,
                           f"{_ACCESSOR} is not in {_lib.lib_path()}: this libfco cannot hand its "
                           "device state to Triton kernels (fco.triton needs `fco_result_t "
                           "fco_comm_device_state(fco_comm_t, void** dev_state, size_t* bytes, "
                           "uint32_t* version)`; rebuild libfco from a source that has it)",
                           "fco.triton")
        f.restype = _lib.result_t
        f.argtypes = [_lib.comm_t, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                      ctypes.POINTER(ctypes.c_uint32)]
        _accessor = f
    return _accessor


def check_layout(bytes_, version):
    """Raise FcoError(INTERNAL) when libfco's fco_dev_rank_t is not the one layout.py describes."""
    if int(version) != layout.LAYOUT_VERSION or int(bytes_) != layout.DEV_RANK_BYTES:
        raise FcoError(_lib.INTERNAL,
                       f"libfco's device state is layout version {int(version)}, "
                       f"{int(bytes_)} bytes; fco.triton was written for version "
                       f"{layout.LAYOUT_VERSION}, {layout.DEV_RANK_BYTES} bytes "
                       "(python/fco/triton/layout.py and src/cuda/dev.h disagree: update "
                       "layout.py)", _ACCESSOR)


def device_state(comm):
    """DeviceState of `comm` (fco.Communicator or fco_comm_t handle). Not collective."""
    h = handle_of(comm)
    f = _bind_accessor()
    ptr, nbytes, ver = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_uint32()
    _lib.check(f(h, ctypes.byref(ptr), ctypes.byref(nbytes), ctypes.byref(ver)), h, _ACCESSOR)
    check_layout(nbytes.value, ver.value)
    if not ptr.value:
        raise FcoError(_lib.INTERNAL, f"{_ACCESSOR} returned a NULL device state", _ACCESSOR)
    L = _lib.lib()
    r, n = ctypes.c_int(), ctypes.c_int()
    _lib.check(L.fco_comm_rank(h, ctypes.byref(r)), h, "fco_comm_rank")
    _lib.check(L.fco_comm_size(h, ctypes.byref(n)), h, "fco_comm_size")
    return DeviceState(ptr.value, r.value, n.value, h, getattr(comm, "device", None))


def mem_find(handle, ptr, nbytes):
    """(slot, offset, peer_table) of the symmetric buffer of the communicator `handle` that holds
    [ptr, ptr + nbytes) (fco_mem_find): slot −1 when none; peer_table the device address of the
    rank's table void* [FCO_MAX_SYMMETRIC][MAX_GPU_RANKS] of every rank's buffers (0: none, the
    cpu transport). Not collective."""
    slot, off, table = ctypes.c_int(), ctypes.c_size_t(), ctypes.c_void_p()
    _lib.check(_lib.lib().fco_mem_find(handle, ctypes.c_void_p(int(ptr)), int(nbytes),
                                       ctypes.byref(slot), ctypes.byref(off),
                                       ctypes.byref(table)), handle, "fco_mem_find")
    return slot.value, off.value, table.value or 0


def workspace_bytes(comm):
    h = handle_of(comm)
    out = ctypes.c_size_t()
    _lib.check(_lib.lib().fco_comm_workspace_bytes(h, ctypes.byref(out)), h,
               "fco_comm_workspace_bytes")
    return out.value


def ensure_workspace(comms, nbytes, capturing=False):
    """Make every comm's workspace hold at least nbytes per rank. Collective when it grows:
    every rank calls it with the same nbytes (ranks of one fco_comm_init_all world: pass them
    all; one reserve grows them together). Every rank holds the same workspace size (growth
    is collective), so every rank takes the same decision. While `capturing` a growth is
    refused (FcoError INVALID_USAGE): run once eagerly, or reserve, before capturing.
    nbytes: an int in 0..2^63-1, as Communicator.reserve takes it (a float, a str or a larger
    int raises INVALID_ARGUMENT: int() truncated 8192.7, ctypes wrapped 2^64 + 4096 to 4096)."""
    nbytes = int_arg(nbytes, "nbytes", 0, 2 ** 63 - 1, "fco.triton.ensure_workspace")
    handles = [handle_of(c) for c in comms]
    if not handles:
        raise FcoError(_lib.INVALID_ARGUMENT, "comms is empty", "fco.triton")
    if all(workspace_bytes(h) >= nbytes for h in handles):
        return
    if capturing:
        raise FcoError(_lib.INVALID_USAGE,
                       f"the fco workspace must grow to {nbytes} bytes per rank, which allocates "
                       "and cannot happen while a CUDA graph is captured: run the kernel once "
                       "eagerly (or comm.reserve(nbytes)) before capturing", "fco.triton")
    h = handles[0]
    _lib.check(_lib.lib().fco_comm_reserve(h, nbytes), h, "fco_comm_reserve")
    for h in handles[1:]:  # world comms grew with the first; others (one per thread) grow now
        if workspace_bytes(h) < nbytes:
            _lib.check(_lib.lib().fco_comm_reserve(h, nbytes), h, "fco_comm_reserve")


WAIT_NS_MAX = 1 << 20  # the waits' backoff cap: FCO_TRITON_WAIT_NS is clamped to 0..this


def wait_ns_arg(v, func):
    """A wait_ns= argument (the waits' backoff cap in ns) as the kernels' WAIT_NS: an int,
    clamped to 0..2^20 as FCO_TRITON_WAIT_NS is (fl.wait_ns_default); FcoError
    (INVALID_ARGUMENT) for anything but an int (a float, a str)."""
    try:
        i = operator.index(v)
    except TypeError:
        i = None
    if i is None or isinstance(v, bool):
        raise FcoError(_lib.INVALID_ARGUMENT, f"wait_ns {v!r} is not an int (ns, clamped to "
                       f"0..2^20)", func)
    return max(0, min(i, WAIT_NS_MAX))


def launch_spec(args, skip=()):
    """What Triton specialises a launch with these positional arguments on (one compiled
    kernel, with its own registers and shared memory, per value of it): per int its width
    (i32 / u32 / i64 / u64 by range) and, unless its position is in `skip` (the kernel's
    do_not_specialize), whether it is 1 and whether it is a multiple of 16; per pointer
    (anything with data_ptr()) its dtype and whether it is 16-byte aligned; tuples element by
    element. A cache of what a compiled kernel allows (occupancy) must be keyed on it: two
    launches with equal specs (and equal constexprs and options) run the same binary."""
    return tuple(_spec(v, i not in skip) for i, v in enumerate(args))


def _spec(v, special=True):
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        w = ("i32" if -2 ** 31 <= v < 2 ** 31 else "u32" if 0 <= v < 2 ** 32 else
             "i64" if -2 ** 63 <= v < 2 ** 63 else "u64")
        return (w, v % 16 == 0, v == 1) if special else (w,)
    if isinstance(v, (tuple, list)):
        return tuple(_spec(x, special) for x in v)
    if hasattr(v, "data_ptr"):
        return ("*", str(getattr(v, "dtype", "")), v.data_ptr() % 16 == 0)
    return type(v).__name__  # floats and the like: by type (Triton does not specialise them)


def kwargs_spec(kwargs):
    """launch_spec of keyword arguments: constexprs by value, tensors (prof) as pointers."""
    return tuple(sorted((k, _spec(v) if hasattr(v, "data_ptr") else str(v))
                        for k, v in kwargs.items()))


def dns_positions(kernel):
    """Positions of a @triton.jit kernel's do_not_specialize parameters (() when this Triton
    does not say: every int is then keyed on its value classes, a finer key)."""
    try:
        return frozenset(i for i, p in enumerate(kernel.params) if p.do_not_specialize)
    except (AttributeError, TypeError):
        return frozenset()


def blocks_per_rank(num_tiles, num_local, num_sms, per_sm, max_blocks=layout.SIG_SLOTS - 1):
    """Programs per rank of a persistent launch covering num_local ranks (local transport:
    all virtual ranks in ONE grid): all num_local·B programs co-resident (B ≤ per_sm·num_sms /
    num_local), at most one per tile, at most max_blocks and never more than the SIG_SLOTS − 1
    signal slots a rank has (one each), then lowered so every program gets the same number of
    tiles. FcoError(UNSUPPORTED) when not even one program per rank fits."""
    for name, v in (("num_tiles", num_tiles), ("num_local", num_local), ("num_sms", num_sms),
                    ("per_sm", per_sm), ("max_blocks", max_blocks)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise FcoError(_lib.INVALID_ARGUMENT, f"{name} is {v!r}; expected an int >= 1",
                           "fco.triton.blocks_per_rank")
    B = min(per_sm * num_sms // num_local, max_blocks, layout.SIG_SLOTS - 1, num_tiles)
    if B < 1:
        raise FcoError(_lib.UNSUPPORTED,
                       f"{per_sm * num_sms} co-resident programs ({per_sm} per SM × {num_sms} "
                       f"SMs) cannot give each of {num_local} ranks one program",
                       "fco.triton.blocks_per_rank")
    per = -(-num_tiles // B)
    return -(-num_tiles // per)


def programs_per_sm(n_regs, shared_bytes, num_warps, regs_per_sm=65536, smem_per_sm=233472,
                    threads_per_sm=2048, max_per_sm=32):
    """Co-resident programs per SM of a compiled Triton kernel (register allocation is per warp
    in units of 256). 0 when it does not fit at all. Every argument an int: n_regs and
    shared_bytes >= 0, num_warps 1..32 (a block has at most 1024 threads), the limits >= 1;
    FcoError(INVALID_ARGUMENT) otherwise."""
    f = "fco.triton.programs_per_sm"
    n_regs = int_arg(n_regs, "n_regs", 0, 2 ** 31 - 1, f)
    shared_bytes = int_arg(shared_bytes, "shared_bytes", 0, 2 ** 63 - 1, f)
    num_warps = int_arg(num_warps, "num_warps", 1, 32, f)
    regs_per_sm = int_arg(regs_per_sm, "regs_per_sm", 1, 2 ** 31 - 1, f)
    smem_per_sm = int_arg(smem_per_sm, "smem_per_sm", 1, 2 ** 63 - 1, f)
    threads_per_sm = int_arg(threads_per_sm, "threads_per_sm", 1, 2 ** 31 - 1, f)
    max_per_sm = int_arg(max_per_sm, "max_per_sm", 1, 2 ** 31 - 1, f)
    threads = 32 * num_warps
    by_threads = threads_per_sm // threads
    regs_warp = -(-max(n_regs, 1) * 32 // 256) * 256
    by_regs = regs_per_sm // (regs_warp * num_warps)
    by_smem = smem_per_sm // shared_bytes if shared_bytes else max_per_sm
    return max(0, min(by_threads, by_regs, by_smem, max_per_sm))


def check_prof(prof, device, name):
    """prof= (diagnostics): None or a contiguous torch.int64 tensor on the launch's device (the
    kernel stores 8 int64 per program at prof + pid·8); its size is checked once B is known."""
    if prof is None:
        return
    import torch

    if not isinstance(prof, torch.Tensor) or prof.dtype != torch.int64 or \
            prof.device != device or not prof.is_contiguous():
        what = (f"{prof.dtype} on {prof.device}" + ("" if prof.is_contiguous() else
                                                     ", not contiguous")
                if isinstance(prof, torch.Tensor) else type(prof).__name__)
        raise FcoError(_lib.INVALID_ARGUMENT, f"prof is {what}; expected a contiguous "
                       f"torch.int64 tensor on {device}", name)


def dev_ptr(addr, dtype=None):
    """An int address as an argument Triton passes as a pointer (an object with data_ptr())."""
    return _Ptr(int(addr), dtype)


class _Ptr:
    __slots__ = ("_addr", "dtype")

    def __init__(self, addr, dtype):
        import torch

        self._addr = addr
        self.dtype = dtype if dtype is not None else torch.uint64

    def data_ptr(self):
        return self._addr
