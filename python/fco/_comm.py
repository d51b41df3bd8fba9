"""_comm.py — fco communicators for torch.distributed process groups.

One communicator per (process group, device): CUDA tensors go through a communicator on the
nccl transport (one process per GPU, on torch.cuda.current_device()), CPU tensors through one
on the cpu transport (POSIX shared memory between the processes of one host), so the same code
runs under gloo on a machine without GPU.

Bootstrap: group rank 0 calls fco_get_unique_id, the 256-byte id is broadcast over the group
with its own backend (a uint8 tensor), every rank calls fco_comm_init. This is collective: every
rank of the group must call init() (or its first fco op on that device) in the same order.
Communicators are cached per (group name, device) and destroyed by shutdown() or at exit.
"""
import atexit
import ctypes
import operator
import threading
import warnings

import torch
import torch.distributed as dist

from . import _lib
from ._lib import FcoError

_comms = {}  # (group_name, device_key) -> Communicator
_fast = {}   # (group_name as the op got it, torch.device of the tensor) -> Communicator
_lock = threading.RLock()
_atexit_registered = False


class Communicator:
    """An fco_comm_t for one process group on one device. Made by fco.init()."""

    def __init__(self, handle, group_name, device, rank, size, transport):
        self.handle = handle  # int (the fco_comm_t pointer), passed straight to ctypes calls
        self.group_name = group_name
        self.device = device
        self.rank = rank
        self.size = size
        self.transport = transport  # "nccl" or "cpu"
        self._nsym = 0         # live _SymBuffer objects (tensors of empty_symmetric)
        self._deferred = None  # cpu: the handle destroy() left for the last buffer to free
        self._cfg = (0, 0, False)  # (timeout_ms, max_workspace_bytes, debug) it was made with

    def __repr__(self):
        state = "destroyed" if self.handle is None else f"0x{self.handle:x}"
        return (f"<fco.Communicator group={self.group_name!r} device={self.device} "
                f"rank={self.rank}/{self.size} transport={self.transport} {state}>")

    def _h(self):
        if self.handle is None:
            raise FcoError(_lib.INVALID_USAGE, f"{self!r} was destroyed (fco.shutdown)")
        return self.handle

    def _not_capturing(self, fn):
        """Collective setup steps allocate: inside a CUDA graph capture they would break it (and
        on nccl fail past the gate, the peers waiting in NCCL). libfco refuses them only where
        the device's default streams tell a capture; torch captures on its own non-blocking
        streams, which it knows."""
        if self.transport != "cpu" and torch.cuda.is_current_stream_capturing():
            raise FcoError(_lib.INVALID_USAGE,
                           f"{fn}: the current stream is being captured into a CUDA graph, and "
                           "this allocates: call it before capturing", fn)

    def last_error(self):
        return _lib.last_error(self.handle)

    def last_plan(self):
        """What the last successful op on this communicator ran (fco_last_plan): "<op> impl <n>"
        (AUTO resolved) plus the GPU launcher's detail; "" before any op or after a failed one."""
        return _lib.last_plan(self.handle)

    def reserve(self, nbytes):
        """Grow the symmetric workspace to at least nbytes per rank (collective: every rank,
        same bytes). Call it before capturing a CUDA graph when the captured ops' shapes were
        not run eagerly first (the first eager call of a shape grows it on its own).
        nbytes: an int in 0..2^63-1 (a float, a str or a larger int raises INVALID_ARGUMENT:
        int() truncated 2.5, ctypes wrapped 2^64 to 0)."""
        h = self._h()
        n = _lib.int_arg(nbytes, "nbytes", 0, 2 ** 63 - 1, "reserve")
        if n > self.workspace_bytes():
            self._not_capturing("fco_comm_reserve")
        _lib.check(_lib.lib().fco_comm_reserve(h, n), h, "fco_comm_reserve")

    def workspace_bytes(self):
        h = self._h()
        out = ctypes.c_size_t()
        _lib.check(_lib.lib().fco_comm_workspace_bytes(h, ctypes.byref(out)), h,
                   "fco_comm_workspace_bytes")
        return out.value

    def check_async_error(self):
        """Raise FcoError when the device reported an error (e.g. FCO_ERR_TIMEOUT: a peer never
        signalled). Does not wait for the stream: synchronize first to see the latest ops."""
        h = self._h()
        _lib.check(_lib.lib().fco_comm_get_async_error(h), h, "fco_comm_get_async_error")

    def empty_symmetric(self, shape, dtype, nbytes=None):
        """A zero-filled tensor in a symmetric buffer of this communicator (fco_mem_alloc): passed
        as `out=` to fco.gemm_alltoall / fco.embedding_alltoall, the peers store their rows
        straight into it (no staging in the workspace, no landing copy: 8-14 % on short-bag
        embedding workloads, 7 % on the fine-grained MoE combine, 2×H200).
        Collective: every rank of the group calls it, in the same order, with the same byte
        size: `nbytes` (default: the tensor's bytes, at least 1; give the largest when shapes differ
        between ranks, e.g. outputs of per-rank batch sizes). The buffer is freed (a device
        synchronisation) when the tensor and every view of it are gone, or with the
        communicator. On the cpu transport an ordinary host buffer (the CPU ops copy anyway).
        Outliving the communicator (fco.shutdown, destroy): on the nccl transport destroy frees
        the buffer and warns (RuntimeWarning, how many buffers tensors still view): such a
        tensor points at freed device memory and must not be used; drop it first. On the cpu
        transport destroy leaves the C communicator to the last such buffer, which frees it
        when it goes: the tensor stays valid (no longer symmetric)."""
        h = self._h()
        dtype = torch.float32 if dtype is None else dtype
        if not isinstance(dtype, torch.dtype):
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"empty_symmetric: dtype {dtype!r} is not a torch.dtype")
        dims = shape if isinstance(shape, (tuple, list, torch.Size)) else (shape,)
        try:
            shape = tuple(operator.index(x) for x in dims)
            nbytes = None if nbytes is None else operator.index(nbytes)
        except (TypeError, RuntimeError):  # RuntimeError: a tensor with no value (meta)
            raise FcoError(_lib.INVALID_ARGUMENT, f"empty_symmetric: shape {dims!r} and nbytes "
                           f"{nbytes!r} must be integers") from None
        if any(d < 0 for d in shape):
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"empty_symmetric: shape {shape} has a negative dimension")
        need = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
        nbytes = max(need, 1) if nbytes is None else nbytes  # a zero-size tensor: 1 byte
        if nbytes < need or nbytes <= 0:
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"empty_symmetric: nbytes {nbytes} cannot hold {shape} {dtype} "
                           f"({need} bytes; and at least 1)")
        self._not_capturing("fco_mem_alloc")
        p = ctypes.c_void_p()
        _lib.check(_lib.lib().fco_mem_alloc(h, nbytes, ctypes.byref(p)), h, "fco_mem_alloc")
        buf = _SymBuffer(self, h, p.value, nbytes)
        if self.transport == "cpu":
            raw = torch.frombuffer(buf.host_array(), dtype=torch.uint8)
        else:
            raw = torch.as_tensor(buf, device=self.device)
        return raw[:need].view(dtype).view(shape)

    def destroy(self):
        """Free the communicator (destroy it on every rank). Idempotent. Buffers of
        empty_symmetric that tensors still view: see empty_symmetric (cpu: freed with the last
        of them, the C communicator with them; nccl: freed now, with a RuntimeWarning)."""
        if self.handle is None:
            return
        h, self.handle = self.handle, None
        with _lock:
            for cache in (_comms, _fast):
                for k, v in list(cache.items()):
                    if v is self:
                        del cache[k]
        if self._nsym:
            if self.transport == "cpu":  # host memory: the last buffer destroys the comm
                self._deferred = h
                return
            warnings.warn(f"{self!r}: {self._nsym} symmetric buffer(s) of empty_symmetric are "
                          "still viewed by tensors; destroy frees them now: those tensors point "
                          "at freed device memory and must not be used", RuntimeWarning,
                          stacklevel=2)
        _lib.check(_lib.lib().fco_comm_destroy(h), None, "fco_comm_destroy")


