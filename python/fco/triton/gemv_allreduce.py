"""gemv_allreduce.py — GEMV + AllReduce one-shot written in Triton with fco.triton: the
row-parallel linear of tensor-parallel decode, y [M, N] = Σ_r x_r [M, K_r] · W_r [N, K_r]^T
(+ bias), M ≤ 64, identical on every rank. The Triton twin of fco_gemv_allreduce impl 1
(src/cuda/gemv_allreduce.cu) on the same communicator; docs/triton.md walks through it.

Design (one persistent launch; program → (local rank li = pid // B, part b = pid % B); the
  per-rank pointers arrive as tuples of kernel arguments, so nothing is copied before a launch):
  Output columns are cut into T = ceil(N / BLOCK_N) tiles; program b owns tiles t = b, b+B, ...
  (its j-th tile is t = b + j·B).
  phase 1  per tile: the fp32 partial [M, BLOCK_N] = x_r · W_r[tile]^T (tl.dot), stored into
           slot `me` of EVERY rank's workspace (peers me+1, me+2, ..., itself last), then
           sig[me][b] = sig_value(e, j) raised on every peer (release, system scope).
  phase 2  per tile: wait for every peer's sig[q][b] >= sig_value(e, j) (acquire, bounded),
           sum the P slots in rank order 0..P-1 (fp32), add the bias, round to the dtype,
           write y. Same values, same order on every rank: y is bit-identical on all ranks.
  end      the last program of each rank advances that rank's epoch.
Workspace (the rule of src/core/internal.h): the call with epoch e writes only the half at
  (e & 1)·H, H = fco_ws_half_bytes(ws_bytes); in it, slot p (rank p's partial tiles, [T][M]
  [BLOCK_N] fp32) at p·S, S = roundup(T·M·BLOCK_N·4, 256). Need: 2·P·S bytes per rank.
Launch requirements: every rank runs the same sequence of epoch-advancing calls with the same
  M, N, dtype, bias presence, BLOCK_N and B (same GPU model, same num_local per process), so
  tiles and signal slots agree; all num_local·B programs co-resident (B from the compiled
  kernel's occupancy, host.blocks_per_rank); B ≤ 1023 (one signal slot per program).
  split_phases=True launches phase 1 and phase 2 as two kernels instead (no co-residency need,
  no overlap): what Triton's CPU interpreter runs, where programs execute one after another.
"""
import triton
import triton.language as tl

from .. import _lib
from .._lib import FcoError
from . import host, layout
from . import language as fl

MAX_M = 64  # as FCO_GEMV_ALLREDUCE_MAX_M
OP = tl.constexpr(layout.OP_GEMV_ALLREDUCE)
_NAME = "fco.triton.gemv_allreduce"


