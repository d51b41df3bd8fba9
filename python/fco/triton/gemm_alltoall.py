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
               B, why, tot[s], tiles[s] = B where tot[s] > 0, tstart[s], sym, sym_off, held}
               into slot [me] of every rank's header area (its own included) and
               release-signals sig[me][1023] there. The release also publishes the plan to the
               rank's other programs.
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
               staging (laid out as its out); into the destination's symmetric out instead
               where fco_ga_direct says so (it announced one, my header holds its slot).
               Before its first local-only tile (or at the end) part b raises
               sig_value(e, 0) on slot [me][b] of every peer it has rows for:
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
               WAIT_NS ns), then copies its slice of r's rows from staging into out (unless r
               stored them into my symmetric out: the same fco_ga_direct, from r's header).
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
import operator
import os

import triton
import triton.language as tl

from .. import _lib
from .._lib import FcoError
from . import host, layout
from . import language as fl

from .gemm_alltoall_kernel import (  # noqa: F401 (the device side; names re-exported)
    ERR_INVALID_ARGUMENT, ERR_INVALID_USAGE, HDR_SLOT, MAX_SYM, MAXR, OP, WHY_BAD_CAPACITY,
    WHY_BAD_COUNTS, WHY_COUNTS_CHANGED, _read_sk_counters, gemm_alltoall_kernel)

MAX_PARTS = layout.SIG_SLOTS - 2               # kMaxParts: tile-part slots
MAX_EXPERTS = 256                              # FCO_GEMM_ALLTOALL_MAX_EXPERTS
LAYOUTS = {"kn": 0, "nk": 1}
_NAME = "fco.triton.gemm_alltoall"


# ---- workspace layout (src/ops/gemm_alltoall.h, mirrored) -------------------------------------
def hdr_bytes(P):
    return (8 * (7 + 3 * int(P)) + 127) // 128 * 128   # FCO_GA_HDR_WORDS(P) int64 words


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
        vals = {}
        for k, v in streamk.items():
            try:
                vals[k] = operator.index(v)
            except TypeError:
                bad(f"streamk[{k!r}] is {v!r}; expected an int")
        sk = dict(SK_DEFAULTS, **vals, on=1)
    else:
        # an int (numpy ints too, as every host int argument) or a bool; never a float's value
        # (1.0 turned stream-K on, 2.0 was refused)
        try:
            n = operator.index(streamk)
        except TypeError:
            n = -1
        if n == 0:
            return dict(SK_OFF)
        if n == 1:
            sk = dict(SK_DEFAULTS, on=1)
        elif n >= 2 and not isinstance(streamk, bool):  # at most n slices (at least min(n, ..))
            sk = dict(SK_DEFAULTS, max_slices=n, min_slices=min(SK_DEFAULTS["min_slices"], n),
                      on=1)
        else:
            bad(f"streamk {streamk!r}: expected None, 0/False, 1/True, the most slices (>= 2) "
                "or a dict")
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
    try:  # 0 / 1 / a bool (numpy ints too); a float is not taken by its value
        ok = operator.index(tma) in (0, 1)
    except TypeError:
        ok = False
    if not ok:
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
    FCO_TRITON_GA_TILE="bm,bn,bk,warps,stages" overrides (experiments): check_tile()'s rule,
    else FcoError(INVALID_ARGUMENT)."""
    env = os.environ.get("FCO_TRITON_GA_TILE", "")
    if env:
        try:
            v = [int(x) for x in env.split(",")]
        except ValueError:
            v = None
        return check_tile(v, f"FCO_TRITON_GA_TILE={env!r}")
    if interpret:
        return 16, 16, 16, 1, 1
    if dtype_bytes == 4:  # FFMA (no TF32): small tiles
        return 64, 64, 32, 4, 3
    return 128, 256 if n >= 2048 else 128, 64, 8, 3


TILE_RULE = ("BLOCK_M, BLOCK_N, BLOCK_K powers of two in 16..256, warps a power of two in "
             "1..16, stages 1..8")


def check_tile(tile, what=None):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) as 5 ints the kernel takes: block
    sizes powers of two (tl.arange) in 16..256 (tl.dot's least M, N and K is 16; 256 is
    wgmma's widest N, and the fp32 accumulator of a larger tile would not fit the registers),
    warps a power of two (Triton's rule) in 1..16 (at 32 a thread keeps 64 registers), stages
    1..8 (the pipeline's shared-memory buffers). FcoError(INVALID_ARGUMENT) naming `what`
    (default: the argument, "tile (..)") otherwise. → the tuple."""
    try:
        t = tuple(tile)
        ok = len(t) == 5 and not any(isinstance(x, bool) for x in t)
        t = tuple(operator.index(x) for x in t)
    except TypeError:
        ok = False
    if ok:
        bm, bn, bk, nw, ns = t
        if all(16 <= x <= 256 and x & (x - 1) == 0 for x in (bm, bn, bk)) and \
                1 <= nw <= 16 and nw & (nw - 1) == 0 and 1 <= ns <= 8:
            return t
    raise FcoError(_lib.INVALID_ARGUMENT, f"{what or f'tile {tile!r}'}: expected 5 ints "
                   f"(BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): {TILE_RULE}", _NAME)


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


