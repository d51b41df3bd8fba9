"""moe_layer.py — an expert-parallel MoE layer (top-k router, E experts spread over the ranks,
SwiGLU-less 2-layer expert FFN) whose down projection and combine all-to-all run as one
fco.gemm_alltoall, vs plain torch (per-expert matmul, permute, all_to_all_single). Checks that
both give the same layer output and prints both timings.

    make && export PYTHONPATH=$PWD/python
    torchrun --nproc-per-node 2 examples/moe_layer.py                 # GPUs: nccl, bf16
    torchrun --nproc-per-node 2 examples/moe_layer.py --device cpu    # no GPU: gloo, fp32

Every rank routes its own tokens; rank q hosts experts q·E_l .. (q+1)·E_l − 1. Dispatch (the
same in both paths): sort the token copies by expert, exchange the per-expert counts and the
rows with all_to_all_single, regroup what arrived by local expert then source rank (fco's
layout), up projection + GELU per expert. Then the paths differ: torch runs the down projection
per expert, puts the rows back in source order and all_to_all_single's them home; fco does all
of that in fco.gemm_alltoall, whose output on each rank is already in the order its tokens were
sent (rank-major, then expert). Both then un-sort and weight by the router probabilities. The
routing is data-dependent (host split sizes), so this layer runs eagerly, not in a CUDA graph.
On CPU fco runs its reference implementation: the timings there only show that it runs.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F

import _util
import fco


class Layer:
    def __init__(self, a, rank, world, dev, dtype):
        self.E, self.El, self.k, self.world, self.rank = a.experts, a.experts // world, a.topk, \
            world, rank
        g = torch.Generator().manual_seed(11)  # router replicated
        self.router = (torch.randn(a.experts, a.hidden, generator=g) / a.hidden ** 0.5).to(
            dev, dtype)
        g = torch.Generator().manual_seed(200 + rank)  # this rank's experts
        self.w1 = (torch.randn(self.El, a.hidden, a.ffn, generator=g) / a.hidden ** 0.5).to(
            dev, dtype)
        self.w2 = (torch.randn(self.El, a.ffn, a.hidden, generator=g) / a.ffn ** 0.5).to(
            dev, dtype)
        self.capacity = a.tokens * a.topk * world  # a_rows: the same on every rank
        # the combine's output, allocated once in symmetric memory (collective): the peers store
        # their rows straight into it, no landing copy (--no-symmetric: a new tensor each call)
        self.out = fco.empty_symmetric((a.tokens * a.topk, a.hidden), dtype, device=dev) \
            if a.symmetric else None

    def dispatch(self, x):
        """Route, send token copies to their experts; returns what both paths share."""
        T, H = x.shape
        prob, expert = torch.topk(torch.softmax(x @ self.router.t(), -1, dtype=torch.float32),
                                  self.k)
        flat = expert.reshape(-1)
        order = torch.argsort(flat, stable=True)           # copies sorted by global expert
        per_expert = torch.bincount(flat, minlength=self.E).int()
        counts_in = torch.empty_like(per_expert)           # [src, local expert] flattened
        dist.all_to_all_single(counts_in, per_expert)
        counts = counts_in.view(self.world, self.El).t().contiguous()  # [E_l, P]: fco's counts
        ch = counts.cpu()
        send_rows = per_expert.view(self.world, self.El).sum(1).cpu().tolist()
        recv_rows = ch.sum(0).tolist()
        rows = x[order // self.k]
        got = rows.new_empty((sum(recv_rows), H))
        dist.all_to_all_single(got, rows, recv_rows, send_rows)
        # got: source-major, then expert → expert-major, then source (fco's a layout)
        blocks = list(got.split(ch.t().reshape(-1).tolist()))         # (s, e)
        a = torch.cat([blocks[s * self.El + e] for e in range(self.El)
                       for s in range(self.world)])
        ne = ch.sum(1).tolist()
        h = torch.cat([F.gelu(ae @ self.w1[e]) for e, ae in enumerate(a.split(ne))])
        h = torch.cat([h, h.new_zeros((self.capacity - h.shape[0], h.shape[1]))])
        return dict(T=T, prob=prob, order=order, counts=counts, ch=ch, ne=ne, h=h,
                    send_rows=send_rows, recv_rows=recv_rows)

    def combine(self, y_sorted, d):
        """y_sorted: the expert outputs of this rank's token copies, in sorted order."""
        y = torch.empty_like(y_sorted)
        y[d["order"]] = y_sorted
        return (y.view(d["T"], self.k, -1) * d["prob"][..., None].to(y.dtype)).sum(1)

    def down_torch(self, d):
        h, ch = d["h"], d["ch"]
        y = torch.cat([he @ self.w2[e] for e, he in enumerate(h[:sum(d["ne"])].split(d["ne"]))])
        blocks = list(y.split(ch.reshape(-1).tolist()))                 # (e, s)
        send = torch.cat([blocks[e * self.world + s] for s in range(self.world)
                          for e in range(self.El)])
        back = send.new_empty((sum(d["send_rows"]), send.shape[1]))
        dist.all_to_all_single(back, send, d["send_rows"], d["recv_rows"])
        return back

    def down_fco(self, d):
        out = fco.gemm_alltoall(d["h"], self.w2, d["counts"], out_rows=d["T"] * self.k,
                                counts_host=d["ch"], recv_rows=d["send_rows"], out=self.out)
        return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tokens", type=int, default=2048, help="tokens per rank")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--ffn", type=int, default=1408, help="expert intermediate size")
    p.add_argument("--experts", type=int, default=16, help="experts in total")
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--no-symmetric", dest="symmetric", action="store_false",
                   help="fco's output in an ordinary tensor (staged and landed by the peers)")
    a = p.parse_args()
    cuda = a.device == "cuda"
    rank, world, dev = _util.setup(a.device)
    if a.experts % world:
        raise SystemExit(f"--experts {a.experts} is not divisible by {world} ranks")
    dtype = torch.bfloat16 if cuda else torch.float32
    if not cuda:  # keep the CPU run short
        a.tokens, a.hidden, a.ffn, a.experts = min(a.tokens, 64), min(a.hidden, 256), \
            min(a.ffn, 256), min(a.experts, 2 * world)
    layer = Layer(a, rank, world, dev, dtype)
    x = torch.randn(a.tokens, a.hidden, generator=torch.Generator().manual_seed(rank)).to(
        dev, dtype)

    def layer_torch():
        d = layer.dispatch(x)
        return layer.combine(layer.down_torch(d), d)

    def layer_fco():
        d = layer.dispatch(x)
        return layer.combine(layer.down_fco(d), d)

    with torch.no_grad():
        d = layer.dispatch(x)
        ok1, c1 = _util.check_line("combined rows fco vs torch", layer.down_fco(d),
                                   layer.down_torch(d), 2e-2 if cuda else 1e-5)
        ok2, c2 = _util.check_line("layer output", layer_fco(), layer_torch(),
                                   2e-2 if cuda else 1e-5)
        lines = [f"# moe_layer: {world} ranks, {a.device} {str(dtype)[6:]}, tokens/rank="
                 f"{a.tokens} H={a.hidden} F={a.ffn} E={a.experts} (per rank {layer.El}) "
                 f"top{a.topk}; fco {fco.lib_path()}", c1, c2,
                 _util.time_line("down+a2a", _util.compare(lambda: layer.down_torch(d),
                                                           lambda: layer.down_fco(d), a.iters,
                                                           cuda)),
                 _util.time_line("layer", _util.compare(layer_torch, layer_fco, a.iters, cuda))]
        if cuda:
            fco.init().check_async_error()
    if rank == 0:
        print("\n".join(lines), flush=True)
    _util.teardown()
    if not (ok1 and ok2):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
