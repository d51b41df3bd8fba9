"""gemm_alltoall.py — GEMM + All-to-All (the MoE expert down-projection + combine) written in
Triton with fco.triton: the Triton twin of fco_gemm_alltoall impl 1 (src/cuda/
gemm_alltoall_fused.cu), on the same communicator and with the same wire protocol.

Semantics (include/fco.h, docs/gemm_alltoall.md): rank r holds A_r [a_rows, K] whose rows are
grouped by local expert, then by source rank, W_r [E_r, K, N] ("kn") or [E_r, N, K] ("nk"), and
DEVICE counts_r [E_r, P] int32 (rows of expert e that came from rank s). Rank s's out
[out_rows, N] = every rank's rows that came from s, ordered by source rank r, then expert,
row order kept. Rows past the received total are not written. bf16 / f16 with fp32
accumulation (tl.dot: wgmma on sm_90), f32 in fp32 (input_precision "ieee", no TF32).

Design (one persistent launch; program → (local rank li = pid // B, part b = pid % B)):
  1. header    part 0 reads the device counts and builds, with exclusive prefix sums
               (tl.cumsum), the tile plan in the private plan area of this call's half: per
               expert its first A row, its rows (every source's: they are contiguous in A),
               its local-only M tiles [jl0, jl1) and first tiles, per (expert, source) the rows
               and the first row among them at the source. Then it puts its header {valid, E,
               B, why, tot[s], tiles[s] = B where tot[s] > 0, tstart[s]} into slot [me] of
               every rank's header area (its own included) and release-signals sig[me][1023]
               there. The release also publishes the plan to the rank's other programs.
  2. verdict   every program waits for all P headers (acquire, bounded) and derives from them
               alone — so every rank reaches the same — the verdict (all valid, Σ_r tot_r[s] ≤
               out_rows for every s; else FCO_ERR_INVALID_ARGUMENT on every rank, nothing
               written), base[s] (where my rows start in s's out) and what each peer sends me.
  3. tiles     t = b, b + B, ... of the rank's tile list: M tiles over an expert's rows of
               every source (W read once per tile row, not once per destination: few rows
               per expert make one M tile, not one per source) × N tiles, groups of GROUP_M M
               tiles (L2 reuse of W). SPLIT (compute-bound shapes, > 256 rows per expert on
               average): first every expert's tiles that touch a peer's rows, then the
               local-only ones; else every expert's tiles in one run. tl.dot tile (fp32
               accumulator; A and W blocks by pointer loads, a cp.async pipeline, or with
               TMA=1 through device-side tensor descriptors: FCO_TRITON_GA_TMA, on by default
               on GPUs since run 63585a1), rounded, each source's rows stored straight at their final rows: into `out` (own rows) or into the destination's
               staging (laid out as its out). Before its first local-only tile (or at the end)
               part b raises sig_value(e, 0) on slot [me][b] of every peer it has rows for:
               one flag per part and peer, so the header's tiles[s] = B makes count_mod give
               every part exactly 1 and impl 1's receivers count it unchanged.
               Stream-K tail (SK, streamk=; on by default on GPUs since run 63585a1): with the tile count
               known on the device, the last wave's R = total mod B tiles, when R is small
               against B (S = min(B // R, K tiles // min_ksteps, max_slices, items // R) >=
               min_slices), are cut into S K-slices: R·S work items, at most one per program,
               after its full tiles. A slice stores its fp32 partial into the private scratch
               and counts it (atomic acq_rel, a counter per split tile that part 0 zeroes
               before the header's release); the last of the S to arrive sums the partials in
               slice order (deterministic) and stores the tile as an unsplit tile is stored.
               The flags go out before a program's first item of a local-only tile, else after
               its last item: still one per part and peer, after every peer row it stored.
  4. land      from each peer r: part q of r raised count_mod(tstart, tstart + tiles, q, G_r)
               flags here (r's header); every program waits for all those flags (a vector of
               acquire loads; polled with volatile loads and a nanosleep backoff of up to
               WAIT_NS ns), then copies its slice of r's rows from staging into out.
  end          the last program of each rank advances the epoch.
Workspace: exactly impl 1's (src/ops/gemm_alltoall.h): half h = e & 1 holds the header area,
  staging (out_rows × N) — what peers write — then the private plan area. Need 2·(R + plan)
  bytes per rank, fco_gemm_alltoall_workspace(impl 1). Header, slots and flag values are impl
  1's too, so a C rank and a Triton rank can even run one call together (one process each).
  With stream-K on, each half also holds the private scratch after the plan (sk_scratch_bytes:
  the counters, then `items` fp32 tiles): need 2·(R + plan + scratch); it depends on the tile
  and the knob, so every rank must choose them alike (workspace growth is collective).
Launch requirements: every rank runs the same sequence of epoch-advancing calls with the same
  a_rows, out_rows, K, N, dtype, w_layout; all num_local·B programs co-resident (B from the
  compiled kernel's occupancy); B ≤ 1022 (slots 1022 / 1023 are impl 2's "done" and the header).
  Tile sizes and orders may differ between ranks (receivers only count flags), but with
  stream-K on the scratch, hence the workspace need, follows the tile: choose it alike there.
  split_phases=True launches steps 1, 2-3 and 2-4 as three kernels (no co-residency need, no
  overlap): what Triton's CPU interpreter runs, where programs execute one after another.
"""
import os

import triton
import triton.language as tl

from .. import _lib
from .._lib import FcoError
from . import host, layout
from . import language as fl

