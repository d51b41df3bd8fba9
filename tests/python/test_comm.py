"""test_comm.py — fco.init: one communicator per (group, device), cached, bootstrapped over the
group, on the cpu transport for CPU tensors; workspace reserve; last_plan; shutdown.
Run: pytest tests/python/test_comm.py
"""


def _w_init():
    import pytest
    import torch.distributed as dist

    import fco

    c = fco.init()
    assert fco.init() is c and fco.init(device="cpu") is c  # cached
    assert (c.rank, c.size) == (dist.get_rank(), dist.get_world_size())
    assert c.transport == "cpu" and str(c.device) == "cpu"
    assert c in fco.communicators()
    c.check_async_error()
    before = c.workspace_bytes()
    c.reserve(before + (1 << 20))  # collective: the same bytes on every rank
    assert c.workspace_bytes() >= before + (1 << 20)
    # nbytes: an int in 0..2^63-1 (2^64 wrapped to 0 in ctypes, 2.5 was truncated, "10"
    # taken, -1 an OUT_OF_MEMORY): INVALID_ARGUMENT, the workspace untouched
    size = c.workspace_bytes()
    for nbytes in (2 ** 64, 2 ** 63, 2.5, "10", -1, None):
        with pytest.raises(fco.FcoError, match=f"nbytes {nbytes!r} is not an int") as e:
            c.reserve(nbytes)
        assert e.value.name == "INVALID_ARGUMENT"
    assert c.workspace_bytes() == size
    assert fco.allreduce_workspace_bytes(_ones(1000)) >= 2 * dist.get_world_size() * 4000
    # fco.init's config fields: ints in range (2.5 was truncated, -5 taken, 2^70 wrapped)
    for kw in ({"timeout_ms": 2.5}, {"timeout_ms": -5}, {"timeout_ms": 2 ** 31},
               {"timeout_ms": "10"}, {"max_workspace_bytes": 2 ** 70},
               {"max_workspace_bytes": -1}, {"timeout_ms": True}):
        (name, v), = kw.items()
        with pytest.raises(fco.FcoError, match=f"{name} {v!r} is not an int") as e:
            fco.init(**kw)
        assert e.value.name == "INVALID_ARGUMENT"
    # ... and they configure a communicator only when fco.init creates it: for one that exists
    # with other values, INVALID_USAGE (they were ignored without a word); the same values or
    # the defaults return it
    with pytest.raises(fco.FcoError, match="its config cannot change") as e:
        fco.init(timeout_ms=1234)
    assert e.value.name == "INVALID_USAGE"
    g = dist.new_group(list(range(dist.get_world_size())))
    c2 = fco.init(g, timeout_ms=1234, max_workspace_bytes=1 << 30)
    assert fco.init(g, timeout_ms=1234, max_workspace_bytes=1 << 30) is c2 and fco.init(g) is c2
    with pytest.raises(fco.FcoError, match="timeout_ms=1234, max_workspace_bytes=1073741824"):
        fco.init(g, timeout_ms=1234)
    fco.shutdown(g)
    return repr(c)


def _ones(n):
    import torch

    return torch.ones(n)


def test_init_cached_and_reserve(pool2):
    reprs = pool2.run(_w_init)
    assert "rank=0/2" in reprs[0] and "rank=1/2" in reprs[1]


def _w_last_plan():
    import torch

    import fco

    c = fco.init()
    for impl in (0, 1, "baseline", "oneshot"):
        fco.allreduce(torch.ones(1000), impl=impl)
        impl = {"baseline": 0, "oneshot": 1}.get(impl, impl)
        assert c.last_plan().split(" ")[:3] == ["allreduce", "impl", str(impl)], c.last_plan()
        assert fco.last_plan() == c.last_plan() == fco.last_plan(device="cpu")
    fco.allreduce(torch.ones(1000))  # "auto": the plan names the impl it resolved to
    words = c.last_plan().split(" ")
    assert words[:2] == ["allreduce", "impl"] and int(words[2]) >= 0, c.last_plan()
    return True


def test_last_plan_names_the_op_and_impl(pool2):
    pool2.run(_w_last_plan)


def _w_groups_get_their_own():
    import torch.distributed as dist

    import fco

    n = dist.get_world_size()
    g_all = dist.new_group(list(range(n)))
    g_pair = dist.new_group([0, 1])
    c_all = fco.init(g_all)
    assert c_all is not fco.init()  # another group, another communicator
    assert c_all.size == n
    if dist.get_rank() in (0, 1):
        c_pair = fco.init(g_pair)
        assert c_pair.size == 2 and c_pair.rank == dist.get_rank()
    fco.shutdown(g_all)
    assert c_all.handle is None and c_all not in fco.communicators()
    return True


