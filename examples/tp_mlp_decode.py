"""tp_mlp_decode.py — a tensor-parallel Llama-style MLP decode step (SwiGLU, TP ranks) with
fco.gemv_allreduce vs plain torch: checks that both give the same output and prints both
timings.

    make && pip install ./python      (or: export PYTHONPATH=$PWD/python, using build/lib)
    torchrun --nproc-per-node 2 examples/tp_mlp_decode.py                 # GPUs: nccl, bf16
    torchrun --nproc-per-node 2 examples/tp_mlp_decode.py --device cpu    # no GPU: gloo, fp32

Each rank holds a column slice of W_gate / W_up (I/P rows) and the matching row slice of W_down
[H, I/P], so the step ends with the row-parallel linear y = Σ_r act_r @ W_down_r^T: the GEMV +
AllReduce that fco fuses (fco.gemv_allreduce(act, W_down_r)). The plain path is matmul +
torch.distributed.all_reduce. On CUDA both are also timed replayed from a CUDA graph, as decode
loops run. On CPU fco runs its reference implementation (cpu transport): the timings there only
show that it runs; the numbers that matter are the GPU ones.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F

import _util
import fco


def act(x, w_gate, w_up):
    return F.silu(x @ w_gate.t()) * (x @ w_up.t())


def step_torch(x, w):
    y = act(x, w[0], w[1]) @ w[2].t()
    dist.all_reduce(y)
    return y


def step_fco(x, w):
    return fco.gemv_allreduce(act(x, w[0], w[1]), w[2])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=8, help="tokens per decode step (M ≤ 64)")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--intermediate", type=int, default=14336)
    p.add_argument("--iters", type=int, default=50)
    a = p.parse_args()
    cuda = a.device == "cuda"
    rank, world, dev = _util.setup(a.device)
    if a.intermediate % world:
        raise SystemExit(f"--intermediate {a.intermediate} is not divisible by {world} ranks")
    dtype = torch.bfloat16 if cuda else torch.float32
    if not cuda:  # keep the CPU run short
        a.hidden, a.intermediate = min(a.hidden, 512), min(a.intermediate, 1024)

    g = torch.Generator(device="cpu").manual_seed(1234 + rank)
    shard = a.intermediate // world
    w = [(torch.randn(shard, a.hidden, generator=g) / a.hidden ** 0.5).to(dev, dtype),
         (torch.randn(shard, a.hidden, generator=g) / a.hidden ** 0.5).to(dev, dtype),
         (torch.randn(a.hidden, shard, generator=g) / shard ** 0.5).to(dev, dtype)]
    x = torch.randn(a.batch, a.hidden, generator=torch.Generator().manual_seed(7)).to(dev, dtype)

    y_ref, y_fco = step_torch(x, w), step_fco(x, w)
    ok, check = _util.check_line("fco vs torch", y_fco, y_ref,
                                 2e-2 if dtype == torch.bfloat16 else 1e-5)
    lines = [f"# tp_mlp_decode: {world} ranks, {a.device} {str(dtype)[6:]}, M={a.batch} "
             f"H={a.hidden} I={a.intermediate} (I/P={shard}); fco {fco.lib_path()}", check,
             _util.time_line("eager", _util.compare(lambda: step_torch(x, w),
                                                    lambda: step_fco(x, w), a.iters, cuda))]
    if cuda:
        lines.append(_util.time_line("graph", _util.graphed(lambda: step_torch(x, w),
                                                            lambda: step_fco(x, w), a.iters)))
    if rank == 0:
        print("\n".join(lines), flush=True)
    _util.teardown()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
