"""test_gradcheck.py — fco's backward formulas under torch.autograd.gradcheck, in float64 on CPU.

gradcheck cannot run on fco's ops themselves (test_autograd.py says why: fco has no float64
dtype, and perturbing one rank's input shows only that rank's output). So each fused op is
checked as ONE function of every rank's inputs to every rank's outputs, which every rank
evaluates identically (the same seeded inputs everywhere):
  forward   a float64 plain-torch reference of the op's semantics, without collectives:
            gemv_allreduce      Y = Σ_r x_r · W_rᵀ + bias          (one output, replicated)
            embedding_alltoall  [B, T, D]: every bag of every rank's tables (rank s's output
                                is the slice of its b_s samples); offsets start past 1 or 2
                                junk entries of indices and per_sample_weights
            gemm_alltoall       [P, out_rows, N]: every rank's output
  backward  fco's OWN autograd code: the op module's _setup_context fills a ctx from this rank's
            inputs, the module's _backward (with its collectives: the reverse all-to-all over
            the gloo group) gives this rank's input gradients in float64, and a sum over the
            ranks (each fills only its own inputs' slots) puts the other ranks' in; a replicated
            input (gemv's bias) takes this rank's gradient.
The loss conventions are fco's: gemv_allreduce's loss is replicated (every rank gets dL/dY);
the all-to-all ops' loss is the sum of the ranks' losses (rank s gets dL/d out_s). So the
function's vector-Jacobian product is exactly what fco's backward computes, and gradcheck
compares it with central differences of the reference: a wrong formula (transpose, scale,
row order of the reverse all-to-all, per-sample-weight or mean scaling) fails.
At 1 rank and at 2 ranks (the pool of _dist.py, gloo + the cpu transport). gradgradcheck:
gemv_allreduce at 1 rank (its backward is differentiable torch code); the all-to-all ops'
backwards are custom ops without a derivative (not twice differentiable), and the rank sum
above is not differentiable, so not at 2 ranks.
test_real_op_matches_float64_reference: the REAL ops (float32, fco's forward and autograd)
against the reference's float64 outputs and torch-autograd gradients, float32 tolerances.
Run: pytest tests/python/test_gradcheck.py
"""
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from fco.ops import embedding_alltoall as emb_mod
from fco.ops import gemm_alltoall as gemm_mod
from fco.ops import gemv_allreduce as gemv_mod

F32_TOL = 1e-5


# ---- the gradcheck harness -----------------------------------------------------------------

