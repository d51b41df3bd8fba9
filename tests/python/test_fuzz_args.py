"""test_fuzz_args.py — every public op of the fco package on random arguments: a valid call made at
random, then (in two calls of three) one or two of its arguments replaced by something wrong — a
tensor of a random dtype (float, half, int, bool), dimension (0-d to 3-d, sizes 0..5),
non-contiguous, on the meta device, or no tensor at all (None, a list, a number, a string), or a
random impl / mode / layout / list / out / group value — the same on every rank (one seed), in a
world of 2 ranks (gloo + the cpu transport).
Contract: a call either returns a tensor of the documented shape, or raises fco.FcoError with a
code a caller can act on (INVALID_ARGUMENT, UNSUPPORTED, INVALID_USAGE) — never another exception
type, a crash or a hang — and the communicator works afterwards. Found in session 50: TypeError,
ValueError or IndexError instead of FcoError from fco.empty_symmetric (a shape or dtype that is
not one), fco.embedding_alltoall (a list argument that is None) and fco.gemm_alltoall (a 0-d a).
Run: pytest tests/python/test_fuzz_args.py (FCO_FUZZ_ARGS_ITERS sets the calls, default 400).
"""
import os

_CODES = {"INVALID_ARGUMENT", "UNSUPPORTED", "INVALID_USAGE"}


