"""_triton_interp.py — fco.triton on Triton's CPU interpreter (TRITON_INTERPRET=1), driven by
test_triton.py in a subprocess (the interpreter is chosen when triton is imported).

There is no GPU peer table on the cpu transport, so a "world" here is made by hand: P ranks'
fco_dev_rank_t as ctypes structs in host memory, their workspaces and signal areas as CPU
tensors; the interpreter reads and writes raw host addresses, so the helpers run unchanged.
Programs run one after another, so a kernel that waits for a peer's program of the same launch
cannot run here: the GEMV runs split_phases (push kernel, then reduce kernel), the GEMM +
All-to-All too (header kernel, tile kernel, landing kernel).

    TRITON_INTERPRET=1 python tests/python/_triton_interp.py CASE     (exit 0 = pass)
"""
import ctypes
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from fco.triton import host, layout as L  # noqa: E402
from fco.triton import gemm_alltoall as GA  # noqa: E402
from fco.triton import gemv_allreduce as G  # noqa: E402
from fco.triton import language as fl  # noqa: E402


class World:
    """P ranks' device state in host memory (what a GPU transport would build)."""

    def __init__(self, P, ws_bytes=1 << 20, timeout_ms=2000):
        self.ws = [torch.zeros(ws_bytes, dtype=torch.uint8) for _ in range(P)]
        self.sig = [torch.zeros(L.MAX_GPU_RANKS * L.SIG_SLOTS, dtype=torch.int64) for _ in range(P)]
        self.errs = [L.AsyncErr() for _ in range(P)]
        self.devs = [L.DevRank() for _ in range(P)]
        for r, d in enumerate(self.devs):
            for q in range(P):
                d.peer_data[q] = self.ws[q].data_ptr()
                d.peer_sig[q] = self.sig[q].data_ptr()
            d.ws_bytes, d.rank, d.nranks = ws_bytes, r, P
            d.timeout_ns = timeout_ms * 1000000
            d.err = ctypes.addressof(self.errs[r])
        self.states = [host.DeviceState(ctypes.addressof(d), r, P, None)
                       for r, d in enumerate(self.devs)]


def _ref(xs, ws, bias):
    y = sum(x.double().reshape(-1, x.shape[-1]) @ w.double().T for x, w in zip(xs, ws))
    return y if bias is None else y + bias.double()


def case_gemv():
    torch.manual_seed(0)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}
    for P in (1, 2, 3):
        w = World(P)
        calls = 0
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            for M, N, with_bias in ((1, 70, True), (5, 32, False), (17, 33, True)):
                Ks = [16 + 8 * r for r in range(P)]
                xs = [torch.randn(M, k).to(dt) for k in Ks]
                ws = [torch.randn(N, k).to(dt) for k in Ks]
                bias = torch.randn(N).to(dt) if with_bias else None
                ys = G.gemv_allreduce(w.states, xs, ws, None if bias is None else [bias] * P)
                calls += 1
                ref = _ref(xs, ws, bias)
                for r, y in enumerate(ys):
                    assert y.shape == (M, N) and y.dtype == dt, (y.shape, y.dtype)
                    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
                    assert err < tol[dt], (P, dt, M, N, r, err)
                    assert torch.equal(y, ys[0]), "ranks differ: the sum must be in rank order"
                assert [d.epoch for d in w.devs] == [calls] * P, [d.epoch for d in w.devs]
                assert all(d.arrive == 0 for d in w.devs)
                assert all(e.code == 0 for e in w.errs)
        # Signals carry the epoch: after `calls` calls, slot 0 of a peer holds the last call's
        # value (e << 32 | j + 1), as prims.cuh's sig_value.
        if P > 1:
            v = int(w.sig[1][0 * L.SIG_SLOTS + 0]) & 0xFFFFFFFFFFFFFFFF
            assert v >> 32 == calls, hex(v)
    # x with leading dims, blocks_per_rank forced: several tiles per program
    w = World(2)
    xs = [torch.randn(2, 3, 16) for _ in range(2)]
    ws = [torch.randn(100, 16) for _ in range(2)]
    ys = G.gemv_allreduce(w.states, xs, ws, blocks_per_rank=2)
    assert G.last_launch["blocks_per_rank"] == 2  # per rank (it was divided by the ranks)
    assert ys[0].shape == (2, 3, 100)
    assert torch.allclose(ys[0].double().reshape(6, 100), _ref(xs, ws, None), rtol=1e-5, atol=1e-5)
    # 8 local ranks, the most a world has (5..8 were refused: 4 interpreter programs in all)
    w = World(8)
    xs = [torch.randn(2, 16) for _ in range(8)]
    ws = [torch.randn(32, 16) for _ in range(8)]
    ys = G.gemv_allreduce(w.states, xs, ws)
    assert all(torch.allclose(y.double(), _ref(xs, ws, None), rtol=1e-5, atol=1e-5) for y in ys)


def case_timeout():
    """Rank 0 runs, rank 1 never does: rank 0's wait ends with FCO_ERR_TIMEOUT in its async
    error record (peer 1, slot 0, want = sig_value(1, 0)), and the epoch still advances."""
    w = World(2, timeout_ms=200)
    xs, ws = [torch.randn(2, 16)], [torch.randn(32, 16)]
    G.gemv_allreduce([w.states[0]], xs, ws, blocks_per_rank=1)
    e = w.errs[0]
    assert e.code == L.ERR_TIMEOUT, e.code
    assert (e.peer, e.slot, e.op) == (1, 0, L.OP_GEMV_ALLREDUCE), (e.peer, e.slot, e.op)
    assert e.want == L.sig_value(1, 0) and e.seen == 0, (hex(e.want), e.seen)
    assert w.devs[0].epoch == 1 and w.devs[0].arrive == 0
    assert w.errs[1].code == 0
    # first error wins: the next call's wait gives up (an error is set) and records nothing
    G.gemv_allreduce([w.states[0]], xs, ws, blocks_per_rank=1)
    assert (e.code, e.peer, e.slot, e.want) == (L.ERR_TIMEOUT, 1, 0, L.sig_value(1, 0)), \
        (e.code, e.peer, e.slot, hex(e.want))
    assert w.devs[0].epoch == 2 and w.devs[0].arrive == 0