class _SymBuffer:
    """Owner of one fco_mem_alloc buffer: the tensors made from it keep it alive (torch holds
    the __cuda_array_interface__ object, torch.frombuffer the host array, which holds this);
    freed with fco_mem_free when the last one goes, unless the communicator went first (its
    destroy freed the buffer; on the cpu transport destroy leaves that to the last buffer,
    which then destroys the C communicator: Communicator._deferred)."""

    def __init__(self, comm, handle, ptr, nbytes):
        self.comm, self.handle, self.ptr, self.nbytes = comm, handle, ptr, nbytes
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}
        comm._nsym += 1

    def host_array(self):
        arr = (ctypes.c_uint8 * self.nbytes).from_address(self.ptr)
        arr._fco_owner = self  # ctypes instances keep attributes in their __dict__
        return arr

    def __del__(self):
        comm, h = self.comm, self.handle
        comm._nsym -= 1
        try:
            if self.ptr and h in (comm.handle, comm._deferred):
                _lib.lib().fco_mem_free(h, self.ptr)
            if comm._deferred == h and not comm._nsym:  # the last one: the deferred destroy
                comm._deferred = None
                _lib.lib().fco_comm_destroy(h)
        except Exception:  # interpreter shutdown: the library may be gone
            pass
        self.ptr = None