def resolve(dtype_bytes, n, a_rows, e_max, nranks, interpret=False, tile=None, order=None,
            wait_ns=None):
    """config() where the caller did not choose: an argument given (tile, order "split" /
    "merged" / 1 / 0, wait_ns) wins and its knob (FCO_TRITON_GA_TILE / _ORDER /
    FCO_TRITON_WAIT_NS) is not read, so a malformed value there cannot fail such a call.
    tile: check_tile()'s rule; wait_ns: an int, clamped to 0..2^20 as the knob.
    → (tile, split, wait_ns)."""
    if tile is not None:
        t = check_tile(tile)
    else:
        t = plan(dtype_bytes, n, a_rows, e_max, nranks, interpret)
    if order is None:
        split = tile_order(dtype_bytes, a_rows, e_max, interpret)
    else:
        split = {"split": 1, "merged": 0}.get(order) if isinstance(order, str) else (
            int(order) if isinstance(order, int) and order in (0, 1) else None)
        if split is None:
            raise FcoError(_lib.INVALID_ARGUMENT,
                           f"order {order!r} is not 'split' or 'merged' (or 1 / 0)", _NAME)
    wns = fl.wait_ns_default() if wait_ns is None else host.wait_ns_arg(wait_ns, _NAME)
    return t, split, wns


_occ_cache = {}


# What the last launch of this process chose (bench/triton_diag.py prints it): tile, order,
# grid, occupancy and the compiled kernel's registers / spills / shared memory.
last_launch = {}


def _blocks(args, kwargs, num_local, device, num_warps, num_stages, bound):
    """B for a co-resident launch, from the compiled kernel's registers and shared memory
    (the kernel probed is the one launched: the sizes that vary are not specialised). Cached
    per compiled kernel: the key holds what Triton specialises the launch on (host.launch_spec:
    K and N divisible by 16, the tensors' 16-byte alignment, ...), not only the constexprs —
    ptxas gave the f32 64×64×32 stream-K kernel 168 registers with N % 16 == 0 and 255
    without, so one kernel's programs per SM can be more than another's can keep resident
    (then the persistent grid's waits never end)."""
    import torch

    key = (str(device), host.kwargs_spec(kwargs), num_warps, num_stages,
           host.launch_spec(args, host.dns_positions(gemm_alltoall_kernel)))
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


def check_index_range(a_rows, K, N, bm, bn, bk, w_nk, tma=False, name=_NAME):
    """The tile loop keeps its in-tile offsets in int32 (half the registers of 64-bit pointer
    tensors): A's rows × K (_tile: a_off), W's columns × K ("nk") or K rows × N ("kn": w_off)
    — the pointer path's, not TMA's (int32 coordinates, each < 2^31) — and the stored rows × N
    (_store_rows). Each holds the largest index it reaches — at most min(BLOCK, extent) rows
    or columns — only while that product is at most 2^31; a larger shape raises
    FcoError(UNSUPPORTED) instead of wrapping into wrong addresses (the C impls take it)."""
    lim = 2 ** 31
    m = min(int(bm), max(int(a_rows), 1))
    checks = [(f"min(BLOCK_M {bm}, a_rows {a_rows}) x N {N}", m * N)]
    if not tma:
        checks += [(f"min(BLOCK_M {bm}, a_rows {a_rows}) x K {K}", m * K),
                   (f"min(BLOCK_N {bn}, N {N}) x K {K}" if w_nk else
                    f"min(BLOCK_K {bk}, K {K}) x N {N}",
                    min(bn, N) * K if w_nk else min(bk, K) * N)]
    for what, prod in checks:
        if prod > lim:
            raise FcoError(_lib.UNSUPPORTED,
                           f"{what} = {prod} elements is more than the 2^31 the kernel's int32 "
                           "tile offsets reach (use a smaller tile or a C impl)", name)


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
    if outs is not None:
        _check_out_overlap(as_, ws, outs, bad)
    return a_rows, K, N