def case_epoch_limit():
    """The 2^32-call limit (src/cuda/dev.h): epochs moved to EPOCH_LIMIT − 1; the GEMV call that
    starts below the limit records nothing, the one that starts at it records ERR_INVALID_USAGE
    (slot ERR_SLOT_EPOCH, op, want the limit, seen the epoch) on every rank; both are exact.
    Then the GEMM + All-to-All's guard."""
    torch.manual_seed(3)
    w = World(2)
    xs, ws = [torch.randn(3, 24) for _ in range(2)], [torch.randn(40, 24) for _ in range(2)]
    ref = _ref(xs, ws, None)
    for d in w.devs:
        d.epoch = L.EPOCH_LIMIT - 1
    for call, want_err in ((1, False), (2, True)):
        ys = G.gemv_allreduce(w.states, xs, ws, None)
        for y in ys:
            assert ((y.double() - ref).abs().max() / ref.abs().max()).item() < 1e-5
        assert [d.epoch for d in w.devs] == [L.EPOCH_LIMIT - 1 + call] * 2
        for e in w.errs:
            if not want_err:
                assert e.code == 0, e.code
            else:
                assert e.code == L.ERR_INVALID_USAGE, e.code
                assert (e.peer, e.slot, e.op) == (-1, L.ERR_SLOT_EPOCH, L.OP_GEMV_ALLREDUCE)
                assert e.want == L.EPOCH_LIMIT and e.seen == L.EPOCH_LIMIT, (e.want, e.seen)
    w = World(2)
    for d in w.devs:
        d.epoch = L.EPOCH_LIMIT
    As, Ws, Cs = _ga_data(2, torch.float32, 16, 16, "kn", seed=4)
    GA.gemm_alltoall(w.states, As, Ws, Cs, 64)
    for e in w.errs:
        assert e.code == L.ERR_INVALID_USAGE and e.op == L.OP_GEMM_ALLTOALL, (e.code, e.op)
        assert e.slot == L.ERR_SLOT_EPOCH and e.seen == L.EPOCH_LIMIT


def case_bad_table():
    """A workspace smaller than the call needs: FCO_ERR_INTERNAL recorded, nothing written."""
    w = World(2, ws_bytes=1024)
    xs, ws = [torch.randn(4, 16)] * 2, [torch.randn(512, 16)] * 2
    G.gemv_allreduce(w.states, xs, ws)
    assert all(e.code == L.ERR_INTERNAL for e in w.errs), [e.code for e in w.errs]
    assert all(int(t.abs().sum()) == 0 for t in w.ws), "wrote into a too small workspace"


@triton.jit
def _allgather_push(dev, src, BLOCK: tl.constexpr):
    """Each rank puts its BLOCK floats into slot `rank` of every peer's workspace, then signals."""
    me = fl.rank(dev)
    P = fl.world_size(dev)
    e = fl.call_epoch(dev)
    off = fl.half_offset(dev, e) + tl.cast(me, tl.int64) * BLOCK * 4
    i = tl.arange(0, BLOCK)
    v = tl.load(src + i)
    for k in range(0, P):
        fl.put(dev, (me + k) % P, off, i, v)
    fl.signal_all(dev, 0, fl.sig_value(e, 0))


@triton.jit
def _allgather_pull(dev, out, BLOCK: tl.constexpr):
    P = fl.world_size(dev)
    e = fl.call_epoch(dev)
    ok = fl.wait_all(dev, 0, fl.sig_value(e, 0), 5)
    i = tl.arange(0, BLOCK)
    if ok != 0:
        for q in range(0, P):
            v = fl.get(dev, fl.half_offset(dev, e) + q * BLOCK * 4, i, tl.float32)
            tl.store(out + q * BLOCK + i, v)
    fl.epoch_end(dev, e, 1)


def case_helpers():
    """A user kernel (all-gather) built from the helpers; rank/size, half offsets alternating
    with the epoch, the pointer translation and the signals."""
    P, BLOCK = 3, 16
    w = World(P)
    H = L.ws_half_bytes(1 << 20)
    for call in range(1, 4):
        srcs = [torch.arange(BLOCK, dtype=torch.float32) + 100 * r + call for r in range(P)]
        outs = [torch.zeros(P * BLOCK) for _ in range(P)]
        for r in range(P):
            _allgather_push[(1,)](w.states[r].addr, srcs[r], BLOCK=BLOCK)
        for r in range(P):
            _allgather_pull[(1,)](w.states[r].addr, outs[r], BLOCK=BLOCK)
        want = torch.cat(srcs)
        for r in range(P):
            assert torch.equal(outs[r], want), (call, r)
            assert w.devs[r].epoch == call
            # data landed in half (call & 1) of every workspace
            half = w.ws[r][(call & 1) * H:(call & 1) * H + P * BLOCK * 4].view(torch.float32)
            assert torch.equal(half, want)
    assert all(e.code == 0 for e in w.errs)


