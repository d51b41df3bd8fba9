"""language.py — @triton.jit device helpers over an fco rank's device state (src/cuda/dev.h's
fco_dev_rank_t), so a Triton kernel shares the communicator with fco's C kernels: the same
symmetric workspace, peer table, epoch-numbered signals, timeout rule and async error record.

    import fco.triton.language as fl
    @triton.jit
    def k(dev, ...):                 # dev: the int64 address from fco.triton.device_state(comm)
        me, P = fl.rank(dev), fl.world_size(dev)
        e = fl.call_epoch(dev)       # this call's epoch (calls completed + 1)
        fl.epoch_guard(dev, op)      # the 2^32-call limit of the signal values (dev.h)
        ...                          # fl.peer_ptr / tl.store: push tiles into peers' workspace
        fl.signal_all(dev, slot, fl.sig_value(e, j))          # release, system scope
        ok = fl.wait_all(dev, slot, fl.sig_value(e, j), op)   # acquire, bounded by timeout_ns
        fl.epoch_end(dev, e, blocks_per_rank)                 # the last block advances epoch

`dev` is always an int64 scalar (a device address); fields are read at their byte offsets
(layout.py). Semantics follow src/cuda/prims.cuh:
  signal    tl.debug_barrier (bar.sync: every thread's earlier stores are ordered before
            thread 0), then thread 0 does an atomic exchange with release semantics at system
            scope (Triton lowers a scalar atomic to thread 0; release is cumulative).
  wait      every thread loads the flag with ld.acquire.sys once; while it is short, only the
            first warp polls (ld.relaxed.sys: no L1 invalidation per poll), with a nanosleep
            backoff (32 ns doubling up to WAIT_NS, 512 by default; 0: spin without sleeping),
            and once it arrived every thread loads it again with ld.acquire.sys (so a thread's
            own acquire covers its later reads); the loop decision is made block-uniform with
            bar.red. A spinning program then costs the memory system one request per backoff,
            not one per thread and spin: the peers' stores and flags land in the same L2. The
            bound is timeout_ns of the table (0: 30 s) measured with %globaltimer; on expiry
            FCO_ERR_TIMEOUT goes into the async error record (first error wins: atomicCAS at
            system scope, then the details, then `op` with release). Every 256 polls the
            record is polled so a wait gives up once another wait failed.
  reads of peer-written data use cache_modifier=".cg" (L2), as the C kernels' __ldcg.
  epoch_end bar.sync; thread 0 counts the block in `arrive`; the last block of the rank resets
            it and stores the new epoch (seen by the next kernel on the stream).
All helpers that synchronise the block (signal*, wait*, epoch_end, record_error, block_all/any)
must be reached by every program's threads alike: call them outside data-dependent branches, or
under conditions that are scalars of the program (uniform), as in the examples.

Under TRITON_INTERPRET=1 (Triton's CPU interpreter: one "thread" per program, programs run one
after another) the inline PTX is replaced by equivalents: acquire and polling loads by atomic
adds of 0, %globaltimer by time.monotonic_ns, bar.red by the identity, nanosleep and %smid by
nothing / 0. The choice is made at import from the
environment, as Triton makes its own.
"""
import os
import time
import warnings

import triton
import triton.language as tl

from . import layout as L