def _process_group(group):
    """The ProcessGroup of `group`: None or "" (the ops' name of the default group) → the default
    group, a str → the group of that name, else a ProcessGroup (anything else: FcoError)."""
    if group is None or isinstance(group, str):
        return _resolve_group(group or "")
    if not isinstance(getattr(group, "group_name", None), str):
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"group {group!r} is not a torch.distributed ProcessGroup, a group name "
                       "or None (the default group)")
    return group


def _group_name(group):
    return _process_group(group).group_name


def _resolve_group(group_name):
    if group_name == "":
        return dist.distributed_c10d._get_default_group()
    try:
        return dist.distributed_c10d._resolve_process_group(group_name)
    except (RuntimeError, ValueError, KeyError) as e:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"group name {group_name!r} names no process group ({e})") from None


def _device_key(device):
    """'cpu' or 'cuda:<index>' (index resolved to the current device)."""
    if device.type == "cuda":
        idx = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{idx}"
    if device.type == "cpu":
        return "cpu"
    raise FcoError(_lib.INVALID_ARGUMENT,
                   f"device {device} is not supported: fco runs on CUDA (nccl transport) or CPU "
                   "(cpu transport) tensors")


def _default_device(group):
    backend = str(dist.get_backend(group))
    if torch.cuda.is_available() and "nccl" in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _broadcast_id(uid, group, err):
    """Broadcast the unique id from group rank 0 over the group's own backend, with a leading
    status byte, so a failure on rank 0 is raised on every rank instead of leaving them in
    fco_comm_init until the timeout."""
    backend = str(dist.get_backend(group))
    dev = "cpu"
    if "gloo" not in backend and "nccl" in backend:
        dev = torch.device("cuda", torch.cuda.current_device())
    buf = torch.tensor([0 if err is None else 1] + list(bytes(uid)), dtype=torch.uint8, device=dev)
    dist.broadcast(buf, src=dist.get_global_rank(group, 0), group=group)
    data = bytes(buf.cpu().tolist())
    if err is not None:
        raise err
    if data[0] != 0:
        raise FcoError(_lib.SYSTEM, "group rank 0 could not make an fco unique id (see its "
                       "error)", "fco_get_unique_id")
    ctypes.memmove(uid, data[1:], _lib.UNIQUE_ID_BYTES)