def _check_out_overlap(as_, ws, outs, bad):
    """No out shares a byte with another out, nor with any rank's a or w: every rank's
    programs of the one launch write every out while every a and w is read (the C op refuses
    an out over its own a / w alike; a shared out would be written by two ranks). a and w may
    overlap each other (read only: one W for every rank). One sweep over the byte ranges
    sorted by start: a range that starts before the farthest end seen so far overlaps the
    range that reached it."""
    spans = []
    for kind, ts in (("out", outs), ("a", as_), ("w", ws)):
        for i, t in enumerate(ts):
            if t.numel() and t.device.type != "meta":  # meta: no memory
                lo = t.data_ptr()
                spans.append((lo, lo + t.numel() * t.element_size(), kind, f"{kind}[{i}]"))
    spans.sort(key=lambda s: s[0])
    far_any = far_out = (0, None)  # (farthest end, its name) of every range / of the outs
    for lo, hi, kind, name in spans:
        hit = far_any if kind == "out" else far_out
        if hit[1] is not None and hit[0] > lo:
            pair = (name, hit[1]) if kind == "out" else (hit[1], name)
            if kind == "out" and hit[1].startswith("out"):  # two outs: the lower rank's first
                pair = sorted(pair, key=lambda x: int(x[4:-1]))
            bad(f"{pair[0]} overlaps {pair[1]}; give each rank a separate out that shares no "
                "byte with any rank's a, w or out")
        if hi > far_any[0]:
            far_any = (hi, name)
        if kind == "out" and hi > far_out[0]:
            far_out = (hi, name)


def _sym_args(states, outs, nbytes, sym):
    """Per rank (table address, slot + 1, offset) for the kernel: the table (0: none) serves the
    stores into peers' symmetric outs (always: peers may announce theirs); slot + 1 = 0 stages
    for this rank (its out is not in a symmetric buffer, or not all of it, or not 16-byte
    aligned there, or announcing is off: sym=False / FCO_GA_DIRECT=0, as the C impls)."""
    L = len(states)
    announce = sym is not False and _lib.env_flag("FCO_GA_DIRECT", True)
    if sym is not None and sym is not False:
        try:
            sym = list(sym)
        except TypeError:
            raise FcoError(_lib.INVALID_ARGUMENT, f"sym is {sym!r}; expected None, False or a "
                           f"list of {L} (table, slot, offset) / None", _NAME) from None
        if len(sym) != L:
            raise FcoError(_lib.INVALID_ARGUMENT, f"sym has {len(sym)} entries; expected {L}",
                           _NAME)
        got = []
        for x in sym:
            if x is None:
                got.append((0, 0, 0))
                continue
            try:
                t, k, o = (operator.index(v) for v in x)
            except (TypeError, ValueError):
                raise FcoError(_lib.INVALID_ARGUMENT, f"sym entry {x!r}: expected None or 3 "
                               "ints (table address, slot, offset)", _NAME) from None
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
    outs     optional [out_rows, N] outputs to write into (else new, uninitialised tensors);
             none may share a byte with another out or with any rank's a or w
    tile     optional (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) instead of plan()'s
             (check_tile()'s rule)
    order    optional "split" / "merged" instead of tile_order()'s; wait_ns: the waits' backoff
             cap in ns instead of fl.wait_ns_default()'s (0: spin; an int, clamped to
             0..2^20); experiments and diagnostics
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
    else:  # as the torch op: numpy ints taken, never a float's truncation nor a str's parse
        try:
            out_rows = operator.index(out_rows)
        except TypeError:
            raise FcoError(_lib.INVALID_ARGUMENT, f"out_rows {out_rows!r} is not an int",
                           _NAME) from None
    a_rows, K, N = _check_inputs(L, P, as_, ws, counts, wl, out_rows, outs)
    check_host_args(P, a_rows, out_rows, K, N)
    host.check_prof(prof, as_[0].device, _NAME)
    dev = as_[0].device
    on_gpu = dev.type == "cuda"
    capturing = on_gpu and torch.cuda.is_current_stream_capturing()
    if split_phases is None:
        split_phases = fl.INTERPRET
    esize = as_[0].element_size()
    e_max = max(w.shape[0] for w in ws)
    (bm, bn, bk, nw, ns), split, wns = resolve(esize, N, a_rows, e_max, P, fl.INTERPRET,
                                                tile, order, wait_ns)
    sk = streamk_config(streamk, -(-K // bk))
    use_tma, tma_why = tma_config(tma, esize, K, N,
                                  [t for t in as_ + ws if t.numel()] if on_gpu else (), dev)
    check_index_range(a_rows, K, N, bm, bn, bk, wl == 1, use_tma)
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
        B = host.int_arg(blocks_per_rank, "blocks_per_rank", 1, MAX_PARTS, _NAME)
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
