"""test_triton_gpu.py — fco.triton's GEMV + AllReduce on a GPU, on the local transport: P virtual
ranks on one GPU (fco_comm_init_all), all covered by ONE Triton launch (the co-residency rule of
DESIGN.md: two separately launched spinning kernels may never be scheduled together). Checks
against the float64 reference and against the C operator (fco_gemv_allreduce impl 1) on the
same communicators, interleaved (shared epochs and signal slots), repeated calls, CUDA-graph
replay, and a lost peer (FCO_ERR_TIMEOUT, not a hang). Needs libfco with
fco_comm_device_state. Marked gpu: skipped without CUDA.
    On the GPU machine: pytest tests/python/test_triton_gpu.py -m gpu -s
"""
import ctypes

import pytest

pytestmark = pytest.mark.gpu

TOL = {"float32": 1e-5, "bfloat16": 2e-2, "float16": 2e-3}


def _lib():
    from fco import _lib

    return _lib


def _local_world(n, timeout_ms=0):
    L = _lib()
    comms = (L.comm_t * n)()
    cfg = L.config(transport=L.TRANSPORT_LOCAL, timeout_ms=timeout_ms)
    fn = L.bind("fco_comm_init_all", [ctypes.POINTER(L.comm_t), ctypes.c_int, ctypes.c_void_p,
                                      ctypes.POINTER(L.Config)])
    L.check(fn(comms, n, None, ctypes.byref(cfg)), None, "fco_comm_init_all")
    return [comms[i] for i in range(n)]


def _destroy(comms):
    import torch

    torch.cuda.synchronize()
    for c in comms:
        _lib().lib().fco_comm_destroy(c)


def _async_error(c):
    L = _lib()
    r = L.lib().fco_comm_get_async_error(c)
    return r, L.last_error(c)


def _c_gemv(comms, xs, ws, biases, impl=1):
    """fco_gemv_allreduce for every virtual rank, in one group (one grid)."""
    import torch

    L = _lib()
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    f = L.bind("fco_gemv_allreduce", [L.comm_t, vp, vp, vp, vp, sz, sz, sz, ctypes.c_int,
                                      ctypes.c_int, vp])
    dt = {torch.float32: L.F32, torch.float16: L.F16, torch.bfloat16: L.BF16}[xs[0].dtype]
    N = ws[0].shape[0]
    ys = [x.new_empty(tuple(x.shape[:-1]) + (N,)) for x in xs]
    stream = torch.cuda.current_stream().cuda_stream
    L.check(L.bind("fco_group_start", [])(), None, "fco_group_start")
    for i, c in enumerate(comms):
        M = xs[i].numel() // xs[i].shape[-1]
        L.check(f(c, xs[i].data_ptr(), ws[i].data_ptr(),
                  biases[i].data_ptr() if biases else None, ys[i].data_ptr(), M, N,
                  xs[i].shape[-1], dt, impl, stream), c, "fco_gemv_allreduce")
    L.check(L.bind("fco_group_end", [])(), None, "fco_group_end")
    return ys


def _inputs(P, M, N, dtype, bias, seed):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    Ks = [256 + 64 * r for r in range(P)]
    xs = [torch.randn(M, k, device="cuda", generator=g).to(dtype) for k in Ks]
    ws = [(torch.randn(N, k, device="cuda", generator=g) / k ** 0.5).to(dtype) for k in Ks]
    b = [torch.randn(N, device="cuda", generator=g).to(dtype)] * P if bias else None
    return xs, ws, b


def _ref(xs, ws, b):
    y = sum(x.double() @ w.double().T for x, w in zip(xs, ws))
    return y if b is None else y + b[0].double()


def _rel(y, ref):
    return ((y.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


@pytest.fixture(params=[2, 4])
def world(request):
    comms = _local_world(request.param)
    yield comms
    _destroy(comms)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_vs_reference_and_c(world, dtype):
    import torch

    from fco.triton.gemv_allreduce import gemv_allreduce

    P, dt = len(world), getattr(torch, dtype)
    for M, N, bias in ((1, 4096, False), (8, 8192, True), (33, 1000, True), (64, 272, False)):
        xs, ws, b = _inputs(P, M, N, dt, bias, seed=M * 131 + N)
        ys = gemv_allreduce(world, xs, ws, b)
        yc = _c_gemv(world, xs, ws, b)  # interleaved with the C kernel: shared epochs/slots
        ys2 = gemv_allreduce(world, xs, ws, b)
        torch.cuda.synchronize()
        ref = _ref(xs, ws, b)
        for r in range(P):
            assert torch.equal(ys[r], ys[0]), "ranks must agree bit for bit"
            assert torch.equal(ys2[r], ys[0]), "a repeated call must give the same bits"
            assert _rel(ys[r], ref) < TOL[dtype], (M, N, r, _rel(ys[r], ref))
            assert _rel(ys[r], yc[r].double()) < TOL[dtype], (M, N, r)
    for c in world:
        assert _async_error(c)[0] == 0, _async_error(c)


def test_many_calls_alternate_halves(world):
    import torch

    from fco.triton.gemv_allreduce import gemv_allreduce

    xs, ws, b = _inputs(len(world), 4, 2048, torch.bfloat16, True, seed=7)
    first = gemv_allreduce(world, xs, ws, b)[0].clone()
    for _ in range(200):
        ys = gemv_allreduce(world, xs, ws, b)
    torch.cuda.synchronize()
    assert torch.equal(ys[-1], first)
    for c in world:
        assert _async_error(c)[0] == 0


def test_cuda_graph_replay(world):
    import torch

    from fco.triton.gemv_allreduce import gemv_allreduce

    P = len(world)
    xs, ws, b = _inputs(P, 2, 3000, torch.float32, True, seed=3)
    gemv_allreduce(world, xs, ws, b)  # eager first: workspace, compile, argument table
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            ys = gemv_allreduce(world, xs, ws, b)
    torch.cuda.current_stream().wait_stream(s)
    for it in range(5):
        for x in xs:
            x.normal_()
        g.replay()
        torch.cuda.synchronize()
        ref = _ref(xs, ws, b)
        for r in range(P):
            assert _rel(ys[r], ref) < 1e-5, (it, r)
    for c in world:
        assert _async_error(c)[0] == 0


def test_lost_peer_times_out():
    """Only rank 0 of a 2-rank world runs the kernel: its wait ends in FCO_ERR_TIMEOUT, read
    through fco_comm_get_async_error, within about the timeout (no hang)."""
    import time

    import torch

    from fco.triton.gemv_allreduce import gemv_allreduce

    comms = _local_world(2, timeout_ms=300)
    try:
        xs, ws, _ = _inputs(2, 2, 256, torch.float32, False, seed=1)
        t0 = time.time()
        gemv_allreduce([comms[0]], xs[:1], ws[:1])
        torch.cuda.synchronize()
        assert time.time() - t0 < 30
        code, msg = _async_error(comms[0])
        assert code == _lib().TIMEOUT, (code, msg)
        assert "peer 1" in msg, msg
    finally:
        _destroy(comms)