def init(group=None, device=None, *, timeout_ms=0, max_workspace_bytes=0, debug=False):
    """The fco communicator of `group` (a ProcessGroup or its name; None or "": the default
    process group) for tensors on `device` (None: the current CUDA device when the group's
    backend is nccl, else cpu).

    Collective over the group on its first call for a (group, device); cached afterwards.
    CUDA devices use the nccl transport on that GPU (one process per GPU: the device must be
    torch.cuda.current_device()); CPU uses the cpu transport (all ranks on one host).
    Call it before torch.compile'd code or CUDA-graph capture runs its first fco op (an op
    without a communicator creates one, which broadcasts over the group).
    timeout_ms / max_workspace_bytes / debug: fco_config_t fields (0 = default / env); ints in
    0..2^31-1 / 0..2^63-1, else FcoError (INVALID_ARGUMENT). They configure the communicator
    when this call creates it: given (not 0 / False) for a (group, device) whose communicator
    exists with other values (made by an earlier fco.init or by an op, which uses the
    defaults), FcoError (INVALID_USAGE) — they cannot change; fco.shutdown(group) first.
    """
    timeout_ms = _lib.int_arg(timeout_ms, "timeout_ms", 0, 2 ** 31 - 1, "fco.init")
    max_workspace_bytes = _lib.int_arg(max_workspace_bytes, "max_workspace_bytes", 0,
                                        2 ** 63 - 1, "fco.init")
    debug = bool(debug)
    if not dist.is_available() or not dist.is_initialized():
        raise FcoError(_lib.INVALID_USAGE,
                       "torch.distributed is not initialized: call "
                       "torch.distributed.init_process_group() before fco.init()", "fco.init")
    pg = _process_group(group)
    dev = torch.device(device) if device is not None else _default_device(pg)
    comm = _get(pg.group_name, _device_key(dev), pg, timeout_ms, max_workspace_bytes, debug)
    asked = (timeout_ms, max_workspace_bytes, debug)
    if asked != (0, 0, False) and asked != comm._cfg:
        raise FcoError(_lib.INVALID_USAGE,
                       f"{comm!r} exists with timeout_ms={comm._cfg[0]}, max_workspace_bytes="
                       f"{comm._cfg[1]}, debug={comm._cfg[2]} (an earlier fco.init, or an op's "
                       "defaults); its config cannot change: call fco.shutdown(group) first, or "
                       "fco.init before the group's first op", "fco.init")
    return comm


