"""dlrm_forward.py — a DLRM-style forward with model-parallel (table-wise sharded) embedding
tables: fco.embedding_alltoall (pooled lookup fused with the All-to-All to the sample owners)
vs plain torch (F.embedding_bag, all_to_all_single, permute). Checks that both give the same
click probabilities and prints both timings (the embedding stage and the whole forward).

    make && export PYTHONPATH=$PWD/python
    torchrun --nproc-per-node 2 examples/dlrm_forward.py                 # GPUs: nccl, bf16 tables
    torchrun --nproc-per-node 2 examples/dlrm_forward.py --device cpu    # no GPU: gloo, fp32

Rank r owns T_r of the T tables and holds their indices for the whole global batch B (what
TorchRec's input distribution delivers), and the dense features of its own B/P samples
(data-parallel MLPs). Forward: bottom MLP on the dense features, the embedding stage (each rank
gets [B/P, T, D]: every table's pooled vector for its samples), dot-product interaction, top
MLP. On CPU fco runs its reference implementation: the timings there only show that it runs.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F

import _util
import fco


def mlp(sizes, g, dev, dtype):
    return [((torch.randn(o, i, generator=g) / i ** 0.5).to(dev, dtype),
             torch.zeros(o, device=dev, dtype=dtype)) for i, o in zip(sizes[:-1], sizes[1:])]


def run_mlp(x, layers, last_act=True):
    for k, (w, b) in enumerate(layers):
        x = F.linear(x, w, b)
        if k < len(layers) - 1 or last_act:
            x = torch.relu(x)
    return x


def interact(bottom, emb):
    """DLRM dot interaction: pairwise dots of [bottom, tables], lower triangle, + bottom."""
    z = torch.cat([bottom[:, None, :], emb], 1)
    zz = torch.bmm(z, z.transpose(1, 2))
    i, j = torch.tril_indices(z.shape[1], z.shape[1], -1, device=z.device)
    return torch.cat([bottom, zz[:, i, j]], 1)


class Sharded:
    """This rank's tables and their sparse input for one global batch."""

    def __init__(self, a, rank, world, dev, dtype):
        T = a.tables
        self.tpr = [T // world + (q < T % world) for q in range(world)]
        self.bpr = [a.batch // world + (q < a.batch % world) for q in range(world)]
        B, Tr = a.batch, self.tpr[rank]
        g = torch.Generator().manual_seed(100 + rank)
        self.rows = [a.rows] * Tr
        self.weight = (torch.randn(Tr * a.rows, a.dim, generator=g) * 0.1).to(dev, dtype)
        lens = torch.randint(1, a.pooling + 1, (Tr * B,), generator=g)
        self.offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(dev)
        self.indices = torch.randint(0, a.rows, (int(lens.sum()),), generator=g).to(dev)
        # plain torch: one embedding_bag over the packed tables, rows made global once
        table = torch.repeat_interleave(torch.arange(Tr * B) // B, lens).to(dev)
        self.global_indices = self.indices + table * a.rows
        self.D, self.B, self.Tr, self.rank = a.dim, B, Tr, rank

    def torch_stage(self):
        pooled = F.embedding_bag(self.global_indices, self.weight, self.offsets[:-1],
                                 mode="sum")                                   # [T_r·B, D]
        send = pooled.view(self.Tr, self.B, self.D).transpose(0, 1).contiguous()  # [B, T_r, D]
        br, D = self.bpr[self.rank], self.D
        recv = send.new_empty(br * sum(self.tpr) * D)
        dist.all_to_all_single(recv, send.view(-1), [br * t * D for t in self.tpr],
                               [b * self.Tr * D for b in self.bpr])
        parts = recv.split([br * t * D for t in self.tpr])
        return torch.cat([q.view(br, t, D) for q, t in zip(parts, self.tpr)], 1)  # [b, T, D]

    def fco_stage(self):
        return fco.embedding_alltoall(self.weight, self.indices, self.offsets, self.rows,
                                      self.tpr, self.bpr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=4096, help="global batch B")
    p.add_argument("--tables", type=int, default=26)
    p.add_argument("--rows", type=int, default=100000, help="rows per table")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--pooling", type=int, default=20, help="max bag length (uniform 1..)")
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    cuda = a.device == "cuda"
    rank, world, dev = _util.setup(a.device)
    dtype = torch.bfloat16 if cuda else torch.float32
    if not cuda:  # keep the CPU run short
        a.batch, a.tables, a.rows, a.dim = min(a.batch, 128), min(a.tables, 6), \
            min(a.rows, 1000), min(a.dim, 32)

    sh = Sharded(a, rank, world, dev, dtype)
    g = torch.Generator().manual_seed(7)  # MLPs replicated (data parallel)
    bottom_mlp = mlp([13, 256, a.dim], g, dev, dtype)
    n_int = a.dim + (a.tables + 1) * a.tables // 2
    top_mlp = mlp([n_int, 256, 1], g, dev, dtype)
    dense = torch.randn(sh.bpr[rank], 13, generator=torch.Generator().manual_seed(rank)).to(
        dev, dtype)

    def forward(stage):
        bottom = run_mlp(dense, bottom_mlp)
        return torch.sigmoid(run_mlp(interact(bottom, stage()), top_mlp, last_act=False))

    with torch.no_grad():
        e_ref, e_fco = sh.torch_stage(), sh.fco_stage()
        p_ref, p_fco = forward(sh.torch_stage), forward(sh.fco_stage)
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
        ok1, c1 = _util.check_line("embeddings fco vs torch", e_fco, e_ref, tol)
        ok2, c2 = _util.check_line("click probabilities", p_fco, p_ref, tol)
        lines = [f"# dlrm_forward: {world} ranks, {a.device} {str(dtype)[6:]}, B={a.batch} "
                 f"T={a.tables} (per rank {sh.tpr}) rows={a.rows} D={a.dim} pooling<={a.pooling}"
                 f"; fco {fco.lib_path()}", c1, c2,
                 _util.time_line("emb", _util.compare(sh.torch_stage, sh.fco_stage, a.iters,
                                                      cuda)),
                 _util.time_line("forward", _util.compare(lambda: forward(sh.torch_stage),
                                                          lambda: forward(sh.fco_stage), a.iters,
                                                          cuda))]
        if cuda:
            lines.append(_util.time_line("graph", _util.graphed(sh.torch_stage, sh.fco_stage,
                                                                a.iters)))
            fco.init().check_async_error()
    if rank == 0:
        print("\n".join(lines), flush=True)
    _util.teardown()
    if not (ok1 and ok2):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