class _Ctx:
    """What torch.library's autograd gives setup_context and backward: save_for_backward,
    saved_tensors, needs_input_grad (one per op input) and attributes."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = tuple(needs_input_grad)
        self._saved = ()

    def save_for_backward(self, *tensors):
        self._saved = tensors

    @property
    def saved_tensors(self):
        return self._saved


class _FcoBackward(torch.autograd.Function):
    """forward: case.reference (float64, every rank's outputs); backward: fco's _backward on
    this rank's slice, then the other ranks' gradients summed in."""

    @staticmethod
    def forward(ctx, case, *flat):
        ctx.case = case
        ctx.save_for_backward(*flat)
        out = case.reference(*flat)
        ctx.local_out = case.out_slice(out.detach(), case.rank)
        return out

    @staticmethod
    def backward(ctx, gout):
        case, flat = ctx.case, ctx.saved_tensors
        need = ctx.needs_input_grad[1:]
        op_inputs, where = case.local(flat, case.rank)  # where[j]: flat index of op input j
        fctx = _Ctx(w is not None and need[w] for w in where)
        case.module._setup_context(fctx, op_inputs, ctx.local_out)
        grads = case.module._backward(fctx, case.out_slice(gout, case.rank))
        assert len(grads) == len(op_inputs), (len(grads), len(op_inputs))
        result = [None] * len(flat)
        for j, (g, i) in enumerate(zip(grads, where)):
            if not fctx.needs_input_grad[j]:  # autograd's contract: no gradient asked, None
                assert g is None, f"op input {j} needs no gradient but got one"
                continue
            assert g is not None and g.shape == flat[i].shape and g.dtype == torch.float64, \
                (j, None if g is None else (g.shape, g.dtype), flat[i].shape)
            result[i] = g
        if case.size > 1:  # every rank's inputs: each rank fills its own slots, sum = gather
            for i, t in enumerate(flat):
                if need[i] and i not in case.shared:
                    buf = torch.zeros_like(t)
                    if result[i] is not None:
                        buf.copy_(result[i])
                    dist.all_reduce(buf)
                    result[i] = buf
        return (None,) + tuple(result)


def _gradcheck(case, flat, gradgrad=False):
    fn = lambda *xs: _FcoBackward.apply(case, *xs)  # noqa: E731
    assert torch.autograd.gradcheck(fn, flat, eps=1e-6, atol=1e-8, rtol=1e-6)
    if gradgrad:
        assert torch.autograd.gradgradcheck(fn, flat, eps=1e-6, atol=1e-8, rtol=1e-6)


def _leaves(tensors, requires):
    """float64 leaves (the values are float32's, so the real op sees the same numbers)."""
    return [t.double().requires_grad_(bool(q)) for t, q in zip(tensors, requires)]


# ---- gemv_allreduce --------------------------------------------------------------------------

class _Gemv:
    module = gemv_mod

    def __init__(self, P, bias, seed):
        self.rank, self.size, self.bias = dist.get_rank(), P, bias
        g = torch.Generator().manual_seed(seed)
        self.xs = [torch.randn(2, 2, 2 + q, generator=g) for q in range(P)]  # K_r differ
        self.ws = [torch.randn(3, 2 + q, generator=g) for q in range(P)]
        self.b = torch.randn(3, generator=g)
        self.c = torch.randn(2, 2, 3, generator=g)  # dL/dY, replicated
        self.shared = {2 * P} if bias else set()

    def tensors(self):
        return self.xs + self.ws + ([self.b] if self.bias else [])

    def reference(self, *flat):
        P = self.size
        y = sum(flat[q] @ flat[P + q].t() for q in range(P))
        return y + flat[2 * P] if self.bias else y

    def out_slice(self, y, r):
        return y  # replicated

    def local(self, flat, r):
        P = self.size
        b = flat[2 * P] if self.bias else None
        return (flat[r], flat[P + r], b, "", -1), (r, P + r, 2 * P if self.bias else None,
                                                  None, None)

    def real(self, local_inputs):
        import fco

        x, w, b = local_inputs[:3]
        return fco.gemv_allreduce(x, w, b)

    def coeffs(self, r):
        return self.c


# ---- embedding_alltoall ----------------------------------------------------------------------

EMB_LAYOUTS = {1: [([2], [3])], 2: [([2, 1], [1, 2]), ([0, 2], [3, 0])]}


class _Emb:
    module = emb_mod

    def __init__(self, P, tpr, bpr, mode, weighted, index_dtype, seed):
        self.rank, self.size = dist.get_rank(), P
        self.tpr, self.bpr, self.mode, self.weighted = list(tpr), list(bpr), mode, weighted
        self.shared = set()
        B, D = sum(bpr), 3
        g = torch.Generator().manual_seed(seed)
        self.weights, self.psws, self.data = [], [], []
        for q in range(P):
            rows = [3 + (t + q) % 2 for t in range(tpr[q])]
            lens = torch.randint(0, 4, (tpr[q] * B,), generator=g)  # empty bags too
            idx = [torch.randint(0, rows[t], (int(lens[t * B:(t + 1) * B].sum()),), generator=g)
                   for t in range(tpr[q])]
            # 1 or 2 junk entries in front (offsets[0] = pad): never read, out of every table;
            # their per-sample weights get no gradient
            pad = 1 + (seed + q) % 2
            idx = torch.cat([torch.full((pad,), 99, dtype=torch.int64)] + idx)
            off = torch.cat([torch.full((1,), pad, dtype=torch.int64), pad + lens.cumsum(0)])
            self.weights.append(torch.randn(sum(rows), D, generator=g))
            self.psws.append(torch.rand(idx.numel(), generator=g) + 0.5)
            self.data.append((idx.to(index_dtype), off.to(index_dtype), rows))
        self.c = torch.randn(B, sum(tpr), D, generator=g)

    def tensors(self):
        return self.weights + (self.psws if self.weighted else [])

    def reference(self, *flat):
        P, B = self.size, sum(self.bpr)
        pooled = []
        for q in range(P):
            idx, off, rows = self.data[q]
            weight, psw = flat[q], flat[P + q] if self.weighted else None
            tables = torch.split(weight, rows) if rows else ()
            for t in range(self.tpr[q]):
                o = off[t * B:(t + 1) * B + 1].long()
                lo, hi = int(o[0]), int(o[-1])
                s = F.embedding_bag(idx[lo:hi].long(), tables[t], o[:-1] - lo, mode="sum",
                                    per_sample_weights=None if psw is None else psw[lo:hi])
                if self.mode == "mean":  # Σ w_k·row_k / bag length, an empty bag gives 0
                    s = s / (o[1:] - o[:-1]).clamp_min(1).to(s.dtype)[:, None]
                pooled.append(s)
        return torch.stack(pooled, 1)  # [B, T, D]: bag (t, b) of the global table t

    def out_slice(self, y, r):
        s = sum(self.bpr[:r])
        return y[s:s + self.bpr[r]]

    def local(self, flat, r):
        P = self.size
        idx, off, rows = self.data[r]
        psw = flat[P + r] if self.weighted else None
        inputs = (flat[r], idx, off, psw, rows, self.tpr, self.bpr,
                  self.module.POOLING[self.mode], "", -1)
        return inputs, (r, None, None, P + r if self.weighted else None) + (None,) * 6

    def real(self, local_inputs):
        import fco

        weight, idx, off, psw, rows = local_inputs[:5]
        return fco.embedding_alltoall(weight, idx, off, rows, self.tpr, self.bpr, psw,
                                      self.mode)

    def coeffs(self, r):
        return self.out_slice(self.c, r)


# ---- gemm_alltoall ---------------------------------------------------------------------------

class _Gemm:
    module = gemm_mod

    CAP, K, N = 7, 3, 2

    def __init__(self, P, layout, hints, seed):
        self.rank, self.size, self.layout, self.hints = dist.get_rank(), P, layout, hints
        self.shared = set()
        g = torch.Generator().manual_seed(seed)
        self.counts, self.as_, self.ws = [], [], []
        for q in range(P):
            E = 1 + (q + seed) % 2 + (P == 1)  # experts per rank differ
            while True:  # ≤ CAP rows, with a spare capacity row (its gradient is 0)
                c = torch.randint(0, 3, (E, P), generator=g, dtype=torch.int32)
                if int(c.sum()) < self.CAP:
                    break
            self.counts.append(c)
            self.as_.append(torch.randn(self.CAP, self.K, generator=g))
            shape = (E, self.K, self.N) if layout == "kn" else (E, self.N, self.K)
            self.ws.append(torch.randn(shape, generator=g))
        recv = [sum(int(self.counts[q][:, s].sum()) for q in range(P)) for s in range(P)]
        self.out_rows = max(recv) + 1  # zero padding rows on every rank
        self.recv_rows = [[int(self.counts[q][:, s].sum()) for q in range(P)]
                          for s in range(P)]
        self.c = torch.randn(P, self.out_rows, self.N, generator=g)

    def tensors(self):
        return self.as_ + self.ws

    def reference(self, *flat):
        P = self.size
        outs = [[] for _ in range(P)]
        for q in range(P):  # rank q's experts; a's rows: expert-major, then source rank
            a, w, C, row = flat[q], flat[P + q], self.counts[q], 0
            for e in range(C.shape[0]):
                we = w[e] if self.layout == "kn" else w[e].t()
                for s in range(P):
                    n = int(C[e, s])
                    outs[s].append(a[row:row + n] @ we)
                    row += n
        ys = []
        for s in range(P):  # rank s: rows from rank 0 (experts 0, 1, ...), rank 1, ...; zeros
            y = torch.cat(outs[s])
            ys.append(torch.cat([y, y.new_zeros(self.out_rows - y.shape[0], self.N)]))
        return torch.stack(ys)

    def out_slice(self, y, r):
        return y[r]

    def local(self, flat, r):
        P = self.size
        ch = self.counts[r].clone() if self.hints else None
        rr = torch.tensor(self.recv_rows[r], dtype=torch.int32) if self.hints else None
        inputs = (flat[r], flat[P + r], self.counts[r], ch, rr, self.out_rows,
                  self.module.LAYOUTS[self.layout], "", -1)
        return inputs, (r, P + r) + (None,) * 7

    def real(self, local_inputs):
        import fco

        a, w, counts, ch, rr = local_inputs[:5]
        return fco.gemm_alltoall(a, w, counts, self.out_rows, ch, rr, self.layout)

    def coeffs(self, r):
        return self.c[r]


def _cases(P, op):
    if op == "gemv":
        return [_Gemv(P, bias, 11 + bias) for bias in (True, False)]
    if op == "emb":
        return [_Emb(P, tpr, bpr, mode, weighted, (torch.int64, torch.int32)[n % 2], 20 + n)
                for k, (tpr, bpr) in enumerate(EMB_LAYOUTS[P])
                for n, (mode, weighted) in enumerate(
                    [("sum", True), ("mean", True), ("sum", False), ("mean", False)],
                    start=4 * k)]
    return [_Gemm(P, layout, hints, 30 + n)
            for n, (layout, hints) in enumerate([("kn", False), ("nk", True), ("nk", False),
                                                 ("kn", True)])]


# ---- the tests -------------------------------------------------------------------------------

def _w_gradcheck(op, subset):
    """gradcheck of every case; subset: only the odd-numbered inputs need a gradient (the
    backward's needs_input_grad branches: gemv's w alone, embedding's per_sample_weights alone,
    gemm's w alone at 1 rank; at 2 ranks rank 0 needs none of its own)."""
    P = dist.get_world_size()
    for case in _cases(P, op):
        ts = case.tensors()
        req = [not subset or i % 2 == 1 or len(ts) == 1 for i in range(len(ts))]
        _gradcheck(case, _leaves(ts, req), gradgrad=(op == "gemv" and P == 1))
    return True


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("op", ["gemv", "emb", "gemm"])
@pytest.mark.parametrize("subset", [False, True])
def test_gradcheck_fco_backward(pools, world, op, subset):
    pools(world).run(_w_gradcheck, op, subset, timeout=300)


def _w_real_op(op):
    """The real op in float32 (fco's forward and registered autograd) against the float64
    reference: outputs and gradients, float32 tolerances."""
    P, r = dist.get_world_size(), dist.get_rank()
    for case in _cases(P, op):
        ts = case.tensors()
        ref_in = _leaves(ts, [True] * len(ts))
        ref = case.reference(*ref_in)
        (ref * case.c.double()).sum().backward()  # rank s's loss: <c_s, out_s> (gemv: <c, Y>)
        flat = [t.clone().requires_grad_() for t in ts]  # float32, the same values
        op_inputs, where = case.local(flat, r)
        out = case.real(op_inputs)
        assert out.dtype == torch.float32 and out.grad_fn is not None
        torch.testing.assert_close(out.double(), case.out_slice(ref.detach(), r),
                                   rtol=F32_TOL, atol=F32_TOL)
        (out * case.coeffs(r)).sum().backward()
        for i in sorted({w for w in where if w is not None}):
            assert flat[i].grad is not None, i
            expect = ref_in[i].grad  # None: an input the reference never read (0 tables)
            expect = torch.zeros_like(ref_in[i]) if expect is None else expect
            torch.testing.assert_close(flat[i].grad.double(), expect, rtol=F32_TOL,
                                       atol=F32_TOL)
    return True


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("op", ["gemv", "emb", "gemm"])
def test_real_op_matches_float64_reference(pools, world, op):
    pools(world).run(_w_real_op, op)