@triton.jit
def _probe(dev, out):
    tl.store(out + 0, fl.rank(dev).to(tl.int64))
    tl.store(out + 1, fl.world_size(dev).to(tl.int64))
    tl.store(out + 2, fl.ws_bytes(dev))
    tl.store(out + 3, fl.timeout_ns(dev).to(tl.int64))
    tl.store(out + 4, fl.half_offset(dev, fl.call_epoch(dev)))
    tl.store(out + 5, fl.peer_base(dev, 1))
    tl.store(out + 6, fl.sig_value(fl.call_epoch(dev), 4).to(tl.int64))
    tl.store(out + 7, fl.sig_ptr(dev, 1, 2, 3).to(tl.int64))


@triton.jit
def _stops(dev, out):
    tl.store(out, fl.error_stops_waits(dev))


def case_error_stops():
    """Which error records end the waits (fl.error_stops_waits, as prims.cuh's): none; any code
    but the epoch-limit record (ERR_INVALID_USAGE, slot ERR_SLOT_EPOCH), which calls issued at
    the limit must run past (until session 56 every wait gave up on it); an INVALID_USAGE whose
    op is not written yet waits for a later poll."""
    w = World(1)
    e = w.errs[0]
    out = torch.zeros(1, dtype=torch.int32)
    for code, slot, op, want in ((0, 0, 0, 0),
                                 (L.ERR_TIMEOUT, 3, L.OP_GEMV_ALLREDUCE, 1),
                                 (L.ERR_INVALID_ARGUMENT, 4, L.OP_GEMM_ALLTOALL, 1),
                                 (L.ERR_INVALID_USAGE, L.ERR_SLOT_EPOCH, L.OP_GEMV_ALLREDUCE, 0),
                                 (L.ERR_INVALID_USAGE, 5, L.OP_GEMM_ALLTOALL, 1),
                                 (L.ERR_INVALID_USAGE, 5, 0, 0)):
        e.code, e.slot, e.op = code, slot, op
        out.fill_(7)
        _stops[(1,)](w.states[0].addr, out)
        assert int(out[0]) == want, (code, slot, op, int(out[0]))


def case_fields():
    w = World(3, ws_bytes=4096 + 77, timeout_ms=0)
    out = torch.zeros(8, dtype=torch.int64)
    _probe[(1,)](w.states[2].addr, out)
    got = out.tolist()
    assert got[:3] == [2, 3, 4096 + 77], got
    assert got[3] == L.DEFAULT_TIMEOUT_MS * 1000000, got  # 0 in the table: the default bound
    assert got[4] == L.half_offset(4096 + 77, 1) == 2048, got
    assert got[5] == w.ws[1].data_ptr()
    assert got[6] == L.sig_value(1, 4)
    assert got[7] == w.sig[1].data_ptr() + (2 * L.SIG_SLOTS + 3) * 8


# ---- GEMM + All-to-All -----------------------------------------------------------------------
def _ga_data(P, dt, K, N, layout, seed, max_count=5, cap=None):
    """Per rank: A [cap, K], W, counts [E_r, P] (E_r differs per rank, zero counts included)."""
    g = torch.Generator().manual_seed(seed)
    As, Ws, Cs = [], [], []
    for r in range(P):
        E = 1 + (r + seed) % 3
        C = torch.randint(0, max_count + 1, (E, P), generator=g, dtype=torch.int32)
        C[torch.rand(E, P, generator=g) < 0.25] = 0
        As.append(torch.randn(cap or E * P * max_count, K, generator=g).to(dt))
        shape = (E, K, N) if layout == "kn" else (E, N, K)
        Ws.append((torch.randn(shape, generator=g) / K ** 0.5).to(dt))
        Cs.append(C)
    cap = max(a.shape[0] for a in As)
    As = [torch.cat([a, torch.randn(cap - a.shape[0], K, generator=g).to(dt)]) for a in As]
    return As, Ws, Cs


def _ga_ref(As, Ws, Cs, layout):
    import _refs

    return _refs.gemm_alltoall_ref64(As, Ws, Cs, layout)

def _ga_check(outs, refs, dt, tag):
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}[dt]
    for s, (o, ref) in enumerate(zip(outs, refs)):
        n = ref.shape[0]
        got = o[:n].double()
        scale = max(ref.abs().max().item(), 1e-3) if n else 1.0
        assert torch.isfinite(got).all(), (tag, s, "rows not written")
        err = (got - ref).abs().max().item() / scale if n else 0.0
        assert err < tol, (tag, s, err)
        assert torch.isnan(o[n:].float()).all(), (tag, s, "wrote past the received rows")