OP = tl.constexpr(layout.OP_GEMM_ALLTOALL)
HDR_SLOT = tl.constexpr(layout.SIG_SLOTS - 1)  # kHdrSlot of src/cuda/gemm_alltoall.cuh
MAX_PARTS = layout.SIG_SLOTS - 2               # kMaxParts: tile-part slots
MAX_EXPERTS = 256                              # FCO_GEMM_ALLTOALL_MAX_EXPERTS
LAYOUTS = {"kn": 0, "nk": 1}
WHY_BAD_COUNTS = tl.constexpr(1)     # a negative count, or Σ counts > a_rows
WHY_BAD_CAPACITY = tl.constexpr(2)   # a receiver would need more than out_rows
WHY_COUNTS_CHANGED = tl.constexpr(4)  # impl 2's digest (only a C rank posts it)
ERR_INVALID_ARGUMENT = tl.constexpr(layout.ERR_INVALID_ARGUMENT)
ERR_INVALID_USAGE = tl.constexpr(layout.ERR_INVALID_USAGE)
MAXR = tl.constexpr(layout.MAX_GPU_RANKS)   # row length of the symmetric-buffer table
MAX_SYM = tl.constexpr(layout.MAX_SYMMETRIC)  # its rows
_NAME = "fco.triton.gemm_alltoall"


# ---- workspace layout (src/ops/gemm_alltoall.h, mirrored) -------------------------------------
def hdr_bytes(P):
    return (8 * (6 + 3 * int(P)) + 127) // 128 * 128   # FCO_GA_HDR_WORDS(P) int64 words


def off_staging(P):
    return layout.round_up(int(P) * hdr_bytes(P), 256)


def peer_bytes(P, out_rows, n, es):
    return off_staging(P) + layout.round_up(int(out_rows) * int(n) * int(es), 256)


def plan_bytes(P):
    return layout.round_up(MAX_EXPERTS * int(P) * 32 + 1024, 256)


def half_need(P, out_rows, n, es, scratch=0):
    """Bytes one half must hold: fco_ga_half_need(impl 1), + the stream-K scratch if any."""
    return peer_bytes(P, out_rows, n, es) + plan_bytes(P) + int(scratch)


def workspace_bytes(P, out_rows, n, es, scratch=0):
    """Data workspace per rank: 2 halves (= fco_gemm_alltoall_workspace(..., impl 1) without
    stream-K; scratch = sk_scratch_bytes(...) of the launch when it is on)."""
    return 2 * half_need(P, out_rows, n, es, scratch)


# ---- stream-K tail (split the last partial wave's tiles along K) -------------------------------
# Private scratch after the plan area of the call's half, at h·H + R + plan_bytes(P):
#   [0, sk_cnt_bytes)            int32 counters, one per split tile (reset by part 0 each call)
#   [sk_cnt_bytes, + items·tile) fp32 partial tiles [BLOCK_M, BLOCK_N], slot = tile·S + slice
# Peers never write there (it lies past R), and only this call's programs use it.
SK_DEFAULTS = dict(max_slices=8, min_slices=4, min_ksteps=8, items=64, rows=64)
SK_OFF = dict(on=0, **SK_DEFAULTS)


def sk_cnt_bytes(items):
    return layout.round_up(4 * int(items), 256)


def sk_scratch_bytes(sk, bm, bn):
    """Bytes of the stream-K scratch in each half (0 when off)."""
    if not sk or not sk["on"]:
        return 0
    return sk_cnt_bytes(sk["items"]) + int(sk["items"]) * int(bm) * int(bn) * 4


def streamk_config(streamk, nk, interpret=None):
    """The stream-K choice from host values: dict(on, max_slices, min_slices, min_ksteps, items).
    streamk: None (FCO_TRITON_GA_STREAMK: "0" off, "1" on, "n" on with at most n slices a
    tile; unset / "": on for GPU launches — measured in run 63585a1 with the TMA tile loop, see
    docs/triton.md — and off under the interpreter, interpret = fl.INTERPRET by default), False /
    0, True / 1, an int n >= 2 (on, max_slices n), or a dict overriding SK_DEFAULTS' keys (on;
    tests force small values). nk = K tiles (ceil(K / BLOCK_K)): when no tile could ever be cut
    into min_slices slices of min_ksteps K tiles it is off (no scratch)."""
    def bad(msg):
        raise FcoError(_lib.INVALID_ARGUMENT, msg, _NAME)

    if streamk is None:
        env = os.environ.get("FCO_TRITON_GA_STREAMK", "").strip()
        try:
            streamk = int(env) if env else int(not (fl.INTERPRET if interpret is None
                                                    else interpret))
        except ValueError:
            bad(f"FCO_TRITON_GA_STREAMK={env!r}: expected 0 (off), 1 (on) or the most slices "
                "per tile (2..64)")
        if streamk < 0 or streamk > 64:
            bad(f"FCO_TRITON_GA_STREAMK={env!r}: expected 0 (off), 1 (on) or the most slices "
                "per tile (2..64)")
    if isinstance(streamk, dict):
        unknown = set(streamk) - set(SK_DEFAULTS)
        if unknown:
            bad(f"streamk has keys {sorted(unknown)}; expected some of {sorted(SK_DEFAULTS)}")
        sk = dict(SK_DEFAULTS, **{k: int(v) for k, v in streamk.items()}, on=1)
    elif streamk in (False, 0, None):
        return dict(SK_OFF)
    elif streamk is True or streamk == 1:
        sk = dict(SK_DEFAULTS, on=1)
    elif isinstance(streamk, int) and streamk >= 2:
        sk = dict(SK_DEFAULTS, max_slices=int(streamk), on=1)
    else:
        bad(f"streamk {streamk!r}: expected None, 0/False, 1/True, the most slices (>= 2) or "
            "a dict")
    it, rows = sk["items"], sk["rows"]
    if not (2 <= it <= 1024 and it & (it - 1) == 0 and 2 <= sk["min_slices"] <= sk["max_slices"]
            <= it and sk["min_ksteps"] >= 1 and 1 <= rows <= 256 and rows & (rows - 1) == 0):
        bad(f"streamk {sk}: expected items a power of two in 2..1024, 2 <= min_slices <= "
            "max_slices <= items, min_ksteps >= 1, rows (of the last slice's sum at a time) a "
            "power of two in 1..256")
    if int(nk) // sk["min_ksteps"] < sk["min_slices"]:
        return dict(SK_OFF)
    return sk