def empty_symmetric(shape, dtype=None, device=None, group=None, nbytes=None):
    """fco.empty_symmetric: Communicator.empty_symmetric on the communicator of (group, device)
    — device default: the current CUDA device when CUDA is available, else CPU. Collective."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
            else torch.device("cpu")
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    name = "" if group is None else _group_name(group)
    return get(name, device).empty_symmetric(shape, dtype, nbytes)


def get(group_name, device):
    """The communicator for (group name, tensor device); created (collectively) on first use.
    group_name "" is the default group. The hot path of every op: one dict lookup."""
    comm = _fast.get((group_name, device))
    if comm is not None:
        return comm
    if not dist.is_available() or not dist.is_initialized():
        raise FcoError(_lib.INVALID_USAGE,
                       "torch.distributed is not initialized: call "
                       "torch.distributed.init_process_group() (and fco.init()) first")
    key_dev = _device_key(device)
    pg = _resolve_group(group_name)
    # "" (the default group) shares the communicator of its real name with fco.init()
    comm = _get(pg.group_name, key_dev, pg, 0, 0, False)
    with _lock:
        if comm.handle is not None:
            _fast[(group_name, device)] = comm
    return comm


def _get(group_name, key_dev, pg, timeout_ms, max_ws, debug):
    global _atexit_registered
    with _lock:
        comm = _comms.get((group_name, key_dev))
        if comm is not None:
            return comm
        if key_dev.startswith("cuda") and torch.cuda.is_current_stream_capturing():
            raise FcoError(_lib.INVALID_USAGE,
                           f"no fco communicator for group {group_name!r} on {key_dev} yet, and "
                           "the stream is being captured into a CUDA graph (creating one "
                           "broadcasts over the group): call fco.init(group) and run each op "
                           "once before capturing", "fco.init")
        rank, size = dist.get_rank(pg), dist.get_world_size(pg)
        L = _lib.lib()
        if key_dev == "cpu":
            transport, dev_index = _lib.TRANSPORT_CPU, -1
        else:
            dev_index = int(key_dev.split(":")[1])
            if dev_index != torch.cuda.current_device():
                raise FcoError(_lib.INVALID_ARGUMENT,
                               f"tensor on {key_dev} but the current CUDA device is "
                               f"cuda:{torch.cuda.current_device()}: fco runs one process per "
                               "GPU; call torch.cuda.set_device(local_rank) first", "fco.init")
            transport = _lib.TRANSPORT_NCCL
        uid, err = _lib.UniqueId(), None
        if rank == 0:
            try:
                _lib.check(L.fco_get_unique_id(ctypes.byref(uid)), None, "fco_get_unique_id")
            except FcoError as e:
                err = e
        _broadcast_id(uid, pg, err)
        cfg = _lib.config(transport=transport, device=dev_index, timeout_ms=int(timeout_ms),
                          max_workspace_bytes=int(max_ws), debug=1 if debug else 0)
        h = _lib.comm_t()
        _lib.check(L.fco_comm_init(ctypes.byref(h), size, rank, ctypes.byref(uid),
                                   ctypes.byref(cfg)), None, "fco_comm_init")
        t = ctypes.c_int()
        L.fco_comm_transport(h, ctypes.byref(t))
        device = torch.device("cpu") if key_dev == "cpu" else torch.device(key_dev)
        comm = Communicator(h.value, group_name, device, rank, size,
                            L.fco_transport_name(t.value).decode())
        comm._cfg = (int(timeout_ms), int(max_ws), bool(debug))  # fco.init compares them
        _comms[(group_name, key_dev)] = comm
        if not _atexit_registered:
            atexit.register(_shutdown_at_exit)
            _atexit_registered = True
        return comm


def shutdown(group=None):
    """Destroy fco communicators: those of `group` (a ProcessGroup or its name; "", the ops'
    name of the default group, is the default group), or all when group is None. Call it on
    every rank before torch.distributed.destroy_process_group(); it also runs at exit."""
    with _lock:
        if group is None:
            comms = set(_comms.values())
        else:  # a name other than "" is taken as is: it may outlive its process group
            name = group if isinstance(group, str) and group else _group_name(group)
            comms = {c for (g, _), c in _comms.items() if g == name}
            # ("", dev) aliases of the default group go with it.
    first = None
    for c in comms:
        try:
            c.destroy()
        except FcoError as e:  # keep destroying the others, report the first failure
            first = first or e
    if first is not None:
        raise first


def _shutdown_at_exit():
    try:
        shutdown()
    except Exception as e:  # noqa: BLE001 — nothing to raise to at exit
        import sys
        print(f"fco: at exit: {e}", file=sys.stderr)


def last_plan(group=None, device=None):
    """Communicator.last_plan of the communicator of (group, device) — device default as in
    fco.init — e.g. "gemv_allreduce impl 1 ..."; "" when that communicator does not exist yet
    (this never creates one) or ran no op."""
    if not dist.is_available() or not dist.is_initialized():
        return ""
    pg = _process_group(group)
    dev = torch.device(device) if device is not None else _default_device(pg)
    with _lock:
        comm = _comms.get((pg.group_name, _device_key(dev)))
    return comm.last_plan() if comm is not None else ""


def communicators():
    """The live communicators (for inspection)."""
    with _lock:
        return sorted(set(_comms.values()), key=lambda c: (c.group_name, str(c.device)))