def case_gemm():
    """Every rank's rows back to their sources, against float64: P = 1, 2, 3, every dtype and
    weight layout, K and N not multiples of the 16×16×16 tiles, ragged counts with zeros, experts
    per rank that differ, several tiles per program; outputs poisoned; epochs, halves, flags."""
    calls = {}
    n = 0
    for P in (1, 2, 3):
        w = World(P)
        calls[P] = 0
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            for layout in ("kn", "nk"):
                for K, N, bpr in ((24, 40, None), (16, 16, 1), (40, 33, 3)):
                    n += 1
                    As, Ws, Cs = _ga_data(P, dt, K, N, layout, seed=n)
                    refs = _ga_ref(As, Ws, Cs, layout)
                    out_rows = max(r.shape[0] for r in refs) + 3
                    outs = [torch.full((out_rows, N), float("nan")).to(dt) for _ in range(P)]
                    got = GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, w_layout=layout,
                                           outs=outs, blocks_per_rank=bpr)
                    assert all(g is o for g, o in zip(got, outs))
                    calls[P] += 1
                    _ga_check(outs, refs, dt, (P, dt, layout, K, N, bpr))
                    assert [d.epoch for d in w.devs] == [calls[P]] * P, [d.epoch for d in w.devs]
                    assert all(d.arrive == 0 for d in w.devs)
                    assert all(e.code == 0 for e in w.errs), [(e.code, e.slot) for e in w.errs]
        if P > 1:  # header flags carry the epoch of the last call (impl 1's slot 1023)
            v = int(w.sig[1][0 * L.SIG_SLOTS + L.SIG_SLOTS - 1]) & 0xFFFFFFFFFFFFFFFF
            assert v == L.sig_value(calls[P], 0), hex(v)
    # a repeated call gives the same bits; everything zero: nothing moves
    w = World(2)
    As, Ws, Cs = _ga_data(2, torch.bfloat16, 32, 48, "nk", seed=99)
    first = [o.clone() for o in GA.gemm_alltoall(w.states, As, Ws, Cs, 64, w_layout="nk")]
    again = GA.gemm_alltoall(w.states, As, Ws, Cs, 64, w_layout="nk")
    total = [r.shape[0] for r in _ga_ref(As, Ws, Cs, "nk")]
    for s in range(2):
        assert torch.equal(first[s][:total[s]], again[s][:total[s]])
    zero = [torch.zeros_like(c) for c in Cs]
    outs = [torch.full((8, 48), float("nan")).to(torch.bfloat16) for _ in range(2)]
    GA.gemm_alltoall(w.states, As, Ws, zero, 8, w_layout="nk", outs=outs)
    assert all(torch.isnan(o.float()).all() for o in outs)
    assert all(e.code == 0 for e in w.errs) and [d.epoch for d in w.devs] == [3, 3]