def streamk_split(total, B, nk, sk):
    """The device's rule, mirrored (tests, diagnostics): (t_full, nsplit, S). With R = total mod
    B tiles in the last wave, S = min(B // R, nk // min_ksteps, max_slices, items // R) slices;
    when S >= min_slices the last R tiles are split into S K-slices each (R·S <= B work items,
    one per program), else nothing is (t_full = total, nsplit 0, S 1)."""
    if not sk or not sk["on"]:
        return total, 0, 1
    rem = total % B
    if rem == 0:
        return total, 0, 1
    S = min(B // rem, nk // sk["min_ksteps"], sk["max_slices"], sk["items"] // rem)
    if S < sk["min_slices"]:
        return total, 0, 1
    return total - rem, rem, S


# ---- TMA (tensor descriptors) for the tile loop -------------------------------------------------
_tma_warned = set()


def _tma_warn(key, msg):
    if key not in _tma_warned:
        _tma_warned.add(key)
        import warnings

        warnings.warn(f"{_NAME}: {msg}; FCO_TRITON_GA_TMA falls back to the pointer path",
                      RuntimeWarning, stacklevel=3)


def tma_api():
    """Whether this Triton has device-side tensor descriptors (tl.make_tensor_descriptor, with
    triton.set_allocator for their global scratch: Triton >= 3.4)."""
    return hasattr(tl, "make_tensor_descriptor") and hasattr(triton, "set_allocator")


def tma_config(tma, esize, K, N, tensors=(), device=None, interpret=None):
    """(on, why): whether the tile loop reads A and W through TMA tensor descriptors.
    tma: None (FCO_TRITON_GA_TMA, read per call: "0" off, "1" on; unset / "": on for GPU
    launches where it can run — measured in run 63585a1, docs/triton.md — and off under the
    interpreter, interpret = fl.INTERPRET by default), 0 / False, 1 / True. Asked for but not
    possible → (0, the reason), never an error (the default falls back silently, an explicit
    request warns once where the Triton or the GPU lacks TMA):
    16-bit dtypes only (f32 keeps its FFMA tiles), K and N multiples of 8 (16-byte strides),
    every tensor's base 16-byte aligned, a Triton with tensor descriptors and a GPU with TMA
    (sm_90+); the last two warn once. Under the interpreter descriptors are emulated (no TMA):
    it runs the same index math, which is what the CPU tests check."""
    if tma is None:
        env = os.environ.get("FCO_TRITON_GA_TMA", "").strip()
        if env not in ("", "0", "1"):
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"FCO_TRITON_GA_TMA={env!r}: expected 0 (off) or 1 (on)", _NAME)
        explicit = env != ""
        tma = env == "1" if explicit else not (fl.INTERPRET if interpret is None else interpret)
    else:
        explicit = True
    if tma not in (0, 1, False, True):
        raise FcoError(_lib.INVALID_ARGUMENT, f"tma {tma!r}: expected None, 0 or 1", _NAME)
    if not tma:
        return 0, "off"
    if int(esize) != 2:
        return 0, "f32 (TMA path is 16-bit only)"
    if int(K) % 8 or int(N) % 8:
        return 0, f"K {K} / N {N} not multiples of 8 (TMA strides must be 16-byte multiples)"
    if any(t.data_ptr() % 16 for t in tensors):
        return 0, "a tensor's base is not 16-byte aligned"
    if not tma_api():
        if explicit:
            _tma_warn("api", f"Triton {triton.__version__} has no tl.make_tensor_descriptor / "
                      "triton.set_allocator")
        return 0, "no tensor descriptors in this Triton"
    if device is not None and getattr(device, "type", "") == "cuda" and not fl.INTERPRET:
        import torch

        cap = torch.cuda.get_device_capability(device)
        if cap[0] < 9:
            if explicit:
                _tma_warn(("cap", cap), f"sm_{cap[0]}{cap[1]} has no TMA")
            return 0, f"sm_{cap[0]}{cap[1]} has no TMA"
    return 1, "on"


def _torch_scratch(size, alignment, stream):
    """Triton's global scratch (device-side TMA descriptors: 128 bytes each per program) from
    torch's caching allocator on the current device and stream (CUDA-graph safe: a capture
    takes it from the graph's pool)."""
    import torch

    return torch.empty(int(size), dtype=torch.int8, device="cuda")


