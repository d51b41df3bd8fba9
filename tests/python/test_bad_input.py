"""test_bad_input.py — bad input raises fco.FcoError with a message naming the argument and the
value (from the Python checks, or libfco's fco_last_error for what only the ranks together can
see), never a crash or a hang, and the communicator keeps working afterwards.
Run: pytest tests/python/test_bad_input.py
"""
import pytest


def _w_local_checks():
    import contextlib

    import pytest
    import torch

    import fco

    cases = [
        (torch.ones(4, dtype=torch.float64), "dtype torch.float64"),
        (torch.ones(4, dtype=torch.int32), "dtype torch.int32"),
        (torch.ones(4, 6)[:, ::2], "not contiguous"),
        (torch.ones(6, 4).t(), "not contiguous"),
        (torch.ones(3, 3).to_sparse(), "layout"),
        ([1.0, 2.0], "not a Tensor"),
    ]
    for t, msg in cases:
        for fn in (fco.allreduce, fco.allreduce_):
            with pytest.raises(fco.FcoError, match=msg) as e:
                fn(t)
            assert e.value.name == "INVALID_ARGUMENT" and e.value.code == 1
        if isinstance(t, torch.Tensor) and t.layout == torch.strided:
            with pytest.raises(fco.FcoError, match=msg):  # the op through the dispatcher
                torch.ops.fco.allreduce(t, "", -1)
    # with autograd recording (the dispatcher path)
    for t, msg in [(torch.ones(4, dtype=torch.float64, requires_grad=True), "float64"),
                   (torch.ones(4, 6, requires_grad=True)[:, ::2], "not contiguous")]:
        with pytest.raises(fco.FcoError, match=msg):
            fco.allreduce(t)
    with pytest.raises(fco.FcoError, match="impl 'bogus'"):
        fco.allreduce(torch.ones(2), impl="bogus")
    # an out-of-range impl is checked by libfco, on every rank alike
    with pytest.raises(fco.FcoError, match="impl 7") as e:
        fco.allreduce(torch.ones(2), impl=7)
    assert e.value.name == "INVALID_ARGUMENT"
    # a bool is not an impl (True would run impl 1); the int -1 is "auto"
    with pytest.raises(fco.FcoError, match="impl True is not an int or a name") as e:
        fco.allreduce(torch.ones(2), impl=True)
    assert e.value.name == "INVALID_ARGUMENT"
    assert fco.allreduce(torch.ones(2), impl=-1).tolist() == [2.0, 2.0]
    # ints past int32 (ctypes wrapped them: 2^32 + 1 ran impl 1) and unhashable values (a
    # TypeError): INVALID_ARGUMENT naming the value as given
    for impl, msg in ((2 ** 32 + 1, "impl 4294967297 is not -1"),
                      (2 ** 31, "impl 2147483648 is not -1"), ([1], r"impl \[1\] is not"),
                      ({}, r"impl \{\} is not")):
        for fn in (fco.allreduce, fco.allreduce_):
            with pytest.raises(fco.FcoError, match=msg) as e:
                fn(torch.ones(2), impl=impl)
            assert e.value.name == "INVALID_ARGUMENT"
    # the same through the ops themselves (their schema's impl is 64-bit), real and fake
    # kernels alike: 2^32 + 1 ran impl 1, 2^32 - 1 ran auto
    from torch._subclasses.fake_tensor import FakeTensorMode
    for impl in (2 ** 32 + 1, 2 ** 32 - 1, -3):  # (-2 is gemv's "triton")
        for fake in (False, True):
            with FakeTensorMode() if fake else contextlib.nullcontext():
                for op in (torch.ops.fco.allreduce, torch.ops.fco.allreduce_):
                    with pytest.raises(fco.FcoError, match=f"impl {impl} is not -1") as e:
                        op(torch.ones(2), "", impl)
                    assert e.value.name == "INVALID_ARGUMENT"
                with pytest.raises(fco.FcoError, match=f"impl {impl} is not -1"):
                    torch.ops.fco.gemv_allreduce(torch.ones(1, 2), torch.ones(2, 2), None, "",
                                                 impl)
    # numpy ints and 0-d integer tensors are ints, as for every other host int argument
    import numpy as np
    for impl in (np.int64(1), np.int32(0), torch.tensor(-1)):
        assert fco.allreduce(torch.ones(2), impl=impl).tolist() == [2.0, 2.0]
    # still works
    return fco.allreduce(torch.ones(3)).tolist()