def case_gemm_sym():
    """Symmetric outputs (sym=): a rank whose out lies in a symmetric buffer announces (slot,
    offset) in its header and the peers store its rows there — its staging stays untouched (no
    landing copy) — while a rank without one is staged for as before. P = 2, 3, ranks mixed,
    every dtype; then a peer announcing a slot the sender has no table for: the sender's header
    says it holds no slot (held = 0), so it stages those rows and the peer lands them (no
    error; case gemm_sym_freed: a table that lost the slot)."""
    n = 200
    for P in (2, 3):
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            for direct in ([True] * P, [r % 2 == 1 for r in range(P)]):
                n += 1
                w = World(P)
                As, Ws, Cs = _ga_data(P, dt, 24, 40, "kn", seed=n)
                refs = _ga_ref(As, Ws, Cs, "kn")
                out_rows = max(r.shape[0] for r in refs) + 3
                es = torch.tensor([], dtype=dt).element_size()
                off = 256  # out at byte 256 of buffer slot 5
                bufs = [torch.zeros(off + out_rows * 40 * es + 64, dtype=torch.uint8)
                        for _ in range(P)]
                table = torch.zeros(L.MAX_SYMMETRIC * L.MAX_GPU_RANKS, dtype=torch.int64)
                for q in range(P):
                    table[5 * L.MAX_GPU_RANKS + q] = bufs[q].data_ptr()
                outs = [bufs[r][off:off + out_rows * 40 * es].view(dt).view(out_rows, 40)
                        for r in range(P)]
                for o in outs:
                    o.fill_(float("nan"))
                sym = [(table.data_ptr(), 5 if d else -1, off) for d in direct]
                GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, outs=outs, sym=sym)
                assert GA.last_launch["sym"] == direct
                _ga_check(outs, refs, dt, ("sym", P, dt, direct))
                assert all(e.code == 0 for e in w.errs), [(e.code, e.slot) for e in w.errs]
                # staging of the call's half (epoch 1: half 1) of a direct rank: never written
                stg = GA.off_staging(P) + ((w.devs[0].ws_bytes // 2) & ~255)
                nb = out_rows * 40 * es
                for r in range(P):
                    written = bool(w.ws[r][stg:stg + nb].any())
                    got_remote = any(int(Cs[q][:, r].sum()) > 0 for q in range(P) if q != r)
                    if direct[r]:
                        assert not written, ("sym", P, dt, r, "staging written")
                    elif got_remote:
                        assert written, ("sym", P, dt, r, "staging not used")
    # sym=False: nobody announces (every rank stages), the result is the same
    w = World(2)
    As, Ws, Cs = _ga_data(2, torch.bfloat16, 24, 40, "kn", seed=5)
    refs = _ga_ref(As, Ws, Cs, "kn")
    outs = [torch.full((max(r.shape[0] for r in refs) + 3, 40), float("nan")).to(torch.bfloat16)
            for _ in range(2)]
    GA.gemm_alltoall(w.states, As, Ws, Cs, outs[0].shape[0], outs=outs, sym=False)
    assert GA.last_launch["sym"] == [False, False]
    _ga_check(outs, refs, torch.bfloat16, "sym=False")
    # a slot the sender has no table for: staged and landed (until the held mask, rank 1 kept
    # NaN rows from rank 0 and rank 0 recorded FCO_ERR_INVALID_USAGE)
    w = World(2)
    As, Ws, Cs = _ga_data(2, torch.float32, 16, 16, "kn", seed=7)
    Cs = [torch.ones_like(c) for c in Cs]
    refs = _ga_ref(As, Ws, Cs, "kn")
    table = torch.zeros(L.MAX_SYMMETRIC * L.MAX_GPU_RANKS, dtype=torch.int64)  # all NULL
    outs = [torch.full((64, 16), float("nan")) for _ in range(2)]
    GA.gemm_alltoall(w.states, As, Ws, Cs, 64, outs=outs, sym=[None, (table.data_ptr(), 3, 0)])
    assert GA.last_launch["sym"] == [False, True]
    _ga_check(outs, refs, torch.float32, "no table")
    assert all(e.code == 0 for e in w.errs), [(e.code, e.peer, e.slot) for e in w.errs]


def case_gemm_sym_freed():
    """fco_mem_free is local: rank f freed its buffer of slot 5 (its table's row 5 is empty)
    while every other rank's out lies in its own buffer of slot 5. Rank f's header holds no
    slot 5, so it stages its rows for each peer and each peer lands exactly those (the other
    senders still store straight into the peer's out: its staging holds f's rows only); every
    out right, no error anywhere. P = 2..4, f = 0 and P − 1, two calls each (both halves)."""
    n = 300
    for P in (2, 3, 4):
        for f in sorted({0, P - 1}):
            w = World(P)
            N, dt = 24, torch.bfloat16
            es = 2
            off = 256
            for call in (1, 2):
                n += 1
                As, Ws, Cs = _ga_data(P, dt, 16, N, "kn", seed=n, max_count=9,
                                      cap=3 * P * 10)
                for c in Cs:  # every rank sends every rank rows: each pair is exercised
                    c[0] += 1
                refs = _ga_ref(As, Ws, Cs, "kn")
                out_rows = max(r.shape[0] for r in refs) + 3
                nb = out_rows * N * es
                bufs = [torch.zeros(off + nb + 64, dtype=torch.uint8) for _ in range(P)]
                tables = [torch.zeros(L.MAX_SYMMETRIC * L.MAX_GPU_RANKS, dtype=torch.int64)
                          for _ in range(P)]
                for r in range(P):
                    for q in range(P):
                        if r != f:  # rank f's row 5 is gone (its own buffer freed)
                            tables[r][5 * L.MAX_GPU_RANKS + q] = bufs[q].data_ptr()
                outs = [bufs[r][off:off + nb].view(dt).view(out_rows, N) if r != f else
                        torch.empty(out_rows, N, dtype=dt) for r in range(P)]
                for o in outs:
                    o.fill_(float("nan"))
                sym = [(tables[r].data_ptr(), 5 if r != f else -1, off) for r in range(P)]
                half = L.half_offset(w.devs[0].ws_bytes, call)
                stg = half + GA.off_staging(P)
                for r in range(P):
                    w.ws[r][stg:stg + nb] = 0
                GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, outs=outs, sym=sym)
                tag = ("freed", P, f, call)
                assert GA.last_launch["sym"] == [r != f for r in range(P)], tag
                _ga_check(outs, refs, dt, tag)
                assert all(e.code == 0 for e in w.errs), (tag, [(e.code, e.peer, e.slot)
                                                                for e in w.errs])
                rb = N * es
                for s in range(P):
                    if s == f:
                        continue
                    got = [int(Cs[r][:, s].sum()) for r in range(P)]
                    lo = sum(got[:f]) * rb
                    hi = lo + got[f] * rb
                    area = w.ws[s][stg:stg + nb]
                    assert area[lo:hi].any(), (tag, s, "rank f's rows not staged")
                    assert not area[:lo].any() and not area[hi:].any(), (
                        tag, s, "a sender holding the slot staged")


def case_gemm_bad_counts():
    """A negative count on rank 1, then a receiver over capacity: FCO_ERR_INVALID_ARGUMENT on
    every rank (peer = the offending rank, slot = why), nothing written, epochs still advance."""
    for kind in ("negative", "capacity"):
        w = World(3)
        As, Ws, Cs = _ga_data(3, torch.float32, 16, 20, "kn", seed=5)
        refs = _ga_ref(As, Ws, Cs, "kn")
        out_rows = max(r.shape[0] for r in refs)
        if kind == "negative":
            Cs[1][0, 2] = -1
            want = (1, 1)  # (peer, slot = kBadCounts)
        else:
            out_rows -= 1
            want = (max(range(3), key=lambda s: (refs[s].shape[0], -s)), 2)  # kBadCapacity
        outs = [torch.full((out_rows, 20), float("nan")) for _ in range(3)]
        GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, outs=outs)
        for e in w.errs:
            assert e.code == L.ERR_INVALID_ARGUMENT, (kind, e.code)
            assert (e.peer, e.slot, e.op) == want + (L.OP_GEMM_ALLTOALL,), (kind, e.peer, e.slot)
        assert all(torch.isnan(o).all() for o in outs), kind
        assert [d.epoch for d in w.devs] == [1, 1, 1] and all(d.arrive == 0 for d in w.devs)


def case_gemm_timeout():
    """Rank 0 runs, rank 1 never does: rank 0's header wait ends with FCO_ERR_TIMEOUT (peer 1,
    slot 1023, want sig_value(1, 0)) and the epoch still advances."""
    w = World(2, timeout_ms=200)
    As, Ws, Cs = _ga_data(2, torch.float32, 16, 16, "kn", seed=3)
    GA.gemm_alltoall([w.states[0]], As[:1], Ws[:1], Cs[:1], 40, blocks_per_rank=2)
    e = w.errs[0]
    assert e.code == L.ERR_TIMEOUT, e.code
    assert (e.peer, e.slot, e.op) == (1, L.SIG_SLOTS - 1, L.OP_GEMM_ALLTOALL), \
        (e.peer, e.slot, e.op)
    assert e.want == L.sig_value(1, 0) and e.seen == 0, (hex(e.want), e.seen)
    assert w.devs[0].epoch == 1 and w.devs[0].arrive == 0
    assert w.errs[1].code == 0