def ensure_allocator():
    """Kernels that make tensor descriptors on the device need triton.set_allocator; set
    fco's (torch's caching allocator) unless the caller set one. Per thread (Triton keeps
    it in a ContextVar), so checked at every TMA launch."""
    try:
        from triton.runtime import _allocation as al

        cur = al._allocator.get()
        if not isinstance(cur, al.NullAllocator):
            return
    except (ImportError, AttributeError):
        pass
    triton.set_allocator(_torch_scratch)


def tile_total(counts, bm, bn, N):
    """Output tiles of one rank from its counts [E, P] (host copy): the device plan's total."""
    c = [[max(0, int(x)) for x in row] for row in counts.tolist()]
    return -(-int(N) // bn) * sum(-(-sum(row) // bm) for row in c)


# ---- device code --------------------------------------------------------------------------------
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
def _post_header(dev, counts, E, a_rows, N, B, e, hoff, hb, plan_off, sk_off, symk, symo,
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
    on this half before — back-to-back calls and graph replays alike."""
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
                bad = bad | (fl.error_set(dev) != 0)
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
    Scalar int64 bases, int32 offsets inside the tile (host: BLOCK·K, BLOCK·N < 2^31): half
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
    hb = (8 * (6 + 3 * P64) + 127) // 128 * 128                # header slot bytes
    stg_off = hoff + (P64 * hb + 255) // 256 * 256              # staging, laid out as out
    rb = tl.cast(N, tl.int64) * ES
    plan_off = stg_off + (tl.cast(out_rows, tl.int64) * rb + 255) // 256 * 256
    sk_off = plan_off + (8192 * P64 + 1024 + 255) // 256 * 256  # + plan_bytes(P): stream-K

    if PHASES & 1:
        if valid != 0:
            if b == 0:
                _post_header(dev, cnts, E, a_rows, N, B, e, hoff, hb, plan_off, sk_off, symk,
                             symo, BLOCK_M, BLOCK_N, E_PAD, P_PAD, SPLIT, SK, SK_ITEMS)

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
                # where my rows for s go: s's symmetric out when its header announces one
                # (slot k: entry [k][s] of my table, + its offset), else s's staging (the same
                # offset in every rank's workspace); 0 when s announced a buffer my table lacks
                # (freed here: a usage error, recorded; nothing is stored to s)
                hk = tl.load(hdr + rv * hw + 4 + 3 * P, mask=rm1, other=0, cache_modifier=".cg")
                ho = tl.load(hdr + rv * hw + 5 + 3 * P, mask=rm1, other=0, cache_modifier=".cg")
                tbl_ok = (tbl != 0) & (hk > 0) & (hk <= MAX_SYM) & rm1
                tent = tl.load(fl.addr_ptr(tbl + ((hk - 1) * MAXR + rv) * 8, tl.int64),
                               mask=tbl_ok, other=0)
                pbase = tl.load(fl.field_ptr(dev, fl.OFF_PEER_DATA, tl.int64) + rv, mask=rm1,
                                other=0)
                dbase = tl.where(hk > 0, tl.where(tent != 0, tent + ho, 0), pbase + stg_off)
                lost = tl.min(tl.where((hk > 0) & (tent == 0) & rm1 & (rv != me), rv, P_PAD))
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
                        if (okw != 0) & (symk == 0):  # a symmetric out: the peers stored there
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


# ---- host side ---------------------------------------------------------------------------------
def _tl_dtype(dt):
    import torch

    return {torch.float32: tl.float32, torch.float16: tl.float16,
            torch.bfloat16: tl.bfloat16}.get(dt)


def _next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def plan(dtype_bytes, n, a_rows, e_max, nranks, interpret=False):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) from values this process knows on the
    host (never the device counts). Ranks may differ: receivers only count flags.
    16-bit: 128×256×64, 8 warps, 3 stages (128×128 when N < 2048) whatever the rows per expert:
    M tiles run over an expert's rows of every source at once, so few rows per expert cost
    one tile row (W read once). The 64×128 tile of 4 warps that segments of ≤ 64 rows had
    took 1654 µs on 2×H200 where chunks took 239 (128 tokens, K 2048, N 7168, 32 experts,
    top-8), 4× what this tile took for the same W traffic at 512 tokens.
    FCO_TRITON_GA_TILE="bm,bn,bk,warps,stages" overrides (experiments)."""
    env = os.environ.get("FCO_TRITON_GA_TILE", "")
    if env:
        try:
            v = [int(x) for x in env.split(",")]
            if len(v) == 5 and all(x >= 1 for x in v) and all(
                    x >= 16 and x & (x - 1) == 0 for x in v[:3]):
                return tuple(v)
        except ValueError:
            pass
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"FCO_TRITON_GA_TILE={env!r}: expected bm,bn,bk,warps,stages (tile sizes "
                       "powers of two >= 16)", _NAME)
    if interpret:
        return 16, 16, 16, 1, 1
    if dtype_bytes == 4:  # FFMA (no TF32): small tiles
        return 64, 64, 32, 4, 3
    return 128, 256 if n >= 2048 else 128, 64, 8, 3


def tile_order(dtype_bytes, a_rows, e_max, interpret=False):
    """SPLIT (1) or not (0), from host values only. 1: the tiles touching peers' rows of every
    expert first, the local-only ones after — the flags go out after the first of them and the
    peers land while the local tiles run, at the price of reading W twice where an expert has
    both (hidden where the GEMM is compute-bound). 0: every expert's tiles in one run, W read
    once; every flag goes out after the part's last tile, so the landing waits for the last
    tile of the peer's slowest part: right for memory-bound shapes only, ≤ 256 rows per expert
    on average (arithmetic intensity rows FLOP/byte of W against the H200's ridge of ~184).
    Between 256 and 512 rows (1024 tokens, top-2, 8 experts: 512) it used to be merged, and
    that workload took 2148 µs where the remote-first order of run 462750b took 490.
    FCO_TRITON_GA_ORDER=split|merged overrides."""
    env = os.environ.get("FCO_TRITON_GA_ORDER", "")
    if env:
        if env not in ("split", "merged"):
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"FCO_TRITON_GA_ORDER={env!r}: expected split or merged", _NAME)
        return int(env == "split")
    if interpret:
        return 0
    if dtype_bytes == 4:  # FFMA: compute-bound at any size
        return 1
    return int(a_rows > 256 * max(1, e_max))