@triton.jit
def _partial_tile(x, w, M, N, K, t, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """fp32 [BLOCK_M, BLOCK_N]: x[M, K] · W[t·BLOCK_N : +BLOCK_N, K]^T (rows ≥ M, cols ≥ N: 0)."""
    rm = tl.arange(0, BLOCK_M)
    rn = t * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        xa = tl.load(x + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K),
                     other=0.0)
        wb = tl.load(w + rn[None, :].to(tl.int64) * K + rk[:, None],
                     mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        if UPCAST:  # the interpreter's dot multiplies 16-bit floats as raw integers
            acc = tl.dot(xa.to(tl.float32), wb.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(xa, wb, acc, input_precision=PRECISION)
    return acc


# B is not specialised: the occupancy probe (B = 1) must compile the kernel that is launched.
@triton.jit(do_not_specialize=["B"])
def gemv_allreduce_kernel(devs, xs, ws, biases, ys, Ks, M, N, T, B, slot_bytes,
                          L: tl.constexpr, DTYPE: tl.constexpr, HAS_BIAS: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          PRECISION: tl.constexpr, PHASES: tl.constexpr,
                          UPCAST: tl.constexpr = False, WAIT_NS: tl.constexpr = fl.WAIT_NS,
                          PROFILE: tl.constexpr = False, prof=None):
    # Per-rank arguments arrive as tuples of L (kernel arguments by value: nothing to copy to
    # the device first, so a CUDA graph captures the call as it is).
    pid = tl.program_id(0)
    li = pid // B
    b = pid - li * B
    if PROFILE:  # prof[pid]: 8 int64 [start, pushed, waited, end, 0, %smid, tiles, 0]
        t_start = fl.globaltimer()
        t_push = t_start
        t_wait = t_start
        n_done = 0
    dev = tl.cast(devs[0], tl.int64)
    x = xs[0]
    w = ws[0]
    bias = biases[0]
    y = ys[0]
    K = tl.cast(Ks[0], tl.int64)
    for i in tl.static_range(1, L):
        if li == i:
            dev = tl.cast(devs[i], tl.int64)
            x = xs[i]
            w = ws[i]
            bias = biases[i]
            y = ys[i]
            K = tl.cast(Ks[i], tl.int64)

    me = fl.rank(dev)
    P = fl.world_size(dev)
    e = fl.call_epoch(dev)
    fl.epoch_guard(dev, OP)
    hoff = fl.half_offset(dev, e)
    S = tl.cast(slot_bytes, tl.int64)
    tile_bytes = tl.cast(M, tl.int64) * BLOCK_N * 4
    # A peer table that does not match the launch must not turn into writes past a workspace.
    need = 2 * tl.cast(P, tl.int64) * S
    have = fl.ws_bytes(dev)
    valid = ((P >= 1) & (P <= fl.MAX_GPU_RANKS) & (me >= 0) & (me < P) & (have >= need)).to(tl.int32)
    if valid == 0:
        fl.record_error(dev, fl.ERR_INTERNAL, OP, me, -1, need, have)

    rm = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    idx = rm[:, None] * BLOCK_N + cols[None, :]  # [M][BLOCK_N] inside a tile
    rows_ok = rm[:, None] < M

    if PHASES & 1:
        if valid != 0:
            for t in range(b, T, B):
                j = (t - b) // B
                acc = _partial_tile(x, w, M, N, K, t, BLOCK_M, BLOCK_N, BLOCK_K, PRECISION, UPCAST)
                off = hoff + tl.cast(me, tl.int64) * S + tl.cast(t, tl.int64) * tile_bytes
                for k in range(1, P + 1):
                    fl.put(dev, (me + k) % P, off, idx, acc, rows_ok)
                fl.signal_all(dev, b, fl.sig_value(e, j))
                if PROFILE:
                    n_done += 1
        if PROFILE:
            t_push = fl.globaltimer()

    if PHASES & 2:
        ok = valid
        for t in range(b, T, B):
            j = (t - b) // B
            if ok != 0:
                ok = fl.wait_all(dev, b, fl.sig_value(e, j), OP, WAIT_NS)
            if PROFILE:
                t_wait = fl.globaltimer()
            if ok != 0:
                off = hoff + tl.cast(t, tl.int64) * tile_bytes
                acc = fl.get(dev, off, idx, tl.float32, rows_ok)
                for q in range(1, P):
                    acc += fl.get(dev, off + q * S, idx, tl.float32, rows_ok)
                rn = t * BLOCK_N + cols
                if HAS_BIAS:
                    acc += tl.load(bias + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
                tl.store(y + rm[:, None] * N + rn[None, :], acc.to(DTYPE),
                         mask=rows_ok & (rn[None, :] < N))
        if PROFILE:
            tl.store(prof + pid * 8 + 0, t_start.to(tl.int64))
            tl.store(prof + pid * 8 + 1, t_push.to(tl.int64))
            tl.store(prof + pid * 8 + 2, t_wait.to(tl.int64))
            tl.store(prof + pid * 8 + 3, fl.globaltimer().to(tl.int64))
            tl.store(prof + pid * 8 + 5, fl.smid().to(tl.int64))
            tl.store(prof + pid * 8 + 6, tl.cast(n_done, tl.int64))
        fl.epoch_end(dev, e, B)


# ---- host side ---------------------------------------------------------------------------------
def _tl_dtype(dt):
    import torch

    return {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}.get(dt)


def _next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def plan(M, N, dtype_bytes, num_sms=132):
    """(BLOCK_M, BLOCK_N, BLOCK_K, T): depends only on values every rank agrees on."""
    block_m = max(16, _next_pow2(M))
    block_n = 64 if N >= 64 * num_sms else 32
    block_k = 128 if dtype_bytes == 2 else 64
    if block_m >= 64:
        block_k //= 2
    return block_m, block_n, block_k, -(-N // block_n)


def slot_bytes(M, N, block_n):
    """S: one rank's fp32 partial tiles."""
    return layout.round_up(-(-N // block_n) * block_n * M * 4, 256)


def workspace_bytes(nranks, M, N, block_n):
    """Data workspace per rank this operator needs: 2 · P · S."""
    return 2 * nranks * slot_bytes(M, N, block_n)


_occ_cache = {}
# What the last launch of this process chose (bench/triton_diag.py prints it).
last_launch = {}
PER_SM_MAX = 2  # co-resident programs per SM the grid relies on at most (see _blocks)


def _blocks(kernel_args, kwargs, grid_tiles, num_local, device, num_warps):
    """B for a co-resident launch, from the compiled kernel's registers and shared memory (+
    the 1 KB per block the driver reserves), probed on the kernel that is launched (B is not
    specialised; every other argument is the launch's). At most PER_SM_MAX programs per SM:
    the grid never leans on the last program slots of an SM (the driver's shared-memory
    carveout, another kernel still draining), and T = 256 tiles on 132 SMs stay one wave.
    Cached per compiled kernel: the key holds what Triton specialises the launch on
    (host.launch_spec: the tensors' 16-byte alignment, K, M, N divisible by 16, ...)."""
    import torch

    key = (str(device), host.kwargs_spec(kwargs), num_warps,
           host.launch_spec(kernel_args, host.dns_positions(gemv_allreduce_kernel)))
    hit = _occ_cache.get(key)
    props = torch.cuda.get_device_properties(device)
    if hit is None:
        ck = gemv_allreduce_kernel.warmup(*kernel_args, grid=(1,), num_warps=num_warps, **kwargs)
        ck._init_handles()
        per_sm = host.programs_per_sm(
            ck.n_regs, ck.metadata.shared + 1024, num_warps,
            regs_per_sm=getattr(props, "regs_per_multiprocessor", 65536),
            smem_per_sm=getattr(props, "shared_memory_per_multiprocessor", 233472),
            threads_per_sm=getattr(props, "max_threads_per_multi_processor", 2048))
        hit = (min(per_sm, PER_SM_MAX), dict(n_regs=ck.n_regs, n_spills=ck.n_spills,
                                             shared=ck.metadata.shared, per_sm_fit=per_sm))
        _occ_cache[key] = hit
    per_sm, res = hit
    last_launch.update(res, per_sm=per_sm, num_sms=props.multi_processor_count)
    if per_sm < 1:
        raise FcoError(_lib.UNSUPPORTED, "the Triton gemv_allreduce kernel does not fit on an SM",
                       _NAME)
    return host.blocks_per_rank(grid_tiles, num_local, props.multi_processor_count, per_sm)


def _check_inputs(L, xs, ws, biases):
    import torch

    def bad(msg, code=_lib.INVALID_ARGUMENT):
        raise FcoError(code, msg, _NAME)

    if not 1 <= L <= layout.MAX_GPU_RANKS:
        bad(f"{L} communicators given; expected 1..{layout.MAX_GPU_RANKS} (the ranks this "
            "process drives)")
    if len(xs) != L or len(ws) != L or (biases is not None and len(biases) != L):
        bad(f"{L} communicators but {len(xs)} x, {len(ws)} w"
            + ("" if biases is None else f", {len(biases)} bias") + "; expected one per rank")
    x0 = xs[0]
    for i in range(L):
        x, w = xs[i], ws[i]
        for name, t in (("x", x), ("w", w)) + ((("bias", biases[i]),) if biases else ()):
            if not isinstance(t, torch.Tensor):
                bad(f"{name}[{i}] is {type(t).__name__}; expected a torch.Tensor")
            if t.dtype != x0.dtype or _tl_dtype(t.dtype) is None:
                bad(f"{name}[{i}] has dtype {t.dtype}; expected float32, float16 or bfloat16, "
                    f"the dtype of x[0] ({x0.dtype})")
            if t.device != x0.device:
                bad(f"{name}[{i}] is on {t.device}; expected {x0.device} (one device per process)")
            if not t.is_contiguous():
                bad(f"{name}[{i}] is not contiguous")
        if x.dim() < 1 or w.dim() != 2 or w.shape[1] != x.shape[-1]:
            bad(f"x[{i}] has shape {tuple(x.shape)} and w[{i}] {tuple(w.shape)}; expected "
                "[..., K] and [N, K]")
        if w.shape[0] != ws[0].shape[0] or x.numel() // max(x.shape[-1], 1) != \
                x0.numel() // max(x0.shape[-1], 1):
            bad(f"rank slot {i}: M or N differ from slot 0's (M = x.numel() / K, N = w.shape[0] "
                "must be the same on every rank)")
        if biases is not None and (biases[i].dim() != 1 or biases[i].shape[0] != w.shape[0]):
            bad(f"bias[{i}] has shape {tuple(biases[i].shape)}; expected [{w.shape[0]}]")
        if x.shape[-1] < 1:
            bad(f"x[{i}] has K = 0")
    M, N = x0.numel() // x0.shape[-1], ws[0].shape[0]
    if M == 0:  # as the C op: an argument error; above MAX_M: unsupported (a GEMM's job)
        bad("M is 0 (x holds no rows)")
    if M > MAX_M:
        bad(f"M = {M} rows; the GEMV takes 1..{MAX_M} (use a GEMM, then fco.allreduce)",
            _lib.UNSUPPORTED)
    if N == 0:  # as the C op (fco.gemv_allreduce returns its empty y before any impl runs)
        bad("N is 0 (w holds no rows)")
    if M * N > 2 ** 31:  # y's offsets rm·N + n are int32 in the kernel
        bad(f"M x N = {M} x {N} = {M * N} outputs is more than the 2^31 the kernel's int32 "
            "offsets into y reach (use a C impl)", _lib.UNSUPPORTED)
    return M, N


def gemv_allreduce(comms, xs, ws, biases=None, *, num_warps=4, blocks_per_rank=None,
                   split_phases=None, wait_ns=None, prof=None):
    """The ranks this process drives, in one launch: one per process on the nccl transport
    (comms=[comm]), or every virtual rank of a local-transport world (fco_comm_init_all).

    comms   fco.Communicator / fco_comm_t handles, or host.DeviceState (then the caller
            guarantees the workspace: tests and custom transports)
    xs      [..., K_r] per rank, ws [N, K_r] per rank (torch Linear layout), biases [N] per
            rank or None (the same on every rank, added once); one dtype (f32, f16, bf16),
            contiguous, one device; M = x.numel() / K_r ≤ 64 and N equal on every rank
    wait_ns the waits' backoff cap in ns instead of fl.wait_ns_default()'s (0: spin; an int,
            clamped to 0..2^20 as FCO_TRITON_WAIT_NS)
    num_warps a power of two in 1..16; blocks_per_rank an int in 1..1023
    prof    optional contiguous int64 tensor of ≥ 8·L·B elements on x's device: per program
            [start, pushed, waited, end (%globaltimer ns), 0, %smid, tiles, 0] (diagnostics; a
            separate compile)
    → list of y [..., N], identical on every rank. Runs on the current stream; CUDA-graph
      capturable once the shape ran eagerly (workspace growth and compilation happen then).
      Collective: every rank calls it with the same M, N, dtype and bias presence. Device-side failures (a peer that never
      signals: FCO_ERR_TIMEOUT) surface through comm.check_async_error().
    """
    import torch

    comms = list(comms)
    xs, ws = list(xs), list(ws)
    biases = None if biases is None or all(b is None for b in biases) else list(biases)
    if biases is not None and any(b is None for b in biases):
        raise FcoError(_lib.INVALID_ARGUMENT, "some biases are None and some not; give every "
                       "rank a bias or none", _NAME)
    M, N = _check_inputs(len(comms), xs, ws, biases)
    L = len(comms)
    wns = fl.wait_ns_default() if wait_ns is None else host.wait_ns_arg(wait_ns, _NAME)
    num_warps = host.int_arg(num_warps, "num_warps", 1, 16, _NAME)
    if num_warps & (num_warps - 1):
        raise FcoError(_lib.INVALID_ARGUMENT, f"num_warps {num_warps} is not a power of two",
                       _NAME)
    host.check_prof(prof, xs[0].device, _NAME)
    states = [c if isinstance(c, host.DeviceState) else host.device_state(c) for c in comms]
    P = states[0].nranks
    if any(s.nranks != P for s in states) or len({s.rank for s in states}) != L or L > P:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"communicators of ranks {[s.rank for s in states]} with sizes "
                       f"{[s.nranks for s in states]}: expected distinct ranks of one world", _NAME)
    dev = xs[0].device
    on_gpu = dev.type == "cuda"
    capturing = on_gpu and torch.cuda.is_current_stream_capturing()
    if split_phases is None:
        split_phases = fl.INTERPRET
    num_sms = torch.cuda.get_device_properties(dev).multi_processor_count if on_gpu else 132
    esize = xs[0].element_size()
    block_m, block_n, block_k, T = plan(M, N, esize, num_sms)
    S = slot_bytes(M, N, block_n)
    handles = [s.handle for s in states if s.handle]
    if handles:
        host.ensure_workspace(handles, 2 * P * S, capturing)

    ys = [x.new_empty(tuple(x.shape[:-1]) + (N,)) for x in xs]
    targs = (tuple(st.addr for st in states), tuple(xs), tuple(ws),
             tuple(biases) if biases else tuple(xs), tuple(ys),
             tuple(int(x.shape[-1]) for x in xs))
    kw = dict(L=L, DTYPE=_tl_dtype(xs[0].dtype), HAS_BIAS=biases is not None, BLOCK_M=block_m,
              BLOCK_N=block_n, BLOCK_K=block_k,
              PRECISION="ieee" if esize == 4 else "tf32", UPCAST=fl.INTERPRET and esize == 2,
              WAIT_NS=wns)
    if prof is not None:
        kw.update(PROFILE=True, prof=prof)
    if blocks_per_rank is None:
        if on_gpu and not fl.INTERPRET:
            args = targs + (M, N, T, 1, S)
            B = _blocks(args, dict(kw, PHASES=1 if split_phases else 3), T, L, dev, num_warps)
        else:  # the interpreter: 4 programs a rank (4 in all refused 5..8 local ranks)
            B = host.blocks_per_rank(T, L, 4 * L, 1)
    else:
        # per rank, as gemm_alltoall's (it was divided by L)
        bpr = host.int_arg(blocks_per_rank, "blocks_per_rank", 1, layout.SIG_SLOTS - 1, _NAME)
        B = host.blocks_per_rank(T, L, L * bpr, 1, bpr)
    grid = (L * B,)
    if prof is not None and prof.numel() < 8 * L * B:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"prof has {prof.numel()} elements; expected >= {8 * L * B}", _NAME)
    last_launch.update(block=(block_m, block_n, block_k), tiles=T, blocks_per_rank=B,
                       num_warps=num_warps, wait_ns=kw["WAIT_NS"], num_local=L)
    if split_phases:
        gemv_allreduce_kernel[grid](*targs, M, N, T, B, S, PHASES=1, num_warps=num_warps, **kw)
        gemv_allreduce_kernel[grid](*targs, M, N, T, B, S, PHASES=2, num_warps=num_warps, **kw)
    else:
        gemv_allreduce_kernel[grid](*targs, M, N, T, B, S, PHASES=3, num_warps=num_warps, **kw)
    return ys


def gemv_allreduce_comm(comm, x, w, bias=None):
    """One rank per process (nccl transport): y = Σ_r x_r @ w_r.T (+ bias). The body of
    fco.gemv_allreduce(..., impl="triton")."""
    return gemv_allreduce([comm], [x], [w], None if bias is None else [bias])[0]
