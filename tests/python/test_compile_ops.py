"""test_compile_ops.py — torch.compile(fullgraph=True) traces fco.gemv_allreduce,
fco.embedding_alltoall and fco.gemm_alltoall through their fake impls (no graph break), gives
the eager results, differentiates through the compiled graph (the backward ops have fake impls
too), handles dynamic M, and reports bad input while tracing. aot_eager for speed; one test
runs the three ops under inductor. Run: pytest tests/python/test_compile_ops.py
"""
import pytest


def _inputs():
    """One set of inputs for the three ops on this rank (float32, CPU)."""
    import torch
    import torch.distributed as dist

    r, P = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(3 + r)
    gemv = (torch.randn(4, 16, generator=g), torch.randn(24, 16, generator=g),
            torch.randn(24, generator=torch.Generator().manual_seed(1)))
    tpr, bpr = [1 + q % 2 for q in range(P)], [2 + q for q in range(P)]
    B, Tr = sum(bpr), tpr[r]
    rows = [5] * Tr
    lens = torch.randint(0, 4, (Tr * B,), generator=g)
    emb = (torch.randn(sum(rows), 8, generator=g),
           torch.randint(0, 5, (int(lens.sum()),), generator=g),
           torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]), rows, tpr, bpr)
    counts = torch.randint(0, 4, (2, P), generator=g, dtype=torch.int32)
    gemm = (torch.randn(8 * P, 12, generator=g), torch.randn(2, 12, 6, generator=g), counts)
    return gemv, emb, gemm


def _model(gemv, emb, gemm, group=None):
    import fco

    x, w, b = gemv
    y = fco.gemv_allreduce(x, w, b, group=group)
    e = fco.embedding_alltoall(*emb, mode="mean", group=group)
    m = fco.gemm_alltoall(*gemm, group=group, impl="tiles")
    return y.sin().sum() + e.square().sum() + m.tanh().sum(), y, e, m


def _w_fullgraph(backend, backward):
    import torch
    import torch.distributed as dist

    import fco

    g = dist.new_group(list(range(dist.get_world_size())))
    fco.init(g)  # communicators exist before the compiled code runs
    gemv, emb, gemm = _inputs()

    def leaves():
        return ((gemv[0].clone().requires_grad_(), gemv[1].clone().requires_grad_(),
                 gemv[2].clone().requires_grad_()),
                (emb[0].clone().requires_grad_(),) + emb[1:],
                (gemm[0].clone().requires_grad_(), gemm[1].clone().requires_grad_(), gemm[2]))

    eager_in, comp_in = leaves(), leaves()
    cf = torch.compile(_model, fullgraph=True, backend=backend)
    with torch.set_grad_enabled(backward):
        ref = _model(*eager_in, group=g)
        got = cf(*comp_in, group=g)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    if backward:
        ref[0].backward()
        got[0].backward()
        grads = [(a.grad, b.grad) for xs, ys in zip(eager_in, comp_in)
                 for a, b in zip(xs, ys) if isinstance(a, torch.Tensor) and a.requires_grad]
        assert len(grads) == 6
        for a, b in grads:
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    return True


@pytest.mark.parametrize("backend,backward", [("eager", False), ("aot_eager", False),
                                              ("aot_eager", True)])
def test_fullgraph(pool2, backend, backward):
    pool2.run(_w_fullgraph, backend, backward)


def test_fullgraph_3_ranks(pool3):
    pool3.run(_w_fullgraph, "aot_eager", True)


def test_fullgraph_inductor(pool2):
    pool2.run(_w_fullgraph, "inductor", False, timeout=600)


def _w_graph_has_ops():
    import torch

    import fco  # noqa: F401

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    cf = torch.compile(lambda *a: _model(*a)[0], fullgraph=True, backend=backend)
    cf(*_inputs())
    code = graphs[0].code
    return [op in code for op in ("gemv_allreduce", "embedding_alltoall", "gemm_alltoall")]


def test_ops_in_dynamo_graph(pool2):
    assert pool2.run(_w_graph_has_ops) == [[True] * 3] * 2


def _w_dynamic_m():
    import torch

    import fco

    cf = torch.compile(lambda x, w: fco.gemv_allreduce(x, w) * 2, fullgraph=True,
                       backend="aot_eager", dynamic=True)
    w = torch.ones(3, 4)
    return [cf(torch.ones(m, 4), w).sum().item() for m in (1, 5, 70)]  # 70: past the GEMV limit


def test_dynamic_m(pool2):
    # y = Σ_r x_r·wᵀ: 4 per element per rank, 2 ranks, times 2
    assert pool2.run(_w_dynamic_m) == [[16.0 * 3 * m for m in (1, 5, 70)]] * 2


def _w_fake_mode():
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import fco

    gemv, emb, gemm = _inputs()
    with FakeTensorMode() as mode:
        conv = [tuple(mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in xs)
                for xs in (gemv, emb, gemm)]
        y = fco.gemv_allreduce(conv[0][0].bfloat16(), conv[0][1].bfloat16())
        e = fco.embedding_alltoall(*conv[1])
        m = fco.gemm_alltoall(*conv[2], out_rows=5)
    return tuple(y.shape), str(y.dtype), tuple(e.shape), tuple(m.shape)


def test_fake_tensors(pool2):
    res = pool2.run(_w_fake_mode)
    assert res[0] == ((4, 24), "torch.bfloat16", (2, 3, 8), (5, 6))
    assert res[1] == ((4, 24), "torch.bfloat16", (3, 3, 8), (5, 6))


def _w_bad_input_while_tracing():
    import pytest
    import torch

    import fco

    cf = torch.compile(lambda x, w: fco.gemv_allreduce(x, w), fullgraph=True,
                       backend="aot_eager")
    with pytest.raises(Exception, match=r"w has shape \(3, 5\)"):
        cf(torch.ones(2, 4), torch.ones(3, 5))
    cg = torch.compile(lambda a, w, c: fco.gemm_alltoall(a, w, c), fullgraph=True,
                       backend="aot_eager")
    with pytest.raises(Exception, match="counts is torch.int64"):
        cg(torch.ones(4, 2), torch.ones(1, 2, 3), torch.zeros(1, 2, dtype=torch.int64))
    return True


def test_bad_input_while_tracing(pool2):
    pool2.run(_w_bad_input_while_tracing)
