"""tp_mlp_decode.py — a tensor-parallel Llama-style MLP decode step (SwiGLU, TP ranks) with fco vs
plain torch: checks that both give the same output and prints both timings.

    make && pip install ./python      (or: export PYTHONPATH=$PWD/python, using build/lib)
    torchrun --nproc-per-node 2 examples/tp_mlp_decode.py                 # GPUs: nccl, bf16
    torchrun --nproc-per-node 2 examples/tp_mlp_decode.py --device cpu    # no GPU: gloo, fp32

Each rank holds a column slice of W_gate / W_up (I/P rows) and the matching row slice of W_down,
so the step ends with the row-parallel linear y = Σ_r act_r @ W_down_r^T: the GEMV + AllReduce
that fco fuses. Today the fco path is `fco.allreduce(act @ W_down_r^T)` (the fused collective
alone); when fco.gemv_allreduce lands (issue 6) it becomes `fco.gemv_allreduce(act, W_down_r)`.
The plain path is matmul + torch.distributed.all_reduce. On CUDA both are also timed replayed
from a CUDA graph, as decode loops run.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import fco


def mlp_partial(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate.t()) * (x @ w_up.t())) @ w_down.t()


def step_torch(x, w):
    y = mlp_partial(x, *w)
    dist.all_reduce(y)
    return y


def step_fco(x, w):
    # TODO(issue 6): fco.gemv_allreduce(act, w_down) once the fused operator lands.
    return fco.allreduce(mlp_partial(x, *w))


def timed(fn, iters, cuda):
    for _ in range(5):
        fn()
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def graphed(fn, iters):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm-up outside capture (grows fco's workspace, loads kernels)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return timed(g.replay, iters, True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=8, help="tokens per decode step (M)")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--intermediate", type=int, default=14336)
    p.add_argument("--iters", type=int, default=50)
    a = p.parse_args()
    cuda = a.device == "cuda"
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.intermediate % world:
        raise SystemExit(f"--intermediate {a.intermediate} is not divisible by {world} ranks")
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    if not cuda:  # keep the CPU run short
        a.hidden, a.intermediate = min(a.hidden, 512), min(a.intermediate, 1024)
    fco.init(device=dev)  # before any graph capture: bootstraps over the process group

    g = torch.Generator(device="cpu").manual_seed(1234 + rank)
    shard = a.intermediate // world
    w = [(torch.randn(shard, a.hidden, generator=g) / a.hidden ** 0.5).to(dev, dtype),
         (torch.randn(shard, a.hidden, generator=g) / a.hidden ** 0.5).to(dev, dtype),
         (torch.randn(a.hidden, shard, generator=g) / shard ** 0.5).to(dev, dtype)]
    x = torch.randn(a.batch, a.hidden, generator=torch.Generator().manual_seed(7)).to(dev, dtype)

    y_ref, y_fco = step_torch(x, w), step_fco(x, w)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    ok = torch.allclose(y_fco.float(), y_ref.float(), rtol=tol, atol=tol)
    t_torch = timed(lambda: step_torch(x, w), a.iters, cuda)
    t_fco = timed(lambda: step_fco(x, w), a.iters, cuda)
    lines = [f"# tp_mlp_decode: {world} ranks, {a.device} {str(dtype)[6:]}, M={a.batch} "
             f"H={a.hidden} I={a.intermediate} (I/P={shard}); fco {fco.lib_path()}",
             f"check: fco vs torch max |diff| {(y_fco.float() - y_ref.float()).abs().max():.3g} "
             f"-> {'OK' if ok else 'MISMATCH'}",
             f"eager   torch {t_torch:9.1f} us/step   fco {t_fco:9.1f} us/step   "
             f"speedup {t_torch / t_fco:5.2f}x"]
    if cuda:
        gt, gf = graphed(lambda: step_torch(x, w), a.iters), graphed(lambda: step_fco(x, w), a.iters)
        lines.append(f"graph   torch {gt:9.1f} us/step   fco {gf:9.1f} us/step   "
                     f"speedup {gt / gf:5.2f}x")
    if rank == 0:
        print("\n".join(lines), flush=True)
    fco.shutdown()
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
