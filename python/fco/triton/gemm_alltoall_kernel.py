"""gemm_alltoall_kernel.py — the device side of fco.triton.gemm_alltoall: the persistent kernel
(gemm_alltoall_kernel), its @triton.jit helpers (plan, header, waits, tiles with pointer loads
or TMA descriptors, row stores) and the stream-K counters' reader. The design, the protocol
and the workspace layout are in gemm_alltoall.py's docstring; the host side (plan, launch,
checks) is there too, and re-exports these names.
"""
import triton
import triton.language as tl

from . import layout
from . import language as fl

OP = tl.constexpr(layout.OP_GEMM_ALLTOALL)
HDR_SLOT = tl.constexpr(layout.SIG_SLOTS - 1)  # kHdrSlot of src/cuda/gemm_alltoall.cuh
WHY_BAD_COUNTS = tl.constexpr(1)     # a negative count, or Σ counts > a_rows
WHY_BAD_CAPACITY = tl.constexpr(2)   # a receiver would need more than out_rows
WHY_COUNTS_CHANGED = tl.constexpr(4)  # impl 2's digest (only a C rank posts it)
ERR_INVALID_ARGUMENT = tl.constexpr(layout.ERR_INVALID_ARGUMENT)
ERR_INVALID_USAGE = tl.constexpr(layout.ERR_INVALID_USAGE)
MAXR = tl.constexpr(layout.MAX_GPU_RANKS)   # row length of the symmetric-buffer table
MAX_SYM = tl.constexpr(layout.MAX_SYMMETRIC)  # its rows


@triton.jit
def _pick(vec, idx, i):
    """vec[i] of a small vector indexed by idx (a uniform scalar)."""
    return tl.sum(tl.where(idx == i, vec, 0))