def case_gemm_tile_timeout():
    """The landing wait: rank 1's header arrives but its tiles never do (phase 2 skipped for
    rank 1): rank 0 records FCO_ERR_TIMEOUT naming peer 1 and one of its part slots."""
    w = World(2, timeout_ms=200)
    As, Ws, Cs = _ga_data(2, torch.float32, 16, 16, "kn", seed=4, max_count=6)
    Cs[1][:, 0] = 3  # rank 1 sends rank 0 rows
    kw = dict(L=1, DTYPE=tl.float32, ES=4, W_NK=False, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16,
              GROUP_M=8, E_PAD=4, P_PAD=2, EVEN_K=True, EVEN_N=True, PRECISION="ieee")
    a_rows, out_rows, B = As[0].shape[0], 64, 2
    need = GA.half_need(2, out_rows, 16, 4)
    outs = [torch.zeros(out_rows, 16) for _ in range(2)]

    def launch(r, ph):
        GA.gemm_alltoall_kernel[(B,)]((w.states[r].addr,), (As[r],), (Ws[r],), (outs[r],),
                                      (Cs[r],), (Cs[r].shape[0],), (0,), (0,), (0,), a_rows,
                                      out_rows, 16, 16, B, 2, need, PHASES=ph, **kw)

    launch(0, 1)
    launch(1, 1)
    launch(0, 2)
    launch(0, 4)
    e = w.errs[0]
    assert e.code == L.ERR_TIMEOUT, e.code
    assert e.peer == 1 and 0 <= e.slot < B and e.op == L.OP_GEMM_ALLTOALL, (e.peer, e.slot)
    assert e.want >> 32 == 1 and e.seen == 0, (hex(e.want), e.seen)
    assert w.devs[0].epoch == 1


def case_gemm_bad_table():
    """A workspace smaller than the call needs: FCO_ERR_INTERNAL recorded, nothing written."""
    w = World(2, ws_bytes=4096)
    As, Ws, Cs = _ga_data(2, torch.float32, 16, 16, "kn", seed=2)
    outs = [torch.full((64, 16), float("nan")) for _ in range(2)]
    GA.gemm_alltoall(w.states, As, Ws, Cs, 64, outs=outs)
    assert all(e.code == L.ERR_INTERNAL for e in w.errs), [e.code for e in w.errs]
    assert all(int(t.abs().sum()) == 0 for t in w.ws), "wrote into a too small workspace"
    assert all(torch.isnan(o).all() for o in outs)


def _ga_skewed(P, dt, K, N, layout, seed):
    """Like _ga_data, with expert 0 of every rank taking about 4× the rows of the others."""
    As, Ws, Cs = _ga_data(P, dt, K, N, layout, seed, max_count=12)
    for C in Cs:
        C[0] = C[0] * 4 + 3
    g = torch.Generator().manual_seed(seed + 1)
    cap = max(int(C.sum()) for C in Cs) + 2
    As = [torch.randn(cap, K, generator=g).to(dt) for _ in range(P)]
    return As, Ws, Cs


def _sk_counters(w, P, out_rows, N, es, items):
    """Each rank's stream-K counters of the last call (in its half; reset at a call's start)."""
    got = []
    for r in range(P):
        off = (L.half_offset(w.devs[r].ws_bytes, w.devs[r].epoch)
               + GA.peer_bytes(P, out_rows, N, es) + GA.plan_bytes(P))
        got.append(w.ws[r][off:off + 4 * items].view(torch.int32).tolist())
    return got


def case_gemm_streamk():
    """The stream-K tail (streamk=, forced with small slices and a small grid): skewed ragged
    counts, P = 1..3, every dtype, both weight layouts and tile orders (merged: the split tiles
    touch peers' rows, so the last slice pushes and the flags follow it; split: also local-only
    ones), K a multiple of BLOCK_K or not. Against float64, against the unsplit path (same
    inputs, streamk=0: fp32 sums in another order, so close, not equal), the same bits when
    repeated; each rank's counters say what the device split (streamk_split(): S per split
    tile, 0 past them), with the counters poisoned before a call (part 0 resets them)."""
    BM = BN = BK = 16
    items = 16
    sk = dict(min_ksteps=1, max_slices=4, min_slices=2, items=items, rows=4)  # 4 sum chunks
    skc = dict(sk, on=1)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}
    n = 0
    seen = set()
    for P in (1, 2, 3):
        w = World(P, ws_bytes=8 << 20)
        for dt, K, N, layout, order in ((torch.float32, 72, 40, "kn", "merged"),
                                        (torch.bfloat16, 64, 33, "nk", "split"),
                                        (torch.float16, 80, 16, "kn", "split"),
                                        (torch.float32, 64, 48, "nk", "split"),
                                        (torch.bfloat16, 72, 24, "kn", "merged")):
            n += 1
            As, Ws, Cs = _ga_skewed(P, dt, K, N, layout, seed=300 + n)
            nk = -(-K // BK)
            tot = [GA.tile_total(C, BM, BN, N) for C in Cs]
            # the smallest grid where some rank splits its tail
            B = next(b for b in range(2, 40)
                     if any(GA.streamk_split(t, b, nk, skc)[1] for t in tot))
            want = [GA.streamk_split(t, B, nk, skc) for t in tot]
            refs = _ga_ref(As, Ws, Cs, layout)
            out_rows = max(r.shape[0] for r in refs) + 3
            es = As[0].element_size()
            kw = dict(w_layout=layout, blocks_per_rank=B, tile=(BM, BN, BK, 1, 1), order=order)
            runs = []
            for streamk in (sk, sk, 0):
                if streamk:  # garbage where the counters live, in both halves
                    off = GA.peer_bytes(P, out_rows, N, es) + GA.plan_bytes(P)
                    H = L.ws_half_bytes(w.devs[0].ws_bytes)
                    for ws in w.ws:
                        for h in (0, H):
                            ws[h + off:h + off + 4 * items].view(torch.int32).fill_(7)
                outs = [torch.full((out_rows, N), float("nan")).to(dt) for _ in range(P)]
                GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, outs=outs, streamk=streamk,
                                 **kw)
                tag = (P, dt, K, N, layout, order, B, bool(streamk))
                assert all(e.code == 0 for e in w.errs), (tag, [(e.code, e.slot) for e in w.errs])
                assert all(d.arrive == 0 for d in w.devs)
                _ga_check(outs, refs, dt, tag)
                assert GA.last_launch["streamk"]["on"] == (1 if streamk else 0)
                if streamk:
                    got = _sk_counters(w, P, out_rows, N, es, items)
                    for r in range(P):
                        t_full, nsp, S = want[r]
                        assert got[r] == [S] * nsp + [0] * (items - nsp), (tag, r, want[r], got[r])
                        assert GA.streamk_counters(w.states[r], out_rows, N, es, items) == got[r]
                        if nsp:
                            seen.add((P > 1, order))
                    assert sum(w[1] for w in want) > 0
                runs.append(outs)
            for r in range(P):
                m = refs[r].shape[0]
                assert torch.equal(runs[0][r][:m], runs[1][r][:m]), (n, r, "not deterministic")
                if m:
                    a, b = runs[0][r][:m].double(), runs[2][r][:m].double()
                    scale = max(refs[r].abs().max().item(), 1e-3)
                    assert (a - b).abs().max().item() / scale < tol[dt], (n, r, "split vs unsplit")
    assert seen == {(False, "merged"), (False, "split"), (True, "merged"), (True, "split")}, seen