def config(dtype_bytes, n, a_rows, e_max, nranks, interpret=False):
    """The whole per-shape choice, from host values only (never the device counts): tile
    (plan()), tile order (tile_order()) and the waits' backoff cap in ns
    (fl.wait_ns_default()). → dict(tile=(bm, bn, bk, warps, stages), split=0|1, wait_ns=int)."""
    return dict(tile=plan(dtype_bytes, n, a_rows, e_max, nranks, interpret),
                split=tile_order(dtype_bytes, a_rows, e_max, interpret),
                wait_ns=fl.wait_ns_default())


_occ_cache = {}


# What the last launch of this process chose (bench/triton_diag.py prints it): tile, order,
# grid, occupancy and the compiled kernel's registers / spills / shared memory.
last_launch = {}


def _blocks(args, kwargs, num_local, device, num_warps, num_stages, bound):
    """B for a co-resident launch, from the compiled kernel's registers and shared memory
    (the kernel probed is the one launched: the sizes that vary are not specialised)."""
    import torch

    key = (str(device), tuple(sorted((k, str(v)) for k, v in kwargs.items() if k != "prof")),
           num_warps, num_stages)
    props = torch.cuda.get_device_properties(device)
    hit = _occ_cache.get(key)
    if hit is None:
        ck = gemm_alltoall_kernel.warmup(*args, grid=(1,), num_warps=num_warps,
                                         num_stages=num_stages, **kwargs)
        ck._init_handles()
        per_sm = host.programs_per_sm(
            ck.n_regs, ck.metadata.shared + 1024, num_warps,  # + the 1 KB the driver reserves
            regs_per_sm=getattr(props, "regs_per_multiprocessor", 65536),
            smem_per_sm=getattr(props, "shared_memory_per_multiprocessor", 233472),
            threads_per_sm=getattr(props, "max_threads_per_multi_processor", 2048))
        hit = (min(per_sm, 4), dict(n_regs=ck.n_regs, n_spills=ck.n_spills,
                                    shared=ck.metadata.shared))
        _occ_cache[key] = hit
    per_sm, res = hit
    last_launch.update(res, per_sm=per_sm, num_sms=props.multi_processor_count)
    if per_sm < 1:
        raise FcoError(_lib.UNSUPPORTED, "the Triton gemm_alltoall kernel does not fit on an SM",
                       _NAME)
    return _full_grid(bound, num_local, props.multi_processor_count, per_sm)


def _full_grid(bound, num_local, num_sms, per_sm):
    """Every co-resident program (at most one per tile of the upper bound, MAX_PARTS). Not
    lowered to give each program the same number of tiles of the bound: the real tile count
    comes from the device counts and is usually far below it (1024 tokens, 8 experts, 2 ranks:
    the bound's 272 tiles made that 91 programs on 132 SMs: 3 waves for 256 tiles, not 2)."""
    fit = per_sm * num_sms // num_local
    if fit < 1:
        raise FcoError(_lib.UNSUPPORTED,
                       f"{per_sm * num_sms} co-resident programs ({per_sm} per SM × {num_sms} "
                       f"SMs) cannot give each of {num_local} ranks one", _NAME)
    return max(1, min(fit, MAX_PARTS, int(bound)))


def check_host_args(nranks, a_rows, out_rows, K, N, counts_host=None, recv_rows=None,
                    name=_NAME):
    """fco_gemm_alltoall's host-side checks that the tensors' shapes do not already cover:
    sizes in range, and the optional host hints (counts_host [E, P], recv_rows [P]) sane.
    Raises FcoError(INVALID_ARGUMENT) with the C library's wording."""
    def bad(msg):
        raise FcoError(_lib.INVALID_ARGUMENT, f"{name}: {msg}")

    lim = 2 ** 31 - 1
    if not 1 <= K <= lim:
        bad(f"k {K} is not in 1..2^31-1")
    if not 1 <= N <= lim:
        bad(f"n {N} is not in 1..2^31-1")
    if not 0 <= a_rows <= lim:
        bad(f"a_rows {a_rows} is not in 0..2^31-1")
    if not 0 <= out_rows <= lim:
        bad(f"out_rows {out_rows} is not in 0..2^31-1")
    if counts_host is not None:
        c = [[int(x) for x in row] for row in counts_host.tolist()]
        for ei, row in enumerate(c):
            for s, x in enumerate(row):
                if x < 0:
                    bad(f"counts_host[{ei}][{s}] = {x} is negative")
        tot = sum(map(sum, c))
        if tot > a_rows:
            bad(f"counts_host sum to {tot} rows, more than a_rows {a_rows}")
    if recv_rows is not None:
        rr = [int(x) for x in recv_rows.tolist()]
        for s, x in enumerate(rr):
            if x < 0:
                bad(f"recv_rows_host[{s}] = {x} is negative")
        if sum(rr) > out_rows:
            bad(f"recv_rows_host sum to {sum(rr)} rows, more than out_rows {out_rows}")