def interpret_env():
    """Whether Triton interprets, as Triton itself reads TRITON_INTERPRET (its knob, so not
    fco's 0 / 1 rule): triton.knobs (1 / true / on / yes, any case; anything else off), or "1"
    only in a Triton before knobs. fco's equivalents must be on exactly when Triton interprets
    (was: anything but "" / "0", so "false" or "off" turned them on for compiled kernels)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


INTERPRET = interpret_env()

if INTERPRET:
    # Triton 3.6's interpreter turns a program-id-derived scalar (a 1-element array) into a
    # Python int with int(array), which numpy >= 2 refuses for 1-d arrays: `range(pid, T, B)`
    # then fails. Take the element instead (interpreter only; compiled kernels are untouched).
    from triton.runtime import interpreter as _interp

    if not getattr(_interp._patch_lang_tensor, "_fco_index_fix", False):
        _orig_patch = _interp._patch_lang_tensor

        def _patch_lang_tensor(tensor, scope):
            _orig_patch(tensor, scope)
            scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

        _patch_lang_tensor._fco_index_fix = True
        _interp._patch_lang_tensor = _patch_lang_tensor

# Field offsets as constexprs (Triton only reads globals that are constexpr).
OFF_PEER_DATA = tl.constexpr(L.OFF_PEER_DATA)
OFF_PEER_SIG = tl.constexpr(L.OFF_PEER_SIG)
OFF_WS_BYTES = tl.constexpr(L.OFF_WS_BYTES)
OFF_RANK = tl.constexpr(L.OFF_RANK)
OFF_NRANKS = tl.constexpr(L.OFF_NRANKS)
OFF_TIMEOUT_NS = tl.constexpr(L.OFF_TIMEOUT_NS)
OFF_ERR = tl.constexpr(L.OFF_ERR)
OFF_EPOCH = tl.constexpr(L.OFF_EPOCH)
OFF_ARRIVE = tl.constexpr(L.OFF_ARRIVE)
ERR_OFF_CODE = tl.constexpr(L.ERR_OFF_CODE)
ERR_OFF_PEER = tl.constexpr(L.ERR_OFF_PEER)
ERR_OFF_OP = tl.constexpr(L.ERR_OFF_OP)
ERR_OFF_SLOT = tl.constexpr(L.ERR_OFF_SLOT)
ERR_OFF_WANT = tl.constexpr(L.ERR_OFF_WANT)
ERR_OFF_SEEN = tl.constexpr(L.ERR_OFF_SEEN)
SIG_SLOTS = tl.constexpr(L.SIG_SLOTS)
MAX_GPU_RANKS = tl.constexpr(L.MAX_GPU_RANKS)
DEFAULT_TIMEOUT_NS = tl.constexpr(L.DEFAULT_TIMEOUT_MS * 1000000)
ERR_TIMEOUT = tl.constexpr(L.ERR_TIMEOUT)
ERR_INTERNAL = tl.constexpr(L.ERR_INTERNAL)
ERR_INVALID_USAGE = tl.constexpr(L.ERR_INVALID_USAGE)
EPOCH_LIMIT = tl.constexpr(L.EPOCH_LIMIT)
ERR_SLOT_EPOCH = tl.constexpr(L.ERR_SLOT_EPOCH)
SPINS_PER_ERR_POLL = tl.constexpr(256)
WAIT_NS = 512  # default backoff cap of the waits (ns); FCO_TRITON_WAIT_NS overrides (host side)


def wait_ns_default():
    """The backoff cap (ns) the operators pass as their WAIT_NS constexpr: FCO_TRITON_WAIT_NS
    (0: spin without sleeping, the behaviour before the backoff), else WAIT_NS. A value that is
    not an integer is ignored, as if unset, with a RuntimeWarning (as the C library's knobs)."""
    v = os.environ.get("FCO_TRITON_WAIT_NS", "")
    try:
        return max(0, min(int(v), 1 << 20)) if v.strip() else WAIT_NS
    except ValueError:
        warnings.warn(f"FCO_TRITON_WAIT_NS={v!r} is not an integer: ignored, as if unset",
                      RuntimeWarning, stacklevel=2)
        return WAIT_NS


# ---- addresses -------------------------------------------------------------------------------
@triton.jit
def field_ptr(dev, off: tl.constexpr, dtype: tl.constexpr):
    """Typed pointer to the field at byte offset `off` of the state at address `dev`."""
    return (dev + off).to(tl.pointer_type(dtype))


@triton.jit
def addr_ptr(addr, dtype: tl.constexpr):
    """An int64 device address as a pointer to dtype."""
    return addr.to(tl.pointer_type(dtype))


# ---- memory-model primitives (PTX on GPUs, equivalents in the interpreter) -------------------
if INTERPRET:
    @triton.jit
    def ld_acquire_u64(ptr):
        return tl.atomic_add(ptr, 0, sem="acquire", scope="sys")

    @triton.jit
    def ld_relaxed_i32(ptr):
        return tl.atomic_add(ptr, 0, sem="relaxed", scope="sys")

    @triton.jit
    def ld_acquire_i32(ptr):
        return tl.atomic_add(ptr, 0, sem="acquire", scope="sys")

    @triton.jit
    def poll_u64(ptr):
        return tl.atomic_add(ptr, 0, sem="relaxed", scope="sys")

    @triton.jit
    def pause(ns):
        return ns

    @triton.jit
    def smid():
        return tl.full((), 0, tl.int32)

    @triton.jit
    def globaltimer():
        return tl.full((), time.monotonic_ns(), tl.uint64)

    @triton.jit
    def block_all(x):
        return (x != 0).to(tl.int32)

    @triton.jit
    def block_any(x):
        return (x != 0).to(tl.int32)
else:
    @triton.jit
    def ld_acquire_u64(ptr):
        """ld.acquire.sys of a uint64 (per thread)."""
        return tl.inline_asm_elementwise("ld.acquire.sys.global.u64 $0, [$1];", "=l,l", [ptr],
                                         dtype=tl.uint64, is_pure=False, pack=1)

    @triton.jit
    def ld_relaxed_i32(ptr):
        """ld.relaxed.sys of an int32 (per thread): the async error word."""
        return tl.inline_asm_elementwise("ld.relaxed.sys.global.s32 $0, [$1];", "=r,l", [ptr],
                                         dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def ld_acquire_i32(ptr):
        """ld.acquire.sys of an int32 (per thread): the async error record's op, written last."""
        return tl.inline_asm_elementwise("ld.acquire.sys.global.s32 $0, [$1];", "=r,l", [ptr],
                                         dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def poll_u64(ptr):
        """ld.relaxed.sys of a uint64 by the threads of the first warp; 0 in the others. A
        wait's poll: one request per program (a warp's loads of one address coalesce), and no
        L1 invalidation (which ld.acquire does on every load)."""
        return tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.lt.u32 p, t, 32; "
            "mov.u64 $0, 0; @p ld.relaxed.sys.global.u64 $0, [$1]; }",
            "=l,l", [ptr], dtype=tl.uint64, is_pure=False, pack=1)

    @triton.jit
    def pause(ns):
        """nanosleep of about ns (0..2·ns) nanoseconds (per thread)."""
        return tl.inline_asm_elementwise("nanosleep.u32 $1; mov.u32 $0, $1;", "=r,r",
                                         [tl.cast(ns, tl.int32)], dtype=tl.int32, is_pure=False,
                                         pack=1)

    @triton.jit
    def smid():
        """%smid: the SM this program runs on (profiling)."""
        return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                         is_pure=False, pack=1)

    @triton.jit
    def globaltimer():
        """%globaltimer in ns (per thread)."""
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.uint64,
                                         is_pure=False, pack=1)

    @triton.jit
    def block_all(x):
        """1 when x != 0 in every thread of the program, else 0 (bar.red.and: a barrier)."""
        return tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.s32 p, $1, 0; bar.red.and.pred p, 0, p; selp.s32 $0, 1, 0, p; }",
            "=r,r", [tl.cast(x, tl.int32)], dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def block_any(x):
        """1 when x != 0 in some thread of the program, else 0 (bar.red.or: a barrier)."""
        return tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.s32 p, $1, 0; bar.red.or.pred p, 0, p; selp.s32 $0, 1, 0, p; }",
            "=r,r", [tl.cast(x, tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


# ---- the table --------------------------------------------------------------------------------
@triton.jit
def rank(dev):
    """This rank (int32)."""
    return tl.load(field_ptr(dev, OFF_RANK, tl.int32))


@triton.jit
def world_size(dev):
    """Ranks of the communicator (int32)."""
    return tl.load(field_ptr(dev, OFF_NRANKS, tl.int32))


@triton.jit
def ws_bytes(dev):
    """Data workspace bytes per rank (int64)."""
    return tl.load(field_ptr(dev, OFF_WS_BYTES, tl.uint64)).to(tl.int64)


@triton.jit
def timeout_ns(dev):
    """Bound of every wait in ns (uint64): the table's, or 30 s when it is 0."""
    t = tl.load(field_ptr(dev, OFF_TIMEOUT_NS, tl.uint64))
    return tl.where(t == 0, tl.full((), DEFAULT_TIMEOUT_NS, tl.uint64), t)


@triton.jit
def err_addr(dev):
    """int64 address of the host-mapped fco_async_err_t (0 when absent)."""
    return tl.load(field_ptr(dev, OFF_ERR, tl.int64))


@triton.jit
def epoch(dev):
    """Calls completed on this communicator (uint64), read volatile: the previous kernel's last
    block wrote it. Read it at the start of the kernel, in every program."""
    return tl.load(field_ptr(dev, OFF_EPOCH, tl.uint64), volatile=True)


@triton.jit
def call_epoch(dev):
    """This call's epoch e = calls completed + 1 (uint64)."""
    return epoch(dev) + 1


@triton.jit
def epoch_guard(dev, op):
    """As the C kernels' load_rank_view (src/cuda/prims.cuh): a call that starts at epoch >=
    EPOCH_LIMIT (2^24 calls before the signal values' epoch field of 32 bits runs out) records
    ERR_INVALID_USAGE (slot ERR_SLOT_EPOCH, want EPOCH_LIMIT, seen the epoch) for `op`; the call
    itself still runs correctly, and the host refuses the communicator's next call."""
    ep = epoch(dev)
    if ep >= EPOCH_LIMIT:
        if error_set(dev) == 0:
            record_error(dev, ERR_INVALID_USAGE, op, -1, ERR_SLOT_EPOCH, ep - ep + EPOCH_LIMIT, ep)


@triton.jit
def half_offset(dev, e):
    """Byte offset (int64) of the workspace half peers write during the call with epoch e:
    (e & 1) · fco_ws_half_bytes(ws_bytes) — the workspace rule of src/core/internal.h."""
    half = (ws_bytes(dev) // 2) & ~255
    return tl.cast(e & 1, tl.int64) * half


@triton.jit
def sig_value(e, j):
    """The j-th flag value of a slot in the call with epoch e: (e << 32) | (j + 1) (uint64)."""
    return (tl.cast(e, tl.uint64) << 32) | tl.cast(j + 1, tl.uint64)


@triton.jit
def peer_base(dev, peer):
    """int64 address of `peer`'s data workspace as this rank sees it."""
    return tl.load(field_ptr(dev, OFF_PEER_DATA, tl.int64) + peer)


@triton.jit
def peer_ptr(dev, peer, offset, dtype: tl.constexpr):
    """Pointer to dtype at byte `offset` of `peer`'s symmetric workspace: a symmetric buffer's
    address translated to the peer (peer == rank gives this rank's own workspace)."""
    return (peer_base(dev, peer) + offset).to(tl.pointer_type(dtype))


@triton.jit
def sig_ptr(dev, peer, src, slot):
    """Pointer (uint64) to peer's flag sig[src][slot] (peer's signal area, as this rank sees it)."""
    base = tl.load(field_ptr(dev, OFF_PEER_SIG, tl.int64) + peer)
    return (base + tl.cast(src * SIG_SLOTS + slot, tl.int64) * 8).to(tl.pointer_type(tl.uint64))


# ---- data movement ----------------------------------------------------------------------------
@triton.jit
def put(dev, peer, offset, idx, value, mask=None):
    """Store a tile: value[...] at element idx[...] of the array of value.dtype that starts at
    byte `offset` of peer's workspace. Weak stores: publish them with signal()."""
    p = peer_ptr(dev, peer, offset, value.dtype)
    tl.store(p + idx, value, mask=mask)


@triton.jit
def get(dev, offset, idx, dtype: tl.constexpr, mask=None):
    """Load what peers wrote at byte `offset` of this rank's workspace, through L2 (.cg)."""
    p = peer_ptr(dev, rank(dev), offset, dtype)
    if mask is None:
        v = tl.load(p + idx, cache_modifier=".cg")
    else:
        v = tl.load(p + idx, mask=mask, other=0, cache_modifier=".cg")
    return v


# ---- signals ----------------------------------------------------------------------------------
@triton.jit
def signal(dev, peer, slot, value):
    """All threads. Publish this program's earlier stores to `peer`: barrier, then one
    release store (system scope) of value into peer's sig[rank][slot]."""
    tl.debug_barrier()
    tl.atomic_xchg(sig_ptr(dev, peer, rank(dev), slot), value, sem="release", scope="sys")


@triton.jit
def signal_all(dev, slot, value):
    """All threads. signal() every peer but this rank (one barrier)."""
    me = rank(dev)
    P = world_size(dev)
    tl.debug_barrier()
    for k in range(1, P):
        q = (me + k) % P
        tl.atomic_xchg(sig_ptr(dev, q, me, slot), value, sem="release", scope="sys")


@triton.jit
def error_set(dev):
    """Has some wait (of any kernel of this rank) recorded an error? (int32 0/1, per thread)"""
    a = err_addr(dev)
    code = 0
    if a != 0:
        code = ld_relaxed_i32(addr_ptr(a + ERR_OFF_CODE, tl.int32))
    return (code != 0).to(tl.int32)


@triton.jit
def error_stops_waits(dev):
    """Does the recorded error end this rank's waits? (int32 0/1, per thread) As the C kernels'
    error_stops_waits (src/cuda/prims.cuh): any code but the epoch-limit record
    (ERR_INVALID_USAGE in slot ERR_SLOT_EPOCH, epoch_guard), since calls issued at the limit
    still run correctly (dev.h) and their waits must go on; a record whose op is not written yet
    (record_error writes it last) does not stop them until a later poll."""
    a = err_addr(dev)
    stop = tl.full((), 0, tl.int32)
    if a != 0:
        code = ld_relaxed_i32(addr_ptr(a + ERR_OFF_CODE, tl.int32))
        if code == ERR_INVALID_USAGE:
            op = ld_acquire_i32(addr_ptr(a + ERR_OFF_OP, tl.int32))
            slot = ld_relaxed_i32(addr_ptr(a + ERR_OFF_SLOT, tl.int32))
            stop = ((op != 0) & (slot != ERR_SLOT_EPOCH)).to(tl.int32)
        else:
            stop = (code != 0).to(tl.int32)
    return stop


@triton.jit
def record_error(dev, code, op, peer, slot, want, seen):
    """All threads. First error wins: CAS the code at system scope; the winner writes the
    details, then `op` (never 0) with release, which the host polls for (gpu_common.c)."""
    a = err_addr(dev)
    if a != 0:
        old = tl.atomic_cas(addr_ptr(a + ERR_OFF_CODE, tl.int32), 0, code, sem="relaxed",
                            scope="sys")
        if old == 0:
            tl.store(addr_ptr(a + ERR_OFF_PEER, tl.int32), peer)
            tl.store(addr_ptr(a + ERR_OFF_SLOT, tl.int32), slot)
            tl.store(addr_ptr(a + ERR_OFF_WANT, tl.uint64), tl.cast(want, tl.uint64))
            tl.store(addr_ptr(a + ERR_OFF_SEEN, tl.uint64), tl.cast(seen, tl.uint64))
            tl.debug_barrier()
            tl.atomic_xchg(addr_ptr(a + ERR_OFF_OP, tl.int32), op, sem="release", scope="sys")


@triton.jit
def backoff(ns, WAIT_NS: tl.constexpr):
    """Sleep about ns nanoseconds when WAIT_NS > 0; the next delay: doubled, at most WAIT_NS."""
    if WAIT_NS > 0:
        pause(ns)
    return tl.minimum(ns * 2, WAIT_NS)


@triton.jit
def wait_flag(dev, flag, want, op, peer, slot, WAIT_NS: tl.constexpr = WAIT_NS):
    """All threads. Spin until *flag >= want (acquire, system scope), bounded by the table's
    timeout. Returns int32 1 (arrived) or 0 (timed out — FCO_ERR_TIMEOUT recorded with peer,
    slot, want and the last value seen — or another wait already failed): then skip the rest
    of the call's work but still reach epoch_end. While waiting, the first warp polls with a
    backoff of up to WAIT_NS ns (0: no sleep); every thread acquires the flag at the end."""
    limit = timeout_ns(dev)
    seen = ld_acquire_u64(flag)
    status = block_all(seen >= want)  # 1 arrived, 0 waiting, 2 failed
    if status == 0:
        t0 = globaltimer()
        spins = 0
        ns = tl.full((), 32, tl.int32)
        while status == 0:
            ns = backoff(ns, WAIT_NS)
            seen = poll_u64(flag)
            spins += 1
            bad = (globaltimer() - t0) > limit
            if spins % SPINS_PER_ERR_POLL == 0:
                bad = bad | (error_stops_waits(dev) != 0)
            got = block_any(seen >= want)  # the first warp polled
            late = block_any(bad)
            status = tl.where(got != 0, 1, tl.where(late != 0, 2, 0))
        seen = ld_acquire_u64(flag)  # every thread: its own acquire (values only grow)
    if status == 2:
        record_error(dev, ERR_TIMEOUT, op, peer, slot, want, seen)
    return (status == 1).to(tl.int32)


@triton.jit
def wait(dev, src, slot, want, op, WAIT_NS: tl.constexpr = WAIT_NS):
    """All threads. Wait until source rank `src` raised this rank's sig[src][slot] >= want."""
    me = rank(dev)
    return wait_flag(dev, sig_ptr(dev, me, src, slot), want, op, src, slot, WAIT_NS)


@triton.jit
def wait_all(dev, slot, want, op, WAIT_NS: tl.constexpr = WAIT_NS):
    """All threads. wait() for every peer but this rank, in rank order; stops at the first
    failure. Returns int32 1 when all arrived."""
    me = rank(dev)
    P = world_size(dev)
    ok = 1
    for q in range(0, P):
        if ok != 0:
            if q != me:
                ok = wait_flag(dev, sig_ptr(dev, me, q, slot), want, op, q, slot, WAIT_NS)
    return ok


@triton.jit
def epoch_end(dev, e, blocks_per_rank):
    """All threads, once per program at the very end (also after a failed wait, so `arrive`
    stays balanced). The last of the rank's blocks_per_rank programs resets the counter and
    stores epoch = e; the next kernel on the stream reads it."""
    tl.debug_barrier()
    old = tl.atomic_add(field_ptr(dev, OFF_ARRIVE, tl.uint32), 1, sem="relaxed", scope="gpu")
    if old == blocks_per_rank - 1:
        tl.atomic_xchg(field_ptr(dev, OFF_ARRIVE, tl.uint32), 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(field_ptr(dev, OFF_EPOCH, tl.uint64), tl.cast(e, tl.uint64), sem="relaxed",
                       scope="gpu")