def test_local_checks(pool2):
    assert pool2.run(_w_local_checks) == [[2.0] * 3] * 2


def _w_mismatch(kind):
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    r = dist.get_rank()
    if kind == "count":
        x = torch.ones(10 + r)
        msg = "count"
    else:
        x = torch.ones(10, dtype=torch.float32 if r == 0 else torch.bfloat16)
        msg = "dtype"
    with pytest.raises(fco.FcoError, match=msg) as e:
        fco.allreduce(x)
    assert e.value.name == "INVALID_ARGUMENT"
    text = str(e.value)
    # the communicator survives a rejected call
    return text, fco.allreduce(torch.ones(4)).tolist()


@pytest.mark.parametrize("kind", ["count", "dtype"])
def test_mismatch_across_ranks(pool2, kind):
    res = pool2.run(_w_mismatch, kind)
    for text, after in res:
        assert "rank" in text, text  # libfco names the ranks that disagree
        assert after == [2.0] * 4


def _w_same_shape_different_layout():
    import torch
    import torch.distributed as dist

    import fco

    # same element count, different shapes: fco reduces flat buffers, as dist.all_reduce
    r = dist.get_rank()
    x = torch.ones(2, 6) if r == 0 else torch.ones(3, 4)
    return tuple(fco.allreduce(x).shape)


def test_same_count_other_shape_reduces_flat(pool2):
    assert pool2.run(_w_same_shape_different_layout) == [(2, 6), (3, 4)]


def _w_destroyed():
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    g = dist.new_group(list(range(dist.get_world_size())))
    c = fco.init(g)
    assert fco.allreduce(torch.ones(2), group=g).tolist() == [2.0, 2.0]
    fco.shutdown(g)
    with pytest.raises(fco.FcoError, match="destroyed"):
        c.reserve(1024)
    # a fresh communicator for the group on next use
    assert fco.allreduce(torch.ones(2), group=g).tolist() == [2.0, 2.0]
    assert fco.init(g) is not c
    return True


def test_use_after_shutdown(pool2):
    pool2.run(_w_destroyed)


def test_init_without_process_group():
    import subprocess
    import sys

    import fco

    code = ("import fco, torch\n"
            "try:\n"
            "    fco.init()\n"
            "except fco.FcoError as e:\n"
            "    print(e.name, '|', e)\n"
            "try:\n"
            "    fco.allreduce(torch.ones(2))\n"
            "except fco.FcoError as e:\n"
            "    print(e.name, '|', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=_env_with_pythonpath(fco))
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2, out.stdout + out.stderr
    for line in lines:
        assert line.startswith("INVALID_USAGE | ") and "init_process_group" in line, line


def _env_with_pythonpath(fco):
    import os

    env = dict(os.environ)
    pkg = os.path.dirname(os.path.dirname(fco.__file__))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _w_timeout():
    import time

    import pytest
    import torch
    import torch.distributed as dist

    import fco

    g = dist.new_group([0, 1])
    fco.init(g, timeout_ms=1500)  # its own communicator, with a short bound
    if dist.get_rank() == 0:  # rank 1 never calls: rank 0 must get TIMEOUT, not hang
        t0 = time.monotonic()
        with pytest.raises(fco.FcoError) as e:
            fco.allreduce(torch.ones(4), group=g)
        elapsed = time.monotonic() - t0
        assert e.value.name == "TIMEOUT", e.value
        assert elapsed < 20, elapsed
    dist.barrier()
    fco.shutdown(g)
    return fco.allreduce(torch.ones(2)).tolist()  # the default group's communicator is fine


def test_peer_that_never_calls_times_out(pool2):
    assert pool2.run(_w_timeout) == [[2.0, 2.0]] * 2
