"""test_compile.py — torch.compile(fullgraph=True) traces fco.allreduce through its fake impl
(no graph break), gives the eager result, and differentiates through the compiled graph.
aot_eager checks tracing quickly; one test runs inductor (CPU, builds C++ once, ~15 s).
Run: pytest tests/python/test_compile.py
"""
import pytest


def _w_fullgraph(backend):
    import torch
    import torch.distributed as dist

    import fco

    g = dist.new_group(list(range(dist.get_world_size())))

    def f(a, b):
        y = fco.allreduce(a * 2 + b)            # default group
        z = fco.allreduce(y.sin(), group=g, impl="oneshot")
        return z + fco.allreduce(b.half(), impl=0).float()

    r = dist.get_rank()
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4) + r
    b = torch.ones(3, 4) * (r + 1)
    fco.init(g)  # communicators exist before the compiled code runs
    cf = torch.compile(f, fullgraph=True, backend=backend)
    expect = f(a, b)
    got = cf(a, b)
    torch.testing.assert_close(got, expect, rtol=1e-6, atol=1e-6)
    got2 = cf(a + 1, b)  # the compiled graph runs again (no recompile needed)
    torch.testing.assert_close(got2, f(a + 1, b), rtol=1e-6, atol=1e-6)
    return True


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fullgraph_trace(pool2, backend):
    pool2.run(_w_fullgraph, backend)


def test_fullgraph_inductor(pool2):
    pool2.run(_w_fullgraph, "inductor", timeout=600)


def _w_graph_has_op():
    import torch

    import fco

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    cf = torch.compile(lambda x: fco.allreduce(x) * 3, fullgraph=True, backend=backend)
    out = cf(torch.ones(4))
    code = graphs[0].code
    assert "fco.allreduce" in code or "fco::allreduce" in code, code
    return out.tolist()


def test_op_in_dynamo_graph(pool2):
    assert pool2.run(_w_graph_has_op) == [[6.0] * 4] * 2


def _w_backward_compiled():
    import torch
    import torch.distributed as dist

    import fco

    r = dist.get_rank()
    x = (torch.arange(6, dtype=torch.float32) + r).requires_grad_()
    c = torch.arange(6, dtype=torch.float32) * (r + 1)

    def loss(x):
        return (fco.allreduce(x * x) * c).sum()

    cl = torch.compile(loss, fullgraph=True, backend="aot_eager")
    cl(x).backward()
    g_compiled = x.grad.clone()
    x.grad = None
    loss(x).backward()
    assert torch.equal(g_compiled, x.grad)
    csum = c.clone()
    dist.all_reduce(csum)
    assert torch.equal(x.grad, 2 * x.detach() * csum)
    return True


def test_backward_through_compiled_graph(pool2):
    pool2.run(_w_backward_compiled)


def _w_dynamic_shapes():
    import torch

    import fco

    cf = torch.compile(lambda x: fco.allreduce(x) + 1, fullgraph=True, backend="aot_eager",
                       dynamic=True)
    outs = []
    for n in (5, 9, 13):
        x = torch.ones(n)
        outs.append(cf(x).sum().item())
    return outs


def test_dynamic_shapes(pool2):
    assert pool2.run(_w_dynamic_shapes) == [[15.0, 27.0, 39.0]] * 2


def _w_fake_mode():
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import fco

    with FakeTensorMode():
        x = torch.empty(4, 8, dtype=torch.bfloat16)
        y = fco.allreduce(x)  # fake impl only: no communicator, no C call
        assert y.shape == (4, 8) and y.dtype == torch.bfloat16
    with torch.device("meta"):
        m = fco.allreduce(torch.empty(3, 3))
        assert m.device.type == "meta" and m.shape == (3, 3)
    return True


def test_fake_and_meta_tensors(pool2):
    pool2.run(_w_fake_mode)


def _w_compile_bad_dtype():
    import pytest
    import torch

    import fco

    cf = torch.compile(lambda x: fco.allreduce(x), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="torch.float64"):
        cf(torch.ones(3, dtype=torch.float64))
    return True


def test_compile_reports_bad_dtype_while_tracing(pool2):
    pool2.run(_w_compile_bad_dtype)