def case_gemm_tma():
    """The TMA path (tma=1: tensor descriptors, which the interpreter emulates with the same
    coordinates and zero fill): 16-bit, P = 1..3, both weight layouts, K and N multiples of 8
    but not of the 16×16×16 tile, an idle expert on each side whose weights are inf and the
    spare rows of A inf (a block that read them into a stored row — the next expert's W past
    N or K, A's rows past a segment — would turn it NaN), stream-K slices, repeated calls. Each
    against float64 and bit for bit against the pointer path (tma=0, the same dots in the same
    order). Then what falls back to the pointer path, never an error: f32, K or N not a
    multiple of 8; and FCO_TRITON_GA_TMA's parsing."""
    BM = BN = BK = 16
    n = 0
    sk = dict(min_ksteps=1, max_slices=4, min_slices=2, items=16, rows=4)
    for P in (1, 2, 3):
        w = World(P, ws_bytes=8 << 20)
        for dt, K, N, layout in ((torch.bfloat16, 24, 40, "kn"), (torch.float16, 40, 24, "nk"),
                                 (torch.bfloat16, 32, 8, "nk"), (torch.float16, 56, 32, "kn")):
            n += 1
            As, Ws, Cs = _ga_data(P, dt, K, N, layout, seed=500 + n, max_count=20)
            for r in range(P):  # experts 0 and E+1: inf weights, no rows
                C = Cs[r]
                inf_w = torch.full((1,) + tuple(Ws[r].shape[1:]), float("inf")).to(dt)
                Ws[r] = torch.cat([inf_w, Ws[r], inf_w]).contiguous()
                Cs[r] = torch.cat([torch.zeros(1, P, dtype=torch.int32), C,
                                   torch.zeros(1, P, dtype=torch.int32)]).contiguous()
                As[r][int(Cs[r].sum()):] = float("inf")
            refs = _ga_ref(As, Ws, Cs, layout)
            out_rows = max(r.shape[0] for r in refs) + 3
            runs = {}
            for tma, streamk, bpr in ((0, 0, None), (1, 0, None), (1, 0, 2), (1, sk, 3),
                                      (0, sk, 3)):
                outs = [torch.full((out_rows, N), float("nan")).to(dt) for _ in range(P)]
                GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, w_layout=layout, outs=outs,
                                 blocks_per_rank=bpr, tile=(BM, BN, BK, 1, 1), tma=tma,
                                 streamk=streamk)
                tag = (P, dt, K, N, layout, tma, bool(streamk), bpr)
                assert GA.last_launch["tma"] == tma, (tag, GA.last_launch["tma_why"])
                assert all(e.code == 0 for e in w.errs), (tag, [(e.code, e.slot) for e in w.errs])
                _ga_check(outs, refs, dt, tag)
                runs[(tma, bool(streamk))] = outs
            for r in range(P):
                m = refs[r].shape[0]
                for k in (False, True):
                    assert torch.equal(runs[(1, k)][r][:m], runs[(0, k)][r][:m]), (n, r, k)
    # what runs the pointer path (and says why), never an error
    w = World(2)
    for dt, K, N, why in ((torch.float32, 24, 40, "f32"), (torch.bfloat16, 20, 40, "multiples"),
                          (torch.float16, 24, 36, "multiples")):
        As, Ws, Cs = _ga_data(2, dt, K, N, "nk", seed=K + N)
        refs = _ga_ref(As, Ws, Cs, "nk")
        out_rows = max(r.shape[0] for r in refs)
        outs = [torch.full((out_rows, N), float("nan")).to(dt) for _ in range(2)]
        os.environ["FCO_TRITON_GA_TMA"] = "1"
        try:
            GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, w_layout="nk", outs=outs)
        finally:
            del os.environ["FCO_TRITON_GA_TMA"]
        assert GA.last_launch["tma"] == 0 and why in GA.last_launch["tma_why"], GA.last_launch
        _ga_check(outs, refs, dt, ("fallback", dt, K, N))
    GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, w_layout="nk")
    assert GA.last_launch["tma"] == 0 and GA.last_launch["tma_why"] == "off"