def _check_inputs(L, nranks, as_, ws, counts, w_layout, out_rows, outs):
    import torch

    def bad(msg, code=_lib.INVALID_ARGUMENT):
        raise FcoError(code, msg, _NAME)

    if not 1 <= L <= layout.MAX_GPU_RANKS:
        bad(f"{L} communicators given; expected 1..{layout.MAX_GPU_RANKS} (the ranks this "
            "process drives)")
    if len(as_) != L or len(ws) != L or len(counts) != L or (outs is not None and len(outs) != L):
        bad(f"{L} communicators but {len(as_)} a, {len(ws)} w, {len(counts)} counts"
            + ("" if outs is None else f", {len(outs)} out") + "; expected one per rank")
    if w_layout not in (0, 1):
        bad(f"w_layout {w_layout!r} is not 'kn' / 0 or 'nk' / 1")
    a0 = as_[0]
    if not isinstance(a0, torch.Tensor) or _tl_dtype(a0.dtype) is None:
        bad(f"a[0] has dtype {getattr(a0, 'dtype', type(a0).__name__)}; expected a float32, "
            "float16 or bfloat16 torch.Tensor")
    if a0.dim() != 2:
        bad(f"a[0] has shape {tuple(a0.shape)}; expected [a_rows, K]")
    a_rows, K = a0.shape
    for i in range(L):
        a, w, c = as_[i], ws[i], counts[i]
        for name, t in (("a", a), ("w", w), ("counts", c)) + (
                (("out", outs[i]),) if outs is not None else ()):
            if not isinstance(t, torch.Tensor):
                bad(f"{name}[{i}] is {type(t).__name__}; expected a torch.Tensor")
            if t.device != a0.device:
                bad(f"{name}[{i}] is on {t.device}; expected {a0.device} (one device per process)")
            if not t.is_contiguous():
                bad(f"{name}[{i}] is not contiguous")
            if name != "counts" and t.dtype != a0.dtype:
                bad(f"{name}[{i}] has dtype {t.dtype}; expected {a0.dtype}, the dtype of a[0]")
        if a.dim() != 2 or a.shape[0] != a_rows or a.shape[1] != K:
            bad(f"a[{i}] has shape {tuple(a.shape)}; expected [{a_rows}, {K}] (a_rows and K are "
                "the same on every rank)")
        want = "[E, K, N]" if w_layout == 0 else "[E, N, K]"
        if w.dim() != 3 or w.shape[1 + w_layout] != K:
            bad(f"w[{i}] has shape {tuple(w.shape)}; expected {want} with K = {K}")
        if not 1 <= w.shape[0] <= MAX_EXPERTS:
            bad(f"w[{i}] has {w.shape[0]} experts; expected 1..{MAX_EXPERTS}")
        n_i = w.shape[2 - w_layout]
        if i == 0:
            N = n_i
        elif n_i != N:
            bad(f"w[{i}] has N = {n_i}; expected {N} (N is the same on every rank)")
        if c.dtype != torch.int32 or tuple(c.shape) != (w.shape[0], nranks):
            bad(f"counts[{i}] is {c.dtype} {tuple(c.shape)}; expected torch.int32 [E, P] = "
                f"[{w.shape[0]}, {nranks}] (rows of local expert e from rank s)")
        if outs is not None and tuple(outs[i].shape) != (out_rows, N):
            bad(f"out[{i}] has shape {tuple(outs[i].shape)}; expected [{out_rows}, {N}]")
    return a_rows, K, N


def _sym_args(states, outs, nbytes, sym):
    """Per rank (table address, slot + 1, offset) for the kernel: the table (0: none) serves the
    stores into peers' symmetric outs (always: peers may announce theirs); slot + 1 = 0 stages
    for this rank (its out is not in a symmetric buffer, or not all of it, or not 16-byte
    aligned there, or announcing is off: sym=False / FCO_GA_DIRECT=0, as the C impls)."""
    L = len(states)
    announce = sym is not False and os.environ.get("FCO_GA_DIRECT", "1").strip() != "0"
    if sym is not None and sym is not False:
        sym = list(sym)
        if len(sym) != L:
            raise FcoError(_lib.INVALID_ARGUMENT, f"sym has {len(sym)} entries; expected {L}",
                           _NAME)
        got = []
        for x in sym:
            if x is None:
                got.append((0, 0, 0))
                continue
            t, k, o = (int(v) for v in x)
            if not -1 <= k < layout.MAX_SYMMETRIC or t == 0 or o < 0:
                raise FcoError(_lib.INVALID_ARGUMENT, f"sym entry {x!r}: expected (table "
                               f"address != 0, slot -1..{layout.MAX_SYMMETRIC - 1}, offset >= 0)",
                               _NAME)
            got.append((t, k + 1, o) if announce and k >= 0 and o % 16 == 0 else (t, 0, 0))
        return got
    got = []
    for st, o in zip(states, outs):
        if not st.handle:
            got.append((0, 0, 0))
            continue
        ptr = o.data_ptr() if o.numel() and o.is_contiguous() else 0
        k, off, table = host.mem_find(st.handle, ptr, nbytes)
        ok = announce and k >= 0 and table != 0 and off % 16 == 0
        got.append((table, k + 1, off) if ok else (table, 0, 0))
    return got