def _w_fuzz(seed, iters):
    import random

    import torch

    import fco

    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)  # torch's own draws, the same on every rank too
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
              torch.int64, torch.bool]
    floats = [torch.float32, torch.float16, torch.bfloat16]

    def rand_tensor():
        dt = rng.choice(dtypes)
        shape = [rng.randint(0, 5) for _ in range(rng.randint(0, 3))]
        t = torch.zeros(shape, dtype=dt) if dt == torch.bool else \
            torch.randint(-2, 4, shape, generator=g).to(dt)
        u = rng.random()
        if u < 0.15 and t.dim() >= 2:
            t = t.transpose(0, 1)  # not contiguous (when both sizes exceed 1)
        elif u < 0.25:
            t = t.to("meta")
        return t

    def wrong():
        return rand_tensor() if rng.random() < 0.7 else \
            rng.choice([None, [1, 2], 3, 1.5, "x", (2,), [[1], [2]]])

    def impl():
        return rng.choice(["auto", "auto", "baseline", -1, 0, 1, 2, 3, 7, -2, "bogus", True, None,
                           1.0])

    def valid(name):
        """(positional args, keyword args, expected output shape) of a valid call on either rank."""
        dt = rng.choice(floats)
        if name in ("allreduce", "allreduce_"):
            t = torch.randint(-3, 4, (rng.randint(0, 9),), generator=g).to(dt)
            return [t], {"impl": "auto"}, t.shape
        if name == "gemv_allreduce":
            M, N, K = rng.randint(1, 4), rng.randint(1, 6), rng.randint(1, 6)
            x = torch.randint(-2, 3, (M, K), generator=g).to(dt)
            w = torch.randint(-2, 3, (N, K), generator=g).to(dt)
            bias = torch.randint(-2, 3, (N,), generator=g).to(dt) if rng.random() < 0.5 else None
            return [x, w, bias], {"impl": "auto"}, (M, N)
        if name == "embedding_alltoall":
            D, B, rows = rng.randint(1, 4), 4, [4]
            n = rng.randint(0, 8)
            it = rng.choice([torch.int32, torch.int64])
            idx = torch.randint(0, 4, (n,), dtype=it, generator=g)
            cuts = sorted(rng.randint(0, n) for _ in range(B - 1))
            off = torch.tensor([0] + cuts + [n], dtype=it)
            weight = torch.randint(-2, 3, (4, D), generator=g).to(dt)
            psw = torch.randint(-2, 3, (n,), generator=g).float() if rng.random() < 0.3 else None
            return ([weight, idx, off, rows, [1, 1], [2, 2]],
                    {"per_sample_weights": psw, "mode": rng.choice(["sum", "mean"]),
                     "impl": "auto"}, (2, 2, D))
        if name == "gemm_alltoall":
            E, K, N = rng.randint(1, 2), rng.randint(1, 4), rng.randint(1, 4)
            counts = torch.randint(0, 3, (E, 2), dtype=torch.int32, generator=g)
            a_rows = int(counts.sum()) + rng.randint(0, 2)
            a = torch.randint(-2, 3, (a_rows, K), generator=g).to(dt)
            w = torch.randint(-2, 3, (E, K, N), generator=g).to(dt)
            out_rows = 2 * int(counts.sum()) + 2  # what either rank can receive, and more
            return [a, w, counts], {"out_rows": out_rows, "impl": "auto"}, (out_rows, N)
        if name == "empty_symmetric":
            shape = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))  # 0 bytes: refused
            return [shape, dt], {"device": "cpu"}, shape
        raise AssertionError(name)

    extra_keys = {"gemv_allreduce": ["impl", "out", "group"],
                  "embedding_alltoall": ["per_sample_weights", "mode", "impl", "out", "group"],
                  "gemm_alltoall": ["out_rows", "impl", "counts_host", "recv_rows", "w_layout",
                                    "out", "group"],
                  "allreduce": ["impl", "group"], "allreduce_": ["impl", "group"],
                  "empty_symmetric": ["nbytes", "group"]}

    def bad_out(args):
        """An out= that is wrong: another shape or dtype, not contiguous, on meta, an input."""
        return rng.choice([lambda: wrong(), lambda: torch.zeros(2, 3, 4).transpose(0, 1),
                           lambda: args[0]])()

    # wrong values of embedding_alltoall's lists that are wrong on every rank alike: a value that
    # only one rank refuses (T_r = tables_per_rank[rank] fitting the offsets on one rank only)
    # leaves the others inside the collective, paired with that rank's next call — the caller's
    # error, which every collective library has (fco.h: peers of a rank alone refusing)
    bad_lists = {3: [[4, 4], [-1], [3], None, "x", [4.0]],
                 4: [[1], [1, 1, 1], [0, 0], [-1, -1], [2, 2], None, "x", [1.0, 1]],
                 5: [[2], [0, 0], [-2, -2], [1, 1], None, [2.0, 2], 7]}

    def mutate(name, args, kw):
        if rng.random() < 0.5 or not extra_keys[name]:
            i = rng.randrange(len(args))
            args[i] = rng.choice(bad_lists[i]) if name == "embedding_alltoall" and i >= 3 \
                else wrong()
            return f"args[{i}]"
        k = rng.choice(extra_keys[name])
        kw[k] = {"impl": impl, "mode": lambda: rng.choice(["max", None, 1, "sum"]),
                 "w_layout": lambda: rng.choice(["tn", 0, "nk", None]),
                 "out_rows": lambda: rng.choice([-1, 0, 1, 2.5, "x", None]),
                 "counts_host": lambda: rng.choice([[[1, 0]], "x", [[1.5, 0]], wrong()]),
                 "recv_rows": lambda: rng.choice([[1, 1], [-1, 0], [0], "x", [2.0, 1]]),
                 "nbytes": lambda: rng.choice([0, -4, 3, 2.5, "x", 1 << 10]),
                 "out": lambda: bad_out(args),
                 "group": lambda: rng.choice(["no_such_group", 3, object(), [None]]),
                 "per_sample_weights": wrong}[k]()
        return k

    ops = {"allreduce": fco.allreduce, "allreduce_": fco.allreduce_,
           "gemv_allreduce": fco.gemv_allreduce, "embedding_alltoall": fco.embedding_alltoall,
           "gemm_alltoall": fco.gemm_alltoall, "empty_symmetric": fco.empty_symmetric}
    outcome = {}
    for i in range(iters):
        name = rng.choice(sorted(ops))
        args, kw, shape = valid(name)
        if "out" in extra_keys[name] and rng.random() < 0.25:  # a right out=, filled and returned
            kw["out"] = torch.full(shape, float("nan")).to(args[0].dtype)
        mine = kw.get("out")
        changed = [mutate(name, args, kw) for _ in range(rng.choice([0, 1, 1, 2]))]
        what = f"call {i}: {name}, changed {changed or 'nothing'} (seed {seed})"
        try:
            with torch.no_grad():  # allreduce_ on a tensor that requires grad is its own case
                out = ops[name](*args, **kw)
        except fco.FcoError as e:
            if e.name not in _CODES:
                raise AssertionError(f"{what}: FcoError {e.name}: {e}")
            if not changed:
                raise AssertionError(f"{what}: a valid call raised {e}")
            key = (name, e.name)
        except Exception as e:  # noqa: BLE001 — any other type is the finding
            raise AssertionError(f"{what}: {type(e).__name__}: {e}") from e
        else:
            if not isinstance(out, torch.Tensor):
                raise AssertionError(f"{what}: returned {type(out).__name__}")
            if not changed and tuple(out.shape) != tuple(shape):
                raise AssertionError(f"{what}: shape {tuple(out.shape)}, want {tuple(shape)}")
            if not changed and mine is not None and (out is not mine or out.isnan().any()):
                raise AssertionError(f"{what}: out= not returned, or not filled")
            key = (name, "ok")
        outcome[key] = outcome.get(key, 0) + 1
    assert fco.allreduce(torch.ones(3)).tolist() == [2.0] * 3  # the communicator still works
    return sorted(outcome.items())


def test_random_arguments(pool2):
    import random

    seed = random.randrange(1 << 30)
    iters = int(os.environ.get("FCO_FUZZ_ARGS_ITERS", "400"))
    res = pool2.run(_w_fuzz, seed, iters)
    assert res[0] == res[1], res  # the same outcomes on both ranks
    print(f"seed {seed}: {res[0]}")
    seen = {(name, what == "ok") for (name, what), n in res[0]}
    for name in ("gemv_allreduce", "embedding_alltoall", "gemm_alltoall"):
        assert (name, True) in seen and (name, False) in seen, res[0]  # both outcomes reached