@triton.jit
def _count_mod(t0, t1, q, g):
    """Number of t in [t0, t1) with t ≡ q (mod g), 0 ≤ q < g (count_mod of gemm_alltoall.cuh)."""
    hi = tl.where(t1 > q, (t1 - q + g - 1) // g, 0)
    lo = tl.where(t0 > q, (t0 - q + g - 1) // g, 0)
    return hi - lo


@triton.jit
def _plan_ptrs(dev, plan_off, P):
    """The private plan (int32 arrays; 6400 + 2048·P bytes ≤ plan_bytes(P)): per expert e
    (256 entries each) a_row (first A row), rows (R_e, all sources), jl0 / jl1 (its local-only
    M tiles [jl0, jl1)), tbr / tbl (first tile of its remote and of its local-only tiles);
    scalars sc[0] = T_R (tiles touching a peer's rows, listed first), sc[1] = total; per
    (e, s) at e·P + s: cnt (rows of e from s) and dloc (rows of earlier experts for s)."""
    base = fl.peer_base(dev, fl.rank(dev)) + plan_off
    P64 = tl.cast(P, tl.int64)
    i32 = tl.pointer_type(tl.int32)
    arow = base.to(i32)
    rows = (base + 1024).to(i32)
    jl0 = (base + 2048).to(i32)
    jl1 = (base + 3072).to(i32)
    tbr = (base + 4096).to(i32)
    tbl = (base + 5120).to(i32)
    sc = (base + 6144).to(i32)
    cnt = (base + 6400).to(i32)
    dloc = (base + 6400 + 1024 * P64).to(i32)
    return arow, rows, jl0, jl1, tbr, tbl, sc, cnt, dloc


@triton.jit
def _post_header(dev, counts, E, a_rows, N, B, e, hoff, hb, plan_off, sk_off, stbl, symk, symo,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, E_PAD: tl.constexpr,
                 P_PAD: tl.constexpr, SPLIT: tl.constexpr, SK: tl.constexpr,
                 SK_ITEMS: tl.constexpr):
    """Part 0, all threads: the tile plan from the device counts, then the header to every
    rank (its own included) and the release flags on slot [me][HDR_SLOT].
    Tiles: M tiles over each expert's rows of every source at once (they are contiguous in A,
    so W is read once per tile row, not once per destination), × N tiles. SPLIT: the tiles
    that touch a peer's rows come first (all experts), the local-only ones after, so the
    peers can land while the local tiles run; else every expert's tiles in one run (W of an
    expert read once: memory-bound shapes). Flags: each part raises one flag per peer with
    rows, after its last tile touching peers' rows, so the header announces tiles[s] = B
    (count_mod gives every part 1) and receivers stay impl 1's.
    SK: the stream-K counters are zeroed here, before the release that publishes the plan:
    every program acquires this header before it counts a slice, so a call never sees a
    count of an earlier call (or garbage another op left in the private area), whatever ran
    on this half before — back-to-back calls and graph replays alike.
    held (FCO_GA_H_HELD): bit k when my symmetric-buffer table (stbl) maps slot k of every peer,
    read from the table each call as the C kernels do (sym_row_held)."""
    me = fl.rank(dev)
    P = fl.world_size(dev)
    ev = tl.arange(0, E_PAD)[:, None]
    sv = tl.arange(0, P_PAD)[None, :]
    m2 = (ev < E) & (sv < P)
    c = tl.load(counts + ev * P + sv, mask=m2, other=0).to(tl.int64)
    bad = tl.max(tl.where(m2 & (c < 0), 1, 0))
    cm = tl.maximum(c, 0)
    ok = (bad == 0) & (tl.sum(cm) <= a_rows)
    nN = (N + BLOCK_N - 1) // BLOCK_N
    rows = tl.sum(cm, axis=1)                                      # [e] rows of expert e
    a_row = tl.cumsum(rows, 0) - rows                              # its first A row
    d_local = tl.cumsum(cm, axis=0) - cm                           # earlier experts, same s
    pre = tl.cumsum(cm, axis=1) - cm                               # earlier sources, same e
    l0 = tl.sum(tl.where(sv == me, pre, 0), axis=1)                # my rows of e: [l0, l1)
    mine = tl.sum(tl.where(sv == me, cm, 0), axis=1)
    l1 = l0 + mine
    nM = (rows + BLOCK_M - 1) // BLOCK_M
    jl0 = (l0 + BLOCK_M - 1) // BLOCK_M                            # M tiles inside [l0, l1)
    jl1 = tl.maximum(tl.where(l1 == rows, nM, l1 // BLOCK_M), jl0)
    loc = (mine > 0) & (SPLIT != 0)
    jl0 = tl.where(loc, jl0, 0)
    jl1 = tl.where(loc, jl1, 0)
    t_rem = (jl0 + nM - jl1) * nN                                  # tiles touching peers' rows
    t_loc = (jl1 - jl0) * nN
    T_R = tl.sum(t_rem)
    tbr = tl.cumsum(t_rem, 0) - t_rem
    tbl = T_R + tl.cumsum(t_loc, 0) - t_loc
    total = T_R + tl.sum(t_loc)
    e1 = tl.arange(0, E_PAD)
    m1e = (e1 < E) & ok
    p_arow, p_rows, p_jl0, p_jl1, p_tbr, p_tbl, p_sc, p_cnt, p_dloc = _plan_ptrs(dev, plan_off,
                                                                                  P)
    tl.store(p_arow + e1, a_row.to(tl.int32), mask=m1e)
    tl.store(p_rows + e1, rows.to(tl.int32), mask=m1e)
    tl.store(p_jl0 + e1, jl0.to(tl.int32), mask=m1e)
    tl.store(p_jl1 + e1, jl1.to(tl.int32), mask=m1e)
    tl.store(p_tbr + e1, tbr.to(tl.int32), mask=m1e)
    tl.store(p_tbl + e1, tbl.to(tl.int32), mask=m1e)
    tl.store(p_sc, T_R.to(tl.int32), mask=ok)
    tl.store(p_sc + 1, total.to(tl.int32), mask=ok)
    ms = m2 & ok
    tl.store(p_cnt + ev * P + sv, cm.to(tl.int32), mask=ms)
    tl.store(p_dloc + ev * P + sv, d_local.to(tl.int32), mask=ms)
    s1 = tl.arange(0, P_PAD)
    m1 = s1 < P
    tot = tl.sum(cm, axis=0)
    tiles = tl.where(tot > 0, tl.cast(B, tl.int64), 0)             # flags: one per part
    rot = (s1 - me - 1 + 2 * P) % P                                # schedule position of s
    tstart = tl.sum(tl.where((rot[None, :] < rot[:, None]) & m1[None, :], tiles[None, :], 0),
                    axis=1)
    okv = ok.to(tl.int64)
    kv = tl.arange(0, MAX_SYM)
    pm = (kv[:, None] >= 0) & (sv < P) & (sv != me) & (stbl != 0)
    ent = tl.load(fl.addr_ptr(stbl + (kv[:, None] * MAXR + sv) * 8, tl.int64), mask=pm, other=0)
    miss = tl.sum(tl.where(pm & (ent == 0), 1, 0), axis=1)        # [k]: peers row k lacks
    held = tl.sum(tl.where((miss == 0) & (stbl != 0), tl.full((MAX_SYM,), 1, tl.int64) <<
                           kv.to(tl.int64), 0))
    if SK:
        zi = tl.arange(0, SK_ITEMS)
        tl.store(fl.peer_ptr(dev, me, sk_off, tl.int32) + zi, tl.zeros((SK_ITEMS,), tl.int32),
                 mask=(zi < SK_ITEMS) & ok)
    for p in range(0, P):
        h = fl.peer_ptr(dev, p, hoff + tl.cast(me, tl.int64) * hb, tl.int64)
        tl.store(h + 0, okv)
        tl.store(h + 1, tl.cast(E, tl.int64))
        tl.store(h + 2, tl.cast(B, tl.int64))
        tl.store(h + 3, tl.where(ok, 0, WHY_BAD_COUNTS).to(tl.int64))
        tl.store(h + 4 + s1, tot, mask=m1)
        tl.store(h + 4 + P + s1, tiles * okv, mask=m1)
        tl.store(h + 4 + 2 * P + s1, tstart * okv, mask=m1)
        # FCO_GA_H_SYM / SYM_OFF: slot + 1 of the symmetric buffer holding my out and its
        # offset there (peers store my rows into it), or 0: stage
        tl.store(h + 4 + 3 * P, symk)
        tl.store(h + 5 + 3 * P, symo)
        tl.store(h + 6 + 3 * P, held)  # FCO_GA_H_HELD: the slots I can store into at every peer
    tl.debug_barrier()  # every thread's stores before the release (cumulative)
    for p in range(0, P):
        tl.atomic_xchg(fl.sig_ptr(dev, p, me, HDR_SLOT), fl.sig_value(e, 0), sem="release",
                       scope="sys")


@triton.jit
def _signal_peers(dev, sendv, rv, me, P, b, e):
    """All threads. Part b's one flag of this call to every peer it has rows for: sig_value(e,
    0) on slot [me][b] there, after (release) every tile of this part that touched its rows."""
    for s in range(0, P):
        if s != me:
            if _pick(sendv, rv, s) > 0:
                fl.signal(dev, s, b, fl.sig_value(e, 0))


@triton.jit
def _wait_vec(dev, flags, want, need, peer, q, WAIT_NS: tl.constexpr):
    """All threads. Spin until flags[i] >= want[i] for every i with need[i] (acquire, system
    scope), bounded by the table's timeout as fl.wait_flag. Returns int32 1, or 0 after
    recording FCO_ERR_TIMEOUT (peer, the first missing slot q, want, seen) or when another wait
    of this rank failed. While waiting: volatile loads of the needed flags only (warps whose
    flags are all unneeded issue none), a backoff of up to WAIT_NS ns between polls, and one
    acquire load per flag at the end."""
    limit = fl.timeout_ns(dev)
    seen = fl.ld_acquire_u64(flags)
    status = tl.min(tl.where(need & (seen < want), 0, 1))  # a reduction: block-uniform
    if status == 0:
        t0 = fl.globaltimer()
        spins = 0
        ns = tl.full((), 32, tl.int32)
        while status == 0:
            ns = fl.backoff(ns, WAIT_NS)
            seen = tl.load(flags, mask=need, other=0, volatile=True)
            spins += 1
            bad = (fl.globaltimer() - t0) > limit
            if spins % fl.SPINS_PER_ERR_POLL == 0:
                bad = bad | (fl.error_stops_waits(dev) != 0)
            got = tl.min(tl.where(need & (seen < want), 0, 1))
            late = fl.block_any(bad)
            status = tl.where(got != 0, 1, tl.where(late != 0, 2, 0))
        seen = fl.ld_acquire_u64(flags)  # the acquire of every flag (values only grow)
    if status == 2:
        first = tl.min(tl.where(need & (seen < want), q, 1 << 30))
        fl.record_error(dev, fl.ERR_TIMEOUT, OP, peer, first,
                        tl.sum(tl.where(q == first, want, 0)),
                        tl.sum(tl.where(q == first, seen, 0)))
    return (status == 1).to(tl.int32)


@triton.jit
def _wait_tiles(dev, r, g, t0, n, e, QV: tl.constexpr, WAIT_NS: tl.constexpr):
    """All threads. Wait for every tile peer r sends here: its part q raised sig[r][q] once per
    tile, count_mod(t0, t0 + n, q, g) times in all."""
    me = fl.rank(dev)
    ok = 1
    for q0 in range(0, g, QV):
        if ok != 0:
            q = q0 + tl.arange(0, QV)
            cnt = _count_mod(t0, t0 + n, q.to(tl.int64), g)
            need = (q < g) & (cnt > 0)
            want = fl.sig_value(e, tl.maximum(cnt - 1, 0))
            flags = fl.sig_ptr(dev, me, r, tl.minimum(q, fl.SIG_SLOTS - 1))
            ok = _wait_vec(dev, flags, want, need, r, q, WAIT_NS)
    return ok


@triton.jit
def _tile(a, w, a_row, rows, m0, n0, ex, K, N, k_lo, k_hi, W_NK: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
          EVEN_K: tl.constexpr, EVEN_N: tl.constexpr, PRECISION: tl.constexpr,
          UPCAST: tl.constexpr):
    """fp32 [BLOCK_M, BLOCK_N] = A[a_row + m0 .., k_lo:k_hi] · W_ex[k_lo:k_hi, n0 ..] (k_lo a
    multiple of BLOCK_K; 0, K: the whole tile; a stream-K slice otherwise). Rows past the segment
    read its last row again (no mask on A; the store masks them), columns past N read 0.
    Scalar int64 bases, int32 offsets inside the tile (host: check_index_range): half
    the registers of 64-bit pointer tensors."""
    rr = tl.arange(0, BLOCK_M)
    rr = tl.where(m0 + rr < rows, rr, rows - 1 - m0)
    cn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    K64 = tl.cast(K, tl.int64)
    N64 = tl.cast(N, tl.int64)
    a_blk = a + tl.cast(a_row + m0, tl.int64) * K64 + k_lo
    a_off = rr[:, None] * K + rk[None, :]
    if W_NK:  # W_ex [N, K]: the [BLOCK_K, BLOCK_N] block at (k0, n0)
        w_blk = w + tl.cast(ex, tl.int64) * K64 * N64 + tl.cast(n0, tl.int64) * K64 + k_lo
        w_off = cn[None, :] * K + rk[:, None]
        w_step = BLOCK_K
    else:     # W_ex [K, N]
        w_blk = w + tl.cast(ex, tl.int64) * K64 * N64 + n0 + tl.cast(k_lo, tl.int64) * N64
        w_off = rk[:, None] * N + cn[None, :]
        w_step = BLOCK_K * N64
    nin = cn < N - n0
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        if EVEN_K:
            xa = tl.load(a_blk + a_off)
            if EVEN_N:
                wb = tl.load(w_blk + w_off)
            else:
                wb = tl.load(w_blk + w_off, mask=nin[None, :], other=0.0)
        else:
            kin = rk < K - k0
            xa = tl.load(a_blk + a_off, mask=kin[None, :], other=0.0)
            if EVEN_N:
                wb = tl.load(w_blk + w_off, mask=kin[:, None], other=0.0)
            else:
                wb = tl.load(w_blk + w_off, mask=kin[:, None] & nin[None, :], other=0.0)
        if UPCAST:  # the interpreter's dot multiplies 16-bit floats as raw integers
            acc = tl.dot(xa.to(tl.float32), wb.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(xa, wb, acc, input_precision=PRECISION)
        a_blk += BLOCK_K
        w_blk += w_step
    return acc


@triton.jit
def _tma_descs(a, w, a_rows, E, K, N, W_NK: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """TMA tensor descriptors (made on the device: 128 bytes each in Triton's global scratch,
    the host launcher's allocator) of this rank's A [a_rows, K] and W: [E, N, K] / [E, K, N]
    as 3-D, so a block past an expert's N (or K) is zero-filled, never the next expert's
    weights. Host: 16-bit, 16-byte aligned bases, K and N multiples of 8 (16-byte strides)."""
    K64 = tl.cast(K, tl.int64)
    N64 = tl.cast(N, tl.int64)
    a_desc = tl.make_tensor_descriptor(a, shape=[tl.maximum(a_rows, 1), K], strides=[K64, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    if W_NK:
        w_desc = tl.make_tensor_descriptor(w, shape=[E, N, K], strides=[N64 * K64, K64, 1],
                                           block_shape=[1, BLOCK_N, BLOCK_K])
    else:
        w_desc = tl.make_tensor_descriptor(w, shape=[E, K, N], strides=[N64 * K64, N64, 1],
                                           block_shape=[1, BLOCK_K, BLOCK_N])
    return a_desc, w_desc


@triton.jit
def _tile_tma(a_desc, w_desc, a_row, m0, n0, ex, k_lo, k_hi, W_NK: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """_tile through TMA: the A block [BLOCK_M, BLOCK_K] at (a_row + m0, k0) and the W block,
    copied by the tensor-memory accelerator straight into the swizzled shared memory wgmma
    reads (Triton's pipeliner multi-buffers them num_stages deep, with mbarriers): no address
    registers, no cp.async per thread. Rows past the expert's segment read the next rows of A
    (zero past A's end) and columns / K past the end read 0: the store masks the rows."""
    r0 = tl.cast(a_row + m0, tl.int32)  # TMA coordinates are 32-bit
    e0 = tl.cast(ex, tl.int32)
    c0 = tl.cast(n0, tl.int32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        kc = tl.cast(k0, tl.int32)
        xa = a_desc.load([r0, kc])
        if W_NK:
            wb = w_desc.load([e0, c0, kc]).reshape(BLOCK_N, BLOCK_K).T
        else:
            wb = w_desc.load([e0, kc, c0]).reshape(BLOCK_K, BLOCK_N)
        if UPCAST:
            acc = tl.dot(xa.to(tl.float32), wb.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(xa, wb, acc, input_precision=PRECISION)
    return acc


@triton.jit
def _store_rows(val, r0, out, dbase, me, P, rv, pre, end, drow, m0, n0, N, cmask,
                RB: tl.constexpr, BLOCK_N: tl.constexpr, DTYPE: tl.constexpr):
    """Rows [r0, r0 + RB) of a finished tile (val [RB, BLOCK_N], DTYPE) of the M tile at m0 of
    an expert, cut by source rank s (its rows [pre[s], end[s]) of the expert, first row drow[s]
    at s): each at its final row, into `out` (own rows) or at dbase[s] (s's symmetric out, or
    its staging laid out as out; 0: s is skipped, an error is recorded)."""
    rr = r0 + tl.arange(0, RB)
    cn = tl.arange(0, BLOCK_N)
    for s in range(0, P):
        lo = _pick(pre, rv, s) - m0                # tile rows [lo, hi) are s's
        hi = _pick(end, rv, s) - m0
        if (hi > lo) & (lo < r0 + RB) & (hi > r0):
            rmask = (rr >= lo) & (rr < hi)
            rd = tl.where(rmask, rr - lo, 0)
            offs = rd[:, None] * N + cn[None, :]
            smask = rmask[:, None] & cmask[None, :]
            toff = _pick(drow, rv, s) * N + n0
            if s == me:
                tl.store(out + toff + offs, val, mask=smask)
            else:
                db = _pick(dbase, rv, s)
                if db != 0:
                    # Staging starts 256-byte aligned, a symmetric out is announced only at a
                    # 16-byte aligned address; the hint must be inline (on a jit helper's
                    # result it is lost when Triton inlines it).
                    dst = db.to(tl.pointer_type(DTYPE))
                    dst = tl.multiple_of(dst, 16)
                    tl.store(dst + toff + offs, val, mask=smask)


# Sizes that change between calls are not specialised (a new value would mean a new compile,
# and the occupancy probe at B = 2 would not be the kernel launched); K and N are (alignment).
@triton.jit(do_not_specialize=["a_rows", "out_rows", "B", "P_host", "need"])
def gemm_alltoall_kernel(devs, as_, ws, outs, counts, Es, syms, symks, symos, a_rows, out_rows, K,
                         N, B, P_host, need, L: tl.constexpr, DTYPE: tl.constexpr, ES: tl.constexpr,
                         W_NK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, E_PAD: tl.constexpr,
                         P_PAD: tl.constexpr, EVEN_K: tl.constexpr, EVEN_N: tl.constexpr,
                         PRECISION: tl.constexpr, PHASES: tl.constexpr, VEC: tl.constexpr = False,
                         QV: tl.constexpr = 256, COPY_BLOCK: tl.constexpr = 2048,
                         UPCAST: tl.constexpr = False, SPLIT: tl.constexpr = 0,
                         WAIT_NS: tl.constexpr = fl.WAIT_NS, SK: tl.constexpr = 0,
                         SK_MAX_SLICES: tl.constexpr = 8, SK_MIN_SLICES: tl.constexpr = 4,
                         SK_MIN_KSTEPS: tl.constexpr = 8, SK_ITEMS: tl.constexpr = 64,
                         SK_RB: tl.constexpr = 64, TMA: tl.constexpr = False,
                         PROFILE: tl.constexpr = False, prof=None):
    # Per-rank arguments arrive as tuples of L (by value: nothing is copied to the device
    # before the launch, so a CUDA graph captures the call as it is).
    pid = tl.program_id(0)
    li = pid // B
    b = pid - li * B
    if PROFILE:  # prof[pid]: 8 int64 (bench/triton_diag.py reads them; PROF_FIELDS)
        t_start = fl.globaltimer()
        tl.store(prof + pid * 8 + 5, fl.smid().to(tl.int64))
    dev = tl.cast(devs[0], tl.int64)
    a = as_[0]
    w = ws[0]
    out = outs[0]
    cnts = counts[0]
    E = tl.cast(Es[0], tl.int32)  # a tensor even when Triton specialises a 1 as a constant
    tbl = tl.cast(syms[0], tl.int64)     # my symmetric-buffer table (0: none)
    symk = tl.cast(symks[0], tl.int64)   # slot + 1 of the buffer holding my out (0: none)
    symo = tl.cast(symos[0], tl.int64)   # my out's offset in it
    for x in tl.static_range(1, L):
        if li == x:
            dev = tl.cast(devs[x], tl.int64)
            a = as_[x]
            w = ws[x]
            out = outs[x]
            cnts = counts[x]
            E = tl.cast(Es[x], tl.int32)
            tbl = tl.cast(syms[x], tl.int64)
            symk = tl.cast(symks[x], tl.int64)
            symo = tl.cast(symos[x], tl.int64)

    me = fl.rank(dev)
    P = fl.world_size(dev)
    e = fl.call_epoch(dev)
    fl.epoch_guard(dev, OP)
    hoff = fl.half_offset(dev, e)
    have = fl.ws_bytes(dev)
    # A table that does not fit the launch must not turn into writes past a workspace.
    valid = ((P == P_host) & (P >= 1) & (P <= P_PAD) & (P <= fl.MAX_GPU_RANKS) & (me >= 0) &
             (me < P) & (((have // 2) & ~255) >= need) & (E >= 1) & (E <= E_PAD)).to(tl.int32)
    if valid == 0:
        if b == 0:
            fl.record_error(dev, fl.ERR_INTERNAL, OP, me, -1, 2 * tl.cast(need, tl.int64), have)
    P64 = tl.cast(P, tl.int64)
    hb = (8 * (7 + 3 * P64) + 127) // 128 * 128                # header slot bytes
    stg_off = hoff + (P64 * hb + 255) // 256 * 256              # staging, laid out as out
    rb = tl.cast(N, tl.int64) * ES
    plan_off = stg_off + (tl.cast(out_rows, tl.int64) * rb + 255) // 256 * 256
    sk_off = plan_off + (8192 * P64 + 1024 + 255) // 256 * 256  # + plan_bytes(P): stream-K

    if PHASES & 1:
        if valid != 0:
            if b == 0:
                _post_header(dev, cnts, E, a_rows, N, B, e, hoff, hb, plan_off, sk_off, tbl,
                             symk, symo, BLOCK_M, BLOCK_N, E_PAD, P_PAD, SPLIT, SK, SK_ITEMS)

    if PHASES & 6:
        # ---- every rank's header: verdict, placement (identical on every rank) ----
        ok = valid
        for q in range(0, P):
            if ok != 0:
                ok = fl.wait(dev, q, HDR_SLOT, fl.sig_value(e, 0), OP, WAIT_NS)
        if PROFILE:
            t_hdr = fl.globaltimer()
            t_tiles = t_hdr
            t_land = t_hdr
            n_done = 0
        hdr = fl.peer_ptr(dev, me, hoff, tl.int64)
        hw = hb // 8
        rv = tl.arange(0, P_PAD)
        rm1 = (rv < P) & (valid != 0)  # a bad table: read nothing
        hvalid = tl.load(hdr + rv * hw, mask=rm1, other=1, cache_modifier=".cg")
        hwhy = tl.load(hdr + rv * hw + 3, mask=rm1, other=0, cache_modifier=".cg")
        T = tl.load(hdr + rv[:, None] * hw + 4 + rv[None, :], mask=rm1[:, None] & rm1[None, :],
                    other=0, cache_modifier=".cg")                # T[r, s]: rows r sends s
        first_bad = tl.min(tl.where(rm1 & (hvalid != 1), rv, P_PAD))
        colsum = tl.sum(T, axis=0)
        first_over = tl.min(tl.where(rm1 & (colsum > out_rows), rv, P_PAD))
        verdict = tl.where(first_bad < P,
                           tl.where(_pick(hwhy, rv, first_bad) == WHY_COUNTS_CHANGED,
                                    WHY_COUNTS_CHANGED, WHY_BAD_COUNTS),
                           tl.where(first_over < P, WHY_BAD_CAPACITY, 0))
        bad_rank = tl.where(first_bad < P, first_bad, first_over)
        if ok != 0:
            if verdict != 0:
                if b == 0:
                    fl.record_error(dev, ERR_INVALID_ARGUMENT, OP, bad_rank, verdict, 0, 0)
        work = (ok != 0) & (verdict == 0)
        base = tl.sum(tl.where(rv[:, None] < me, T, 0), axis=0)  # [s]: my first row at s
        recv = tl.sum(tl.where(rv[None, :] == me, T, 0), axis=1)  # [r]: rows r sends me
        roff = tl.cumsum(recv, 0) - recv                         # [r]: where they start

        if PHASES & 2:
            # ---- tiles: those touching peers' rows first, each row stored at its final place ----
            if work:
                nN = (N + BLOCK_N - 1) // BLOCK_N
                p_arow, p_rows, p_jl0, p_jl1, p_tbr, p_tbl, p_sc, p_cnt, p_dloc = _plan_ptrs(
                    dev, plan_off, P)
                ev = tl.arange(0, E_PAD)
                em = ev < E
                big = 0x7FFFFFFF
                tbrv = tl.load(p_tbr + ev, mask=em, other=big, cache_modifier=".cg")
                tblv = tl.load(p_tbl + ev, mask=em, other=big, cache_modifier=".cg")
                t_r = tl.load(p_sc, cache_modifier=".cg")
                total = tl.load(p_sc + 1, cache_modifier=".cg")
                sendv = tl.sum(tl.where(rv[:, None] == me, T, 0), axis=0)  # [s]: rows I send s
                # my first tile past the remote ones: the flags go out just before it
                b64 = tl.cast(b, tl.int64)
                t_sig = tl.where(b64 >= t_r, b64, b64 + (t_r - b64 + B - 1) // B * B)
                # where my rows for s go (fco_ga_direct): s's symmetric out when its header
                # announces one (slot k) and my header says I hold slot k (entry [k][s] of my
                # table, + its offset), else s's staging (the same offset in every rank's
                # workspace), which s then lands; 0 only when my table lost the slot after my
                # header (freed during the call: a usage error, recorded; nothing stored to s)
                hk = tl.load(hdr + rv * hw + 4 + 3 * P, mask=rm1, other=0, cache_modifier=".cg")
                ho = tl.load(hdr + rv * hw + 5 + 3 * P, mask=rm1, other=0, cache_modifier=".cg")
                myheld = tl.load(hdr + me * hw + 6 + 3 * P, cache_modifier=".cg")
                direct = ((hk > 0) & (hk <= MAX_SYM) & rm1 & (rv != me) &
                          (((myheld >> tl.maximum(hk - 1, 0)) & 1) != 0))
                tent = tl.load(fl.addr_ptr(tbl + ((hk - 1) * MAXR + rv) * 8, tl.int64),
                               mask=direct & (tbl != 0), other=0)
                pbase = tl.load(fl.field_ptr(dev, fl.OFF_PEER_DATA, tl.int64) + rv, mask=rm1,
                                other=0)
                dbase = tl.where(direct, tl.where(tent != 0, tent + ho, 0), pbase + stg_off)
                lost = tl.min(tl.where(direct & (tent == 0), rv, P_PAD))
                if lost < P:
                    if b == 0:
                        fl.record_error(dev, ERR_INVALID_USAGE, OP, lost,
                                        _pick(hk, rv, lost) - 1, 0, 0)
                cn = tl.arange(0, BLOCK_N)
                if TMA:  # once per program, before its first tile
                    a_desc, w_desc = _tma_descs(a, w, a_rows, E, K, N, W_NK, BLOCK_M, BLOCK_N,
                                                BLOCK_K)
                n_it = total
                if SK:
                    # Stream-K tail: the last wave's R = total mod B tiles, when R is small
                    # against B, become R·S work items (S K-slices each, R·S <= B: one per
                    # program, after its full tiles). streamk_split() mirrors this rule.
                    nk = (K + BLOCK_K - 1) // BLOCK_K
                    rem = total % B
                    rem1 = tl.maximum(rem, 1)
                    S = tl.minimum(tl.minimum(B // rem1, nk // SK_MIN_KSTEPS),
                                   tl.minimum(SK_MAX_SLICES, SK_ITEMS // rem1))
                    nsp = tl.where((rem > 0) & (S >= SK_MIN_SLICES), rem, 0)
                    S = tl.where(nsp > 0, S, 1)
                    nsp1 = tl.maximum(nsp, 1)
                    t_full = total - nsp  # a multiple of B: item t_full + b is program b's
                    n_it = t_full + nsp * S
                    # the flags: before the first full tile past the remote ones, else before
                    # a tail item of a local-only tile, else after the last item
                    t_sig = tl.where(t_sig < t_full, t_sig,
                                     tl.where((b < nsp * S) & (t_full + b % nsp1 >= t_r),
                                              t_full + b, n_it))
                    cnt_p = fl.peer_ptr(dev, me, sk_off, tl.int32)
                    part_p = fl.peer_ptr(dev, me, sk_off + (4 * SK_ITEMS + 255) // 256 * 256,
                                         tl.float32)
                for it in range(b, n_it, B):
                    if it == t_sig:
                        _signal_peers(dev, sendv, rv, me, P, b, e)
                    if SK:
                        u = it - t_full
                        sk = u >= 0
                        ti = u % nsp1                              # split tile t_full + ti
                        sl = u // nsp1                             # its K slice
                        t = tl.where(sk, t_full + ti, it)
                        k_lo = tl.where(sk, sl * nk // S * BLOCK_K, 0)
                        k_hi = tl.where(sk, (sl + 1) * nk // S * BLOCK_K, K)
                    else:
                        t = it
                        k_lo = 0
                        k_hi = K
                    inr = t < t_r
                    tbv = tl.where(inr, tbrv, tblv)
                    ex = tl.sum((tbv <= t).to(tl.int32)) - 1       # last expert starting ≤ t
                    tb_r = tl.load(p_tbr + ex, cache_modifier=".cg")
                    tb_l = tl.load(p_tbl + ex, cache_modifier=".cg")
                    rows = tl.load(p_rows + ex, cache_modifier=".cg")
                    a_row = tl.load(p_arow + ex, cache_modifier=".cg")
                    jl0 = tl.load(p_jl0 + ex, cache_modifier=".cg")
                    jl1 = tl.load(p_jl1 + ex, cache_modifier=".cg")
                    cv = tl.load(p_cnt + ex * P + rv, mask=rv < P, other=0, cache_modifier=".cg")
                    dv = tl.load(p_dloc + ex * P + rv, mask=rv < P, other=0,
                                 cache_modifier=".cg")
                    nM = (rows + BLOCK_M - 1) // BLOCK_M
                    nm = tl.where(inr, jl0 + nM - jl1, jl1 - jl0)  # M tiles of this run
                    l = t - tl.where(inr, tb_r, tb_l)
                    # grouped order: GROUP_M M tiles × every N tile, M fastest (W shared in L2)
                    grp = l // (GROUP_M * nN)
                    inn = l - grp * GROUP_M * nN
                    gm = tl.minimum(GROUP_M, nm - grp * GROUP_M)
                    i = grp * GROUP_M + inn % gm
                    jm = tl.where(inr, tl.where(i < jl0, i, jl1 + i - jl0), jl0 + i)
                    m0 = (jm * BLOCK_M).to(tl.int32)
                    n0 = ((inn // gm) * BLOCK_N).to(tl.int32)
                    if TMA:
                        acc = _tile_tma(a_desc, w_desc, a_row, m0, n0, ex, k_lo, k_hi, W_NK,
                                        BLOCK_M, BLOCK_N, BLOCK_K, PRECISION, UPCAST)
                    else:
                        acc = _tile(a, w, a_row, rows, m0, n0, ex, K, N, k_lo, k_hi, W_NK,
                                    BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, EVEN_N, PRECISION, UPCAST)
                    cmask = cn < N - n0
                    end = tl.cumsum(cv, 0)                         # [s]: past s's rows of ex
                    pre = end - cv                                 # [s]: first row of s in ex
                    drow = base + dv                               # [s]: its first row at s
                    # the tile's rows [m0, m0 + BLOCK_M) of expert ex, cut by source rank s
                    fin = 1
                    if SK:
                        if sk:
                            # my slice's fp32 partial into slot ti·S + sl, then count it
                            # (release: bar.sync orders every thread's stores before thread
                            # 0's atomic); the last of the S slices to arrive (acquire: it
                            # sees every partial) sums the S partials in slice order
                            # (deterministic, whatever the arrival order) and stores the tile
                            # as an unsplit tile is stored.
                            tile_el = BLOCK_M * BLOCK_N
                            ro = tl.arange(0, BLOCK_M)
                            pp = part_p + tl.cast(ti * S + sl, tl.int64) * tile_el
                            pp = tl.multiple_of(pp, 16)  # 256-byte aligned slots (inline hint)
                            tl.store(pp + ro[:, None] * BLOCK_N + cn[None, :], acc)
                            tl.debug_barrier()
                            old = tl.atomic_add(cnt_p + ti, 1, sem="acq_rel", scope="gpu")
                            fin = (old == S - 1).to(tl.int32)
                            if fin != 0:
                                p0 = part_p + tl.cast(ti * S, tl.int64) * tile_el
                                p0 = tl.multiple_of(p0, 16)
                                for c0 in range(0, BLOCK_M, SK_RB):
                                    rc = c0 + tl.arange(0, SK_RB)
                                    offs = rc[:, None] * BLOCK_N + cn[None, :]
                                    v = tl.load(p0 + offs, cache_modifier=".cg")
                                    for q in range(1, S):
                                        v += tl.load(p0 + q * tile_el + offs,
                                                     cache_modifier=".cg")
                                    _store_rows(v.to(DTYPE), c0, out, dbase, me, P, rv, pre,
                                                end, drow, m0, n0, N, cmask, SK_RB, BLOCK_N,
                                                DTYPE)
                        else:
                            _store_rows(acc.to(DTYPE), 0, out, dbase, me, P, rv, pre, end,
                                        drow, m0, n0, N, cmask, BLOCK_M, BLOCK_N, DTYPE)
                    else:
                        _store_rows(acc.to(DTYPE), 0, out, dbase, me, P, rv, pre, end, drow,
                                    m0, n0, N, cmask, BLOCK_M, BLOCK_N, DTYPE)
                    if PROFILE:
                        n_done += fin
                if t_sig >= n_it:
                    _signal_peers(dev, sendv, rv, me, P, b, e)
            if PROFILE:
                t_tiles = fl.globaltimer()
                t_land = t_tiles

        if PHASES & 4:
            # ---- land: wait for each peer's tiles, copy my slice of its rows into out ----
            stg = (fl.peer_base(dev, me) + stg_off).to(tl.pointer_type(DTYPE))
            stg = tl.multiple_of(stg, 16)
            for k in range(1, P):
                r = (me + k) % P
                n_r = _pick(recv, rv, r)
                if work:
                    if n_r > 0:
                        g = tl.load(hdr + r * hw + 2, cache_modifier=".cg")
                        t0 = tl.load(hdr + r * hw + 4 + 2 * P + me, cache_modifier=".cg")
                        nt = tl.load(hdr + r * hw + 4 + P + me, cache_modifier=".cg")
                        okw = _wait_tiles(dev, r, g, t0, nt, e, QV, WAIT_NS)
                        if PROFILE:
                            t_land = fl.globaltimer()
                        work = work & (okw != 0)
                        # nothing to land from r when it stored into my symmetric out: I
                        # announced a slot (symk) that r's header says it holds (fco_ga_direct)
                        rheld = tl.load(hdr + r * hw + 6 + 3 * P, cache_modifier=".cg")
                        stg_r = ((symk <= 0) | (symk > MAX_SYM) |
                                 (((rheld >> tl.maximum(symk - 1, 0)) & 1) == 0)).to(tl.int32)
                        if (okw != 0) & (stg_r != 0):
                            nel = n_r * N
                            per = ((nel + B - 1) // B + 63) // 64 * 64
                            b0 = tl.minimum(nel, b * per)
                            b1 = tl.minimum(nel, b0 + per)
                            o0 = _pick(roff, rv, r) * N
                            ci = tl.arange(0, COPY_BLOCK)
                            for c0 in range(b0, b1, COPY_BLOCK):
                                x0 = o0 + c0
                                lim = b1 - c0
                                if VEC:  # N % 8 == 0: every cut point is a multiple of 8
                                    x0 = tl.multiple_of(x0, 8)
                                    lim = tl.multiple_of(lim, 8)
                                m = ci < lim
                                v = tl.load(stg + x0 + ci, mask=m, cache_modifier=".cg")
                                tl.store(out + x0 + ci, v, mask=m)
            if PROFILE:
                tl.store(prof + pid * 8 + 0, t_start.to(tl.int64))
                tl.store(prof + pid * 8 + 1, t_hdr.to(tl.int64))
                tl.store(prof + pid * 8 + 2, t_tiles.to(tl.int64))
                tl.store(prof + pid * 8 + 3, t_land.to(tl.int64))
                tl.store(prof + pid * 8 + 4, fl.globaltimer().to(tl.int64))
                tl.store(prof + pid * 8 + 6, tl.cast(n_done, tl.int64))
            fl.epoch_end(dev, e, B)


@triton.jit
def _read_sk_counters(dev, rel_off, out, ITEMS: tl.constexpr):
    """The stream-K counters of this rank's last call (they stay until the next call using
    that half resets them)."""
    base = fl.peer_base(dev, fl.rank(dev)) + fl.half_offset(dev, fl.epoch(dev)) + rel_off
    i = tl.arange(0, ITEMS)
    tl.store(out + i, tl.load(base.to(tl.pointer_type(tl.int32)) + i, cache_modifier=".cg"))