def gemm_alltoall(comms, as_, ws, counts, out_rows=None, *, w_layout="kn", outs=None,
                  tile=None, blocks_per_rank=None, split_phases=None, order=None, wait_ns=None,
                  streamk=None, tma=None, prof=None, sym=None):
    """The ranks this process drives, in one launch: one per process on the nccl transport
    (comms=[comm]), or every virtual rank of a local-transport world (fco_comm_init_all).

    comms    fco.Communicator / fco_comm_t handles, or host.DeviceState (then the caller
             guarantees the workspace: tests and custom transports)
    as_      [a_rows, K] per rank (rows grouped by local expert, then source rank)
    ws       [E_r, K, N] ("kn") or [E_r, N, K] ("nk") per rank; one dtype (f32, f16, bf16)
    counts   [E_r, P] torch.int32 per rank, on the device: read there only
    out_rows capacity of the output (the same on every rank; default a_rows)
    outs     optional [out_rows, N] outputs to write into (else new, uninitialised tensors)
    tile     optional (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) instead of plan()'s
    order    optional "split" / "merged" instead of tile_order()'s; wait_ns: the waits' backoff
             cap in ns instead of fl.wait_ns_default()'s (0: spin); experiments and diagnostics
    streamk  the stream-K tail (streamk_config(): None = FCO_TRITON_GA_STREAMK, on by
             default on GPUs, off under the interpreter; 0 / 1; the most slices per tile; a
             dict of SK_DEFAULTS' keys). On, the workspace need grows by 2·sk_scratch_bytes()
             (every rank must choose alike)
    tma      the tile loop through TMA tensor descriptors (tma_config(): None =
             FCO_TRITON_GA_TMA, on by default on GPUs, off under the interpreter; 0 / 1; with
             plan()'s 128×256×64 tile it runs 4 stages instead of 3). Where it cannot run
             (f32, K or N not multiples of 8, unaligned bases, an old Triton, no TMA on the
             GPU) the pointer path runs; last_launch["tma"] / ["tma_why"] say which ran
    prof     optional int64 tensor of ≥ 8·L·B elements: per program [start, header waited,
             tiles done, landing waited, end (%globaltimer ns), %smid, tiles, 0] (diagnostics;
             a separate compile)
    sym      symmetric outputs (as the C impls 1 and 2): None = each rank's out that lies in a
             symmetric buffer of its communicator (fco_mem_alloc, fco.empty_symmetric; all
             out_rows × N of it, 16-byte aligned) is announced in its header and the peers
             store its rows there — no staging, no landing copy; FCO_GA_DIRECT=0 or False:
             stage always; or a list of L (peer_table address, slot or −1 for an ordinary
             out, byte offset) / None (host.DeviceState worlds: tests)
    → list of out [out_rows, N]: rows past the received total are not written. Runs on the
      current stream; CUDA-graph capturable once the shape ran eagerly (workspace growth and
      compilation happen then), replays may change the device counts freely. Collective.
      Device-side failures (bad counts: FCO_ERR_INVALID_ARGUMENT on every rank; a peer that
      never signals: FCO_ERR_TIMEOUT) surface through comm.check_async_error().
    """
    import torch

    comms, as_, ws, counts = list(comms), list(as_), list(ws), list(counts)
    outs = None if outs is None else list(outs)
    L = len(comms)
    wl = LAYOUTS.get(w_layout, w_layout) if isinstance(w_layout, str) else w_layout
    if not comms:
        raise FcoError(_lib.INVALID_ARGUMENT, "0 communicators given; expected 1..8", _NAME)
    states = [c if isinstance(c, host.DeviceState) else host.device_state(c) for c in comms]
    P = states[0].nranks
    if any(s.nranks != P for s in states) or len({s.rank for s in states}) != L or L > P:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"communicators of ranks {[s.rank for s in states]} with sizes "
                       f"{[s.nranks for s in states]}: expected distinct ranks of one world", _NAME)
    if out_rows is None:
        out_rows = as_[0].shape[0] if as_ and hasattr(as_[0], "shape") and as_[0].dim() == 2 else 0
    a_rows, K, N = _check_inputs(L, P, as_, ws, counts, wl, int(out_rows), outs)
    out_rows = int(out_rows)
    check_host_args(P, a_rows, out_rows, K, N)
    dev = as_[0].device
    on_gpu = dev.type == "cuda"
    capturing = on_gpu and torch.cuda.is_current_stream_capturing()
    if split_phases is None:
        split_phases = fl.INTERPRET
    esize = as_[0].element_size()
    e_max = max(w.shape[0] for w in ws)
    cfg = config(esize, N, a_rows, e_max, P, fl.INTERPRET)
    bm, bn, bk, nw, ns = tile or cfg["tile"]
    split = cfg["split"] if order is None else {"split": 1, "merged": 0}.get(order, order)
    if split not in (0, 1):
        raise FcoError(_lib.INVALID_ARGUMENT, f"order {order!r} is not 'split' or 'merged'",
                       _NAME)
    wns = cfg["wait_ns"] if wait_ns is None else max(0, int(wait_ns))
    sk = streamk_config(streamk, -(-K // bk))
    use_tma, tma_why = tma_config(tma, esize, K, N,
                                  [t for t in as_ + ws if t.numel()] if on_gpu else (), dev)
    if use_tma and tile is None and not os.environ.get("FCO_TRITON_GA_TILE", "") and \
            (bm, bn, bk, ns) == (128, 256, 64, 3):
        ns = 4  # TMA frees the registers of the pointer loads: 4 stages (196 KB; run 63585a1)
    nN = -(-N // bn)
    if (a_rows // bm + MAX_EXPERTS * P + 1) * nN >= 2 ** 31:
        raise FcoError(_lib.UNSUPPORTED,
                       f"a_rows {a_rows}, n {N}: more output tiles than the 2^31 the flags "
                       "count", _NAME)
    need = half_need(P, out_rows, N, esize, sk_scratch_bytes(sk, bm, bn))
    handles = [s.handle for s in states if s.handle]
    if handles:
        host.ensure_workspace(handles, 2 * need, capturing)

    if outs is None:
        outs = [a.new_empty((out_rows, N)) for a in as_]
    syms = _sym_args(states, outs, out_rows * N * esize, sym)
    # Triton refuses a NULL pointer argument: empty tensors (never dereferenced) get a stand-in.
    kas = [a if a.numel() else a.new_empty(1) for a in as_]
    kouts = [o if o.numel() else o.new_empty(1) for o in outs]
    targs = (tuple(st.addr for st in states), tuple(kas), tuple(ws), tuple(kouts), tuple(counts),
             tuple(int(w.shape[0]) for w in ws), tuple(t for t, _, _ in syms),
             tuple(k for _, k, _ in syms), tuple(o for _, _, o in syms))
    kw = dict(L=L, DTYPE=_tl_dtype(as_[0].dtype), ES=esize, W_NK=wl == 1, BLOCK_M=bm,
              BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, E_PAD=max(2, _next_pow2(e_max)),
              P_PAD=max(2, _next_pow2(P)), EVEN_K=K % bk == 0, EVEN_N=N % bn == 0,
              VEC=N % 8 == 0,
              PRECISION="ieee" if esize == 4 else "tf32", UPCAST=fl.INTERPRET and esize == 2,
              SPLIT=split, WAIT_NS=wns)
    if use_tma:
        kw.update(TMA=True)
        if on_gpu and not fl.INTERPRET:
            ensure_allocator()
    if sk["on"]:
        kw.update(SK=1, SK_MAX_SLICES=sk["max_slices"], SK_MIN_SLICES=sk["min_slices"],
                  SK_MIN_KSTEPS=sk["min_ksteps"], SK_ITEMS=sk["items"], SK_RB=min(sk["rows"], bm))
    if prof is not None:
        kw.update(PROFILE=True, prof=prof)
    # at most this many tiles: every expert adds at most one partial M tile
    bound = max(1, min(2 ** 30, (a_rows // bm + e_max) * nN))
    if blocks_per_rank is None:
        if on_gpu and not fl.INTERPRET:
            B = _blocks(targs + (a_rows, out_rows, K, N, 2, P, need), dict(kw, PHASES=7), L, dev,
                        nw, ns, bound)
        else:
            B = host.blocks_per_rank(bound, L, 4 * L, 1, MAX_PARTS)
    else:
        B = int(blocks_per_rank)
        if not 1 <= B <= MAX_PARTS:
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"blocks_per_rank {B} is not in 1..{MAX_PARTS}", _NAME)
    grid = (L * B,)
    if prof is not None and prof.numel() < 8 * L * B:
        raise FcoError(_lib.INVALID_ARGUMENT,
                       f"prof has {prof.numel()} elements; expected >= {8 * L * B}", _NAME)
    last_launch.update(sym=[k > 0 for _, k, _ in syms])
    last_launch.update(tile=(bm, bn, bk, nw, ns), order="split" if split else "merged",
                       wait_ns=wns, blocks_per_rank=B, bound=bound, num_local=L, streamk=sk,
                       need=need, tma=use_tma, tma_why=tma_why)
    sargs = targs + (a_rows, out_rows, K, N, B, P, need)
    if split_phases:
        for ph in (1, 2, 4):
            gemm_alltoall_kernel[grid](*sargs, PHASES=ph, num_warps=nw, num_stages=ns, **kw)
    else:
        gemm_alltoall_kernel[grid](*sargs, PHASES=7, num_warps=nw, num_stages=ns, **kw)
    return outs


def streamk_counters(comm, out_rows, n, es, items=SK_DEFAULTS["items"], device=None):
    """Diagnostics and tests: what the device split in this rank's last call, which must have
    had stream-K on with these out_rows, N, element size and items: the slices counted per
    split tile ([S] × split tiles, then 0s; all 0 when nothing was split). comm: a
    communicator, fco_comm_t or host.DeviceState. Runs a small kernel on the current stream
    and waits for it."""
    import torch

    st = comm if isinstance(comm, host.DeviceState) else host.device_state(comm)
    out = torch.zeros(int(items), dtype=torch.int32,
                      device=device or ("cpu" if fl.INTERPRET else "cuda"))
    rel = peer_bytes(st.nranks, out_rows, n, es) + plan_bytes(st.nranks)
    _read_sk_counters[(1,)](st.addr, rel, out, ITEMS=int(items))
    return out.tolist()


def gemm_alltoall_comm(comm, a, w, counts, out_rows=None, w_layout="kn", out=None):
    """One rank per process (nccl transport): the body of fco.gemm_alltoall(..., impl="triton")."""
    return gemm_alltoall([comm], [a], [w], [counts], out_rows, w_layout=w_layout,
                         outs=None if out is None else [out])[0]