def case_profile():
    """prof= (the diagnostics' compile): the outputs are the same, every program wrote its
    8 fields (timestamps in order, %smid 0 here), and the waits ran with and without backoff."""
    torch.manual_seed(5)
    w = World(2)
    xs = [torch.randn(3, 16) for _ in range(2)]
    ws = [torch.randn(100, 16) for _ in range(2)]
    y0 = G.gemv_allreduce(w.states, xs, ws, blocks_per_rank=2, wait_ns=0)
    prof = torch.full((8 * 2 * 4,), -1, dtype=torch.int64)
    y1 = G.gemv_allreduce(w.states, xs, ws, blocks_per_rank=2, prof=prof)
    assert torch.equal(y0[0], y1[0]) and torch.equal(y0[1], y1[1])
    B = G.last_launch["blocks_per_rank"]
    p = prof.view(-1, 8)[:2 * B]
    assert bool((p[:, 0] > 0).all()) and bool((p[:, 0] <= p[:, 3]).all()), p
    assert bool((p[:, 2] <= p[:, 3]).all()) and bool((p[:, 5] == 0).all()), p
    assert bool((prof.view(-1, 8)[2 * B:] == -1).all())
    As, Ws, Cs = _ga_data(2, torch.float32, 16, 16, "kn", seed=6)
    o0 = GA.gemm_alltoall(w.states, As, Ws, Cs, 64, wait_ns=0, order="split")
    prof = torch.full((8 * 2 * 3,), -1, dtype=torch.int64)
    o1 = GA.gemm_alltoall(w.states, As, Ws, Cs, 64, prof=prof, blocks_per_rank=3)
    n = sum(int(c.sum()) for c in Cs)  # rows sent in all
    got = sum(int(c.sum(0)[r]) for c in Cs for r in range(2))
    assert n == got
    for r in range(2):
        k = int(sum(c.sum(0)[r] for c in Cs))  # rows rank r receives
        assert torch.allclose(o0[r][:k], o1[r][:k], rtol=1e-5, atol=1e-5)
    p = prof.view(-1, 8)
    assert bool((p[:, 0] > 0).all()) and bool((p[:, :5].diff(dim=1) >= 0).all()), p
    assert GA.last_launch["order"] == "merged" and GA.last_launch["blocks_per_rank"] == 3


def case_ws_exact():
    """Workspaces of exactly what a call needs run (the GEMV's 2·P·S, the GEMM's 2·half_need),
    256 bytes less record FCO_ERR_INTERNAL and write nothing; a GEMM whose counts send every
    row of a (Σ counts = a_rows) is valid; an odd ws_bytes' halves are 256-byte rounded."""
    torch.manual_seed(8)
    P, M, N, K = 2, 3, 70, 16
    S = G.slot_bytes(M, N, G.plan(M, N, 4)[1])
    xs, ws = [torch.randn(M, K) for _ in range(P)], [torch.randn(N, K) for _ in range(P)]
    ref = _ref(xs, ws, None)
    for nbytes, ok in ((2 * P * S, True), (2 * P * S - 256, False)):
        w = World(P, ws_bytes=nbytes)
        ys = G.gemv_allreduce(w.states, xs, ws)
        assert [e.code for e in w.errs] == [0 if ok else L.ERR_INTERNAL] * P, (nbytes, ok)
        if ok:
            for y in ys:
                assert ((y.double() - ref).abs().max() / ref.abs().max()).item() < 1e-5
        else:
            assert all(int(t.abs().sum()) == 0 for t in w.ws), "wrote into a too small workspace"
    As, Ws, Cs = _ga_data(P, torch.float32, 16, 20, "kn", seed=11)
    tot = [int(C.sum()) for C in Cs]
    a_rows = max(tot)
    for r in range(P):
        Cs[r][0, 0] += a_rows - tot[r]
    As = [a[:a_rows].contiguous() for a in As]
    refs = _ga_ref(As, Ws, Cs, "kn")
    out_rows = max(r.shape[0] for r in refs)
    need = GA.half_need(P, out_rows, 20, 4)
    for nbytes, ok in ((2 * need, True), (2 * need - 256, False)):
        w = World(P, ws_bytes=nbytes)
        outs = [torch.full((out_rows, 20), float("nan")) for _ in range(P)]
        GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, outs=outs)
        assert GA.last_launch["need"] == need
        # the grid's bound is one on the tiles: every expert adds at most one partial M tile
        assert GA.last_launch["bound"] >= max(GA.tile_total(C, 16, 16, 20) for C in Cs)
        assert [e.code for e in w.errs] == [0 if ok else L.ERR_INTERNAL] * P, (nbytes, ok)
        if ok:
            _ga_check(outs, refs, torch.float32, "ws_exact")
        else:
            assert all(torch.isnan(o).all() for o in outs)
    w = World(3, ws_bytes=4096 + 333)  # 2214 bytes a half: 2048, not 2176 (128-rounded)
    out = torch.zeros(8, dtype=torch.int64)
    _probe[(1,)](w.states[2].addr, out)
    assert out[4].item() == L.half_offset(4096 + 333, 1) == 2048, out.tolist()


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]]()
    print("ok", sys.argv[1])
