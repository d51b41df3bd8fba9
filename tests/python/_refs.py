"""_refs.py — plain-torch versions of the fused operators (what users write today), for the
tests: matmul + dist.all_reduce; F.embedding_bag + all_to_all_single + permute; per-expert
matmul + permute + all_to_all_single. Differentiable (torch.distributed.nn's all_to_all_single)
so their torch autograd is the reference for fco's backward. Imported inside rank processes.
"""
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dnn
import torch.nn.functional as F

TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}
# Gradients (fco's backward against torch autograd of the reference): sums over more terms.
GRAD_TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 5e-3}


def close(got, expect, dtype, scale=1.0):
    tol = TOL[dtype] * scale
    torch.testing.assert_close(got.float(), expect.float(), rtol=tol, atol=tol)


def same_on_all_ranks(y, group=None):
    parts = [torch.empty_like(y) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, y.contiguous(), group=group)
    return all(torch.equal(p, parts[0]) for p in parts)


def gemv_allreduce(x, w, bias=None, group=None):
    """Σ_r x_r @ w_r.T + bias: matmul, then all_reduce (in fp32 here, rounded once, as fco)."""
    y = (x.float() @ w.float().t())
    dist.all_reduce(y, group=group)
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def embedding_alltoall(weight, indices, offsets, table_rows, tables_per_rank, batch_per_rank,
                       per_sample_weights=None, mode="sum", group=None):
    """F.embedding_bag per local table over the global batch, all_to_all_single, permute."""
    rank = dist.get_rank(group)
    B, D = sum(batch_per_rank), weight.shape[1]
    Tr, br = tables_per_rank[rank], batch_per_rank[rank]
    tables = torch.split(weight, list(table_rows)) if Tr else []
    pooled = []
    for t, table in enumerate(tables):
        o = offsets[t * B:(t + 1) * B + 1].long()
        lo, hi = int(o[0]), int(o[-1])
        idx = indices[lo:hi].long()
        psw = None if per_sample_weights is None else per_sample_weights[lo:hi].to(weight.dtype)
        if mode == "mean" and psw is not None:  # embedding_bag: weights only with sum
            s = F.embedding_bag(idx, table, o[:-1] - lo, mode="sum", per_sample_weights=psw)
            n = (o[1:] - o[:-1]).clamp_min(1).to(s.dtype)
            pooled.append(s / n[:, None])
        else:
            pooled.append(F.embedding_bag(idx, table, o[:-1] - lo, mode=mode,
                                          per_sample_weights=psw))
    send = torch.stack(pooled, 1) if Tr else weight.sum() * 0 + weight.new_zeros((B, 0, D))
    recv = weight.new_empty(br * sum(tables_per_rank) * D)
    recv = dnn.all_to_all_single(recv, send.reshape(-1),
                                 [br * tq * D for tq in tables_per_rank],
                                 [b * Tr * D for b in batch_per_rank], group=group)
    parts = torch.split(recv, [br * tq * D for tq in tables_per_rank])
    return torch.cat([p.view(br, tq, D) for p, tq in zip(parts, tables_per_rank)], 1)


def gemm_alltoall(a, w, counts, out_rows, w_layout="kn", group=None):
    """Per-expert matmul (rows grouped by expert, then source rank), permute to destination
    order, all_to_all_single back to the source ranks, pad to out_rows with zeros."""
    C = counts.cpu().long()
    E, P = C.shape
    ys, row = [], 0
    for e in range(E):
        n = int(C[e].sum())
        ys.append(a[row:row + n] @ (w[e] if w_layout == "kn" else w[e].t()))
        row += n
    Y = torch.cat(ys)
    blocks, start = {}, 0
    for e in range(E):
        for s in range(P):
            n = int(C[e, s])
            blocks[(s, e)] = Y[start:start + n]
            start += n
    send = torch.cat([blocks[(s, e)] for s in range(P) for e in range(E)])
    # The split exchange runs on the data's device: an NCCL group has no CPU backend.
    in_splits = C.sum(0).to(a.device)
    out_splits = torch.empty_like(in_splits)
    dist.all_to_all_single(out_splits, in_splits, group=group)
    in_splits, out_splits = in_splits.cpu(), out_splits.cpu()
    N = Y.shape[1]
    recv = a.new_empty((int(out_splits.sum()), N))
    recv = dnn.all_to_all_single(recv, send, out_splits.tolist(), in_splits.tolist(), group=group)
    return torch.cat([recv, recv.new_zeros((out_rows - recv.shape[0], N))])


def gemm_data(dtype, E, K, N, seed, layout="kn", cap=256, max_count=20):
    """Random gemm_alltoall inputs on the GPU for this rank: a [cap, K], w [E, K, N] ("kn") or
    [E, N, K] ("nk"), device counts [E, P] in 0..max_count (seeded per rank)."""
    r, P = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(seed * 13 + r)
    counts = torch.randint(0, max_count + 1, (E, P), generator=g, dtype=torch.int32)
    a = torch.randn(cap, K, generator=g).to("cuda", dtype)
    shape = (E, K, N) if layout == "kn" else (E, N, K)
    w = (torch.randn(shape, generator=g) / K ** 0.5).to("cuda", dtype)
    return a, w, counts.cuda()


def recv_rows(counts):
    """gemm_alltoall's recv_rows hint on the host: rows each rank sends this one (one exchange)."""
    sent = counts.sum(0).int()
    recv = torch.empty_like(sent)
    dist.all_to_all_single(recv, sent)
    return recv.cpu()


def gemm_alltoall_ref64(As, Ws, Cs, layout):
    """float64 gemm_alltoall output of every rank, from all ranks' inputs (one process holds
    them): destination s gets the rows from source r (its experts in order, row order kept)."""
    P = len(As)
    Ch = [C.cpu() for C in Cs]
    N = Ws[0].shape[2] if layout == "kn" else Ws[0].shape[1]
    outs = []
    for s in range(P):
        rows = []
        for r in range(P):
            row = 0
            for e in range(Ch[r].shape[0]):
                for q in range(P):
                    n = int(Ch[r][e, q])
                    if q == s and n:
                        we = Ws[r][e].double()
                        rows.append(As[r][row:row + n].double() @ (we if layout == "kn" else we.T))
                    row += n
        outs.append(torch.cat(rows) if rows else
                    torch.zeros(0, N, dtype=torch.float64, device=As[0].device))
    return outs