def test_each_group_its_own_communicator(pool3):
    pool3.run(_w_groups_get_their_own)


def _w_shutdown_all():
    import torch

    import fco

    fco.init()
    fco.shutdown()
    assert fco.communicators() == []
    # everything comes back on next use
    return fco.allreduce(torch.ones(2)).tolist()


def test_shutdown_all_then_reuse(pool2):
    assert pool2.run(_w_shutdown_all) == [[2.0, 2.0]] * 2


def _w_workspace_queries():
    import torch

    import fco

    x, w = torch.ones(4, 64), torch.ones(32, 64)
    emb = torch.ones(10, 16)
    a, wk = torch.ones(24, 8), torch.ones(2, 8, 16)
    need = {
        "allreduce": fco.allreduce_workspace_bytes(torch.ones(1000)),
        "gemv_allreduce": fco.gemv_allreduce_workspace_bytes(x, w),
        "gemv_allreduce M>64": fco.gemv_allreduce_workspace_bytes(torch.ones(100, 64), w),
        "embedding_alltoall": fco.embedding_alltoall_workspace_bytes(emb, [1, 1], [4, 4]),
        "gemm_alltoall": fco.gemm_alltoall_workspace_bytes(a, wk, out_rows=30),
    }
    c = fco.init()
    c.reserve(max(need.values()))  # collective, the same bytes on every rank
    assert c.workspace_bytes() >= max(need.values())
    # cpu transport: gemv needs 2·P·roundup(M·N·4, 256) (include/fco.h)
    assert need["gemv_allreduce"] == 2 * 2 * 512, need
    return all(v > 0 for v in need.values())


def test_workspace_queries_of_every_op(pool2):
    assert pool2.run(_w_workspace_queries) == [True, True]


def _w_group_arguments():
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    # group=7 (not a ProcessGroup, a name or None): FcoError on every entry point (it was an
    # AttributeError); an unknown name: FcoError too (torch's RuntimeError before)
    for call in (lambda: fco.allreduce(torch.ones(2), group=7),
                 lambda: fco.gemv_allreduce(torch.ones(1, 2), torch.ones(2, 2), group=7),
                 lambda: fco.init(7), lambda: fco.shutdown(7), lambda: fco.last_plan(7),
                 lambda: fco.empty_symmetric(4, device="cpu", group=7)):
        with pytest.raises(fco.FcoError, match="group 7 is not a torch.distributed") as e:
            call()
        assert e.value.name == "INVALID_ARGUMENT"
    with pytest.raises(fco.FcoError, match="group name 'nope' names no process group"):
        fco.allreduce(torch.ones(2), group="nope")
    # a device that is neither CUDA nor CPU: no communicator for it
    for call in (lambda: fco.init(device="meta"), lambda: fco.last_plan(device="meta")):
        with pytest.raises(fco.FcoError, match="device meta is not supported") as e:
            call()
        assert e.value.name == "INVALID_ARGUMENT"
    # names work wherever a group does: fco.init(name) (was a ValueError), and "" (the ops'
    # name of the default group) in fco.shutdown (silently destroyed nothing)
    g = dist.new_group(list(range(dist.get_world_size())))
    c = fco.init(g.group_name)
    assert c is fco.init(g) and fco.allreduce(torch.ones(2), group=g).tolist() == [2.0, 2.0]
    d = fco.init()
    fco.shutdown("")
    assert d.handle is None and d not in fco.communicators() and c in fco.communicators()
    fco.shutdown(g.group_name)
    assert c.handle is None and fco.communicators() == []
    return fco.allreduce(torch.ones(2)).tolist()


def test_group_arguments(pool2):
    assert pool2.run(_w_group_arguments) == [[2.0, 2.0]] * 2


def _w_shutdown_keeps_going():
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    # a destroy that fails does not stop shutdown(): the others are destroyed too, then the
    # first failure is raised
    g = dist.new_group(list(range(dist.get_world_size())))
    comms, called = [fco.init(), fco.init(g)], []
    for c in comms:
        def failing(c=c, real=c.destroy):
            called.append(c)
            real()
            raise fco.FcoError(fco._lib.INTERNAL, f"destroy of {c.group_name} failed")
        c.destroy = failing
    with pytest.raises(fco.FcoError, match="destroy of .* failed"):
        fco.shutdown()
    assert len(called) == 2 and all(c.handle is None for c in comms)
    assert fco.communicators() == []
    return fco.allreduce(torch.ones(2)).tolist()


def test_shutdown_destroys_all_despite_a_failure(pool2):
    assert pool2.run(_w_shutdown_keeps_going) == [[2.0, 2.0]] * 2
