"""test_triton.py — fco.triton without a GPU: the device-state layout against src/cuda/dev.h
(compiled with gcc) and its ctypes mirror, the host helpers' argument checks, the GEMV's and the
GEMM + All-to-All's input checks, the GEMM + All-to-All's workspace layout against
src/ops/gemm_alltoall.h and libfco, the GPU code compiled for sm_90 (through Triton's ptxas, no
GPU needed) with the memory-model instructions it must contain (and, for the GEMM, wgmma,
cp.async pipelining and vector stores), impl="triton" of fco.gemm_alltoall on the cpu transport
(refused: CUDA only), and the helpers, the GEMV + AllReduce and the GEMM + All-to-All executed
by Triton's CPU interpreter on a hand-made world (_triton_interp.py, one subprocess per case).
GPU tests: test_triton_gpu.py.   Run: pytest tests/python/test_triton.py
"""
import ctypes
import os
import shutil
import subprocess
import sys
import warnings

import pytest

import fco
from fco.triton import host, layout as L

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))


def _has_triton():
    try:
        import triton  # noqa: F401
        return True
    except ImportError:
        return False


needs_triton = pytest.mark.skipif(not _has_triton(), reason="triton is not installed")


def _interpreting():
    """Whether Triton interprets, as Triton reads TRITON_INTERPRET (fco.triton.language)."""
    from fco.triton import language as fl
    return fl.INTERPRET


# ---- layout ---------------------------------------------------------------------------------
def test_layout_constants_match_ctypes_mirror():
    for name, off in L.offsets().items():
        assert getattr(L.DevRank, name).offset == off, name
    assert ctypes.sizeof(L.DevRank) == L.DEV_RANK_BYTES
    assert L.HOST_BYTES == L.DevRank.epoch.offset
    errs = {"code": L.ERR_OFF_CODE, "peer": L.ERR_OFF_PEER, "op": L.ERR_OFF_OP,
            "slot": L.ERR_OFF_SLOT, "want": L.ERR_OFF_WANT, "seen": L.ERR_OFF_SEEN}
    for name, off in errs.items():
        assert getattr(L.AsyncErr, name).offset == off, name
    assert ctypes.sizeof(L.AsyncErr) == L.ASYNC_ERR_BYTES


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_layout_matches_dev_h(tmp_path):
    """The C compiler's offsets of src/cuda/dev.h (and its constants) are layout.py's."""
    fields = list(L.offsets()) + ["lookup_q"]
    src = tmp_path / "off.c"
    src.write_text(
        '#include <stdio.h>\n#include <stddef.h>\n#include "cuda/dev.h"\nint main(void){\n'
        + "".join(f'printf("{f} %zu\\n", offsetof(fco_dev_rank_t, {f}));\n' for f in fields)
        + "".join(f'printf("err_{f} %zu\\n", offsetof(fco_async_err_t, {f}));\n'
                  for f in ("code", "peer", "op", "slot", "want", "seen"))
        + 'printf("size %zu\\nerrsize %zu\\nhost %zu\\n", sizeof(fco_dev_rank_t), '
          'sizeof(fco_async_err_t), (size_t)FCO_DEV_RANK_HOST_BYTES);\n'
        + 'printf("max %d\\nslots %d\\ntimeout %d\\n", FCO_MAX_GPU_RANKS, FCO_SIG_SLOTS, '
          'FCO_DEFAULT_TIMEOUT_MS);\n'
        + 'printf("timeout_code %d\\ninternal_code %d\\nop_gemv %d\\nop_kinds %d\\n", '
          'FCO_ERR_TIMEOUT, FCO_ERR_INTERNAL, FCO_OP_GEMV_ALLREDUCE, FCO_OP_EXTERNAL);\n'
        + 'printf("epoch_limit %llu\\nslot_epoch %d\\nusage_code %d\\n", '
          '(unsigned long long)FCO_EPOCH_LIMIT, FCO_ERR_SLOT_EPOCH, FCO_ERR_INVALID_USAGE);\n'
        + 'printf("max_sym %d\\n", FCO_MAX_SYMMETRIC);\n'
        + 'printf("half %zu\\n", fco_ws_half_bytes(1000003));\nreturn 0;}\n')
    exe = tmp_path / "off"
    subprocess.run(["gcc", "-std=c11", "-I", os.path.join(ROOT, "include"), "-I",
                    os.path.join(ROOT, "src"), str(src), "-o", str(exe)], check=True)
    got = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                       check=True).stdout.splitlines())
    got = {k: int(v) for k, v in got.items()}
    for name, off in L.offsets().items():
        assert got[name] == off, name
    for name in ("code", "peer", "op", "slot", "want", "seen"):
        assert got["err_" + name] == getattr(L, "ERR_OFF_" + name.upper()), name
    assert got["size"] == L.DEV_RANK_BYTES and got["errsize"] == L.ASYNC_ERR_BYTES
    assert got["host"] == L.HOST_BYTES
    assert (got["max"], got["slots"], got["timeout"]) == (L.MAX_GPU_RANKS, L.SIG_SLOTS,
                                                          L.DEFAULT_TIMEOUT_MS)
    assert (got["timeout_code"], got["internal_code"]) == (L.ERR_TIMEOUT, L.ERR_INTERNAL)
    assert got["op_gemv"] == L.OP_GEMV_ALLREDUCE
    assert got["op_kinds"] == L.OP_EXTERNAL, "OP_EXTERNAL must match the C FCO_OP_EXTERNAL"
    assert got["half"] == L.ws_half_bytes(1000003)
    assert (got["epoch_limit"], got["slot_epoch"], got["usage_code"]) == (
        L.EPOCH_LIMIT, L.ERR_SLOT_EPOCH, L.ERR_INVALID_USAGE)
    assert got["max_sym"] == L.MAX_SYMMETRIC


def test_workspace_rule_and_signal_values():
    assert L.ws_half_bytes(4 << 20) == 2 << 20
    assert L.ws_half_bytes(1000) == 256  # 500 rounded down to 256
    assert L.half_offset(4 << 20, 1) == 2 << 20 and L.half_offset(4 << 20, 2) == 0
    assert L.sig_value(1, 0) == (1 << 32) | 1
    assert L.sig_value(7, 9) == (7 << 32) | 10
    assert L.sig_value(2, 0) > L.sig_value(1, 1022)  # values only grow across calls


# ---- host helpers -----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, 0, -4, "comm", 1.5, True])
def test_handle_of_rejects(bad):
    with pytest.raises(fco.FcoError) as e:
        host.handle_of(bad)
    assert e.value.name == "INVALID_ARGUMENT" and "comm is" in e.value.message


def test_handle_of_destroyed_communicator():
    c = fco.Communicator(None, "g", None, 0, 1, "cpu")
    with pytest.raises(fco.FcoError) as e:
        host.handle_of(c)
    assert e.value.name == "INVALID_USAGE"
    assert host.handle_of(fco.Communicator(1234, "g", None, 0, 1, "cpu")) == 1234
    assert host.handle_of(ctypes.c_void_p(99)) == 99


def test_check_layout():
    host.check_layout(L.DEV_RANK_BYTES, L.LAYOUT_VERSION)
    for b, v in ((L.DEV_RANK_BYTES, L.LAYOUT_VERSION + 1), (L.DEV_RANK_BYTES + 8, L.LAYOUT_VERSION)):
        with pytest.raises(fco.FcoError) as e:
            host.check_layout(b, v)
        assert e.value.name == "INTERNAL" and "layout.py" in e.value.message


def test_blocks_per_rank():
    assert host.blocks_per_rank(512, 1, 132, 3) == 256  # 396 fit; balanced: 2 tiles each
    assert host.blocks_per_rank(10, 1, 132, 3) == 10  # at most one per tile
    assert host.blocks_per_rank(5000, 1, 132, 32) <= L.SIG_SLOTS - 1
    assert host.blocks_per_rank(1000, 4, 132, 1) == 33  # 4 virtual ranks: 33 each, 31 tiles
    with pytest.raises(fco.FcoError) as e:
        host.blocks_per_rank(8, 8, 4, 1)  # 4 programs cannot give 8 ranks one each
    assert e.value.name == "UNSUPPORTED"
    for bad in ((0, 1, 1, 1), (4, 0, 1, 1), (4, 1, 1, 1.5), (4, 1, 1, True)):
        with pytest.raises(fco.FcoError) as e:
            host.blocks_per_rank(*bad)
        assert e.value.name == "INVALID_ARGUMENT"
    # never more programs than the SIG_SLOTS - 1 signal slots of a rank, whatever max_blocks
    # says (it returned 2500 here)
    assert host.blocks_per_rank(5000, 1, 132, 32, max_blocks=5000) <= L.SIG_SLOTS - 1
    assert host.blocks_per_rank(10 ** 6, 1, 132, 32, max_blocks=10 ** 6) == L.SIG_SLOTS - 1


def test_programs_per_sm_checks():
    """num_warps 0 divided by zero, negative sizes gave 0 silently, floats and strs were taken:
    every argument is an int in its range, else INVALID_ARGUMENT naming it."""
    for args, kw, name in (((32, 0, 0), {}, "num_warps"), ((32, 0, -4), {}, "num_warps"),
                           ((32, 0, 64), {}, "num_warps"), ((-1, 0, 4), {}, "n_regs"),
                           ((32, -1024, 4), {}, "shared_bytes"), ((32.5, 0, 4), {}, "n_regs"),
                           (("32", 0, 4), {}, "n_regs"), ((32, 0, 4), {"regs_per_sm": 0},
                                                          "regs_per_sm"),
                           ((32, 0, 4), {"smem_per_sm": -1}, "smem_per_sm"),
                           ((32, 0, 4), {"threads_per_sm": 0}, "threads_per_sm"),
                           ((32, 0, 4), {"max_per_sm": 0}, "max_per_sm")):
        with pytest.raises(fco.FcoError) as e:
            host.programs_per_sm(*args, **kw)
        assert e.value.name == "INVALID_ARGUMENT" and name in e.value.message, (args, kw)
    assert host.programs_per_sm(0, 0, 32) == 2  # 1024 threads: 2 by threads


def test_programs_per_sm():
    assert host.programs_per_sm(32, 0, 4) == 16        # threads: 2048 / 128
    assert host.programs_per_sm(128, 0, 4) == 4        # registers: 65536 / (128·128)
    assert host.programs_per_sm(40, 100000, 4) == 2    # shared memory
    assert host.programs_per_sm(255, 300000, 8) == 0   # does not fit
    assert host.programs_per_sm(33, 0, 4) == 12        # 33 regs: 1280 per warp, not 1056
    assert host.programs_per_sm(16, 1024, 1) == 32     # 64 by threads, 228 by smem: capped


def test_ensure_workspace_checks(monkeypatch):
    with pytest.raises(fco.FcoError) as e:
        host.ensure_workspace([1234], -1)
    assert e.value.name == "INVALID_ARGUMENT"
    # nbytes only an int in 0..2^63-1, checked before the comms are touched
    # (test_ensure_workspace_on_cpu_worlds: what a bad one did to a real one)
    monkeypatch.setattr(host, "handle_of", lambda c: pytest.fail("comms touched"))
    for bad in (2 ** 63, 2 ** 64 + 4096, "65536", 8192.7, 4096.0, None):
        with pytest.raises(fco.FcoError) as e:
            host.ensure_workspace([1234], bad)
        assert e.value.name == "INVALID_ARGUMENT" and "0..2^63-1" in e.value.message, bad
    with pytest.raises(fco.FcoError) as e:
        host.ensure_workspace([], 10)
    assert e.value.name == "INVALID_ARGUMENT"


def _cpu_world(n):
    from fco import _lib

    comms = (_lib.comm_t * n)()
    cfg = _lib.config(transport=_lib.TRANSPORT_CPU)
    fn = _lib.bind("fco_comm_init_all", [ctypes.POINTER(_lib.comm_t), ctypes.c_int,
                                         ctypes.c_void_p, ctypes.POINTER(_lib.Config)])
    _lib.check(fn(comms, n, None, ctypes.byref(cfg)), None, "fco_comm_init_all")
    return [comms[i] for i in range(n)]


def test_ensure_workspace_on_cpu_worlds():
    """nbytes 0 and the size already held are no-ops (even while capturing); a growth while
    capturing is refused, nothing grown; comms of separate worlds each grow."""
    try:
        fco.lib_path()
    except fco.FcoError:
        pytest.skip("libfco.so is not built")
    from fco import _lib

    comms = _cpu_world(2)
    other = _cpu_world(1)  # another world: the first comm's reserve does not grow it
    try:
        host.ensure_workspace(comms, 0)
        have = host.workspace_bytes(comms[0])
        host.ensure_workspace(comms, have, capturing=True)
        with pytest.raises(fco.FcoError) as e:
            host.ensure_workspace(comms, have + 4096, capturing=True)
        assert e.value.name == "INVALID_USAGE" and "captured" in e.value.message
        assert host.workspace_bytes(comms[0]) == have
        want = host.workspace_bytes(other[0]) + have + (1 << 16)
        host.ensure_workspace([comms[0], other[0]], want)
        assert host.workspace_bytes(comms[0]) >= want and host.workspace_bytes(other[0]) >= want
        # only ints in 0..2^63-1 (as Communicator.reserve): 2^64 + 4096 wrapped to 4096 in
        # c_size_t (nothing grown, no error), "65536" was parsed, 8192.7 truncated
        have = host.workspace_bytes(comms[0])
        for bad in (2 ** 64 + have + 4096, str(have + 65536), have + 8192.7):
            with pytest.raises(fco.FcoError) as e:
                host.ensure_workspace(comms, bad)
            assert e.value.name == "INVALID_ARGUMENT" and "nbytes" in e.value.message, bad
            assert host.workspace_bytes(comms[0]) == have, bad
        import numpy as np

        host.ensure_workspace(comms, np.int64(have + 4096))  # an integer type: taken
        assert host.workspace_bytes(comms[0]) >= have + 4096
    finally:
        for c in comms + other:
            _lib.lib().fco_comm_destroy(c)


def test_device_state_checks_what_the_accessor_returns(monkeypatch):
    """A NULL device state or another layout from fco_comm_device_state: FcoError(INTERNAL)."""
    try:
        fco.lib_path()
    except fco.FcoError:
        pytest.skip("libfco.so is not built")
    from fco import _lib

    def accessor(nbytes, version):
        def f(h, ptr, size, ver):  # leaves *ptr NULL
            size._obj.value, ver._obj.value = nbytes, version
            return 0
        return lambda: f

    comms = _cpu_world(1)
    try:
        monkeypatch.setattr(host, "_bind_accessor", accessor(L.DEV_RANK_BYTES, L.LAYOUT_VERSION))
        with pytest.raises(fco.FcoError) as e:
            host.device_state(comms[0])
        assert e.value.name == "INTERNAL" and "NULL device state" in e.value.message
        monkeypatch.setattr(host, "_bind_accessor", accessor(L.DEV_RANK_BYTES + 8,
                                                             L.LAYOUT_VERSION))
        with pytest.raises(fco.FcoError) as e:
            host.device_state(comms[0])
        assert e.value.name == "INTERNAL" and "layout.py" in e.value.message
    finally:
        _lib.lib().fco_comm_destroy(comms[0])


def test_device_state_on_cpu_transport_is_unsupported():
    """Either this libfco lacks fco_comm_device_state (the message says what is needed), or it
    has it and the cpu transport has no device state: UNSUPPORTED both ways, never a crash."""
    try:
        fco.lib_path()
    except fco.FcoError:
        pytest.skip("libfco.so is not built")
    from fco import _lib

    comms = _cpu_world(2)
    try:
        with pytest.raises(fco.FcoError) as e:
            host.device_state(comms[0])
        assert e.value.name == "UNSUPPORTED"
        assert "fco_comm_device_state" in str(e.value)
        # workspace helpers work on any transport
        host.ensure_workspace(comms, 4096)
        assert all(host.workspace_bytes(c) >= 4096 for c in comms)
    finally:
        for c in comms:
            _lib.lib().fco_comm_destroy(c)


@needs_triton
def test_ops_grow_the_workspace_to_both_halves(monkeypatch):
    """The GEMV grows each comm's workspace to 2·P·S, the GEMM + All-to-All to 2·half_need
    (both epoch halves), before the launch (here refused by the prof check that follows)."""
    try:
        fco.lib_path()
    except fco.FcoError:
        pytest.skip("libfco.so is not built")
    import torch

    from fco import _lib
    from fco.triton import gemm_alltoall as GA, gemv_allreduce as G

    comms = _cpu_world(2)
    monkeypatch.setattr(host, "device_state",
                        lambda c: host.DeviceState(16, comms.index(c), 2, c))
    prof = torch.zeros(1, dtype=torch.int64)
    try:
        # sizes of a few MiB (the cpu world's workspace lives in /dev/shm), each above what the
        # comms hold before the call
        x, w = torch.zeros(8, 1), torch.zeros(16384, 1)
        need = G.workspace_bytes(2, 8, 16384, G.plan(8, 16384, 4)[1])
        assert all(host.workspace_bytes(c) < need for c in comms), need
        with pytest.raises(fco.FcoError, match="prof has 1 elements"):
            G.gemv_allreduce(comms, [x, x], [w, w], prof=prof)
        assert all(host.workspace_bytes(c) >= need for c in comms), need
        a, w, c = torch.zeros(10, 8), torch.zeros(3, 8, 256), torch.zeros(3, 2, dtype=torch.int32)
        need = GA.workspace_bytes(2, 2048, 256, 4)
        assert all(host.workspace_bytes(c) < need for c in comms), need
        with pytest.raises(fco.FcoError, match="prof has 1 elements"):
            GA.gemm_alltoall(comms, [a, a], [w, w], [c, c], 2048, prof=prof, streamk=0)
        assert all(host.workspace_bytes(c) >= need for c in comms), need
    finally:
        for c in comms:
            _lib.lib().fco_comm_destroy(c)


# ---- the GEMV's input checks --------------------------------------------------------------------
@needs_triton
def test_gemv_input_checks():
    import torch

    from fco.triton import gemv_allreduce as G

    st = [host.DeviceState(16, 0, 2, None), host.DeviceState(32, 1, 2, None)]
    x, w = torch.zeros(2, 8), torch.zeros(4, 8)

    def err(*a, **k):
        with pytest.raises(fco.FcoError) as e:
            G.gemv_allreduce(*a, **k)
        return e.value

    assert "one per rank" in err(st, [x], [w, w]).message
    assert "dtype" in err(st, [x, x.half()], [w, w]).message
    assert "dtype" in err(st, [x.long(), x.long()], [w.long(), w.long()]).message
    assert "shape" in err(st, [x, x], [w, torch.zeros(4, 9)]).message
    assert "M or N differ" in err(st, [x, torch.zeros(3, 8)], [w, w]).message
    assert "contiguous" in err(st, [x, x], [w, torch.zeros(8, 4).t()]).message
    assert "bias" in err(st, [x, x], [w, w], [torch.zeros(4), torch.zeros(5)]).message
    assert "some biases are None" in err(st, [x, x], [w, w], [torch.zeros(4), None]).message
    e = err(st, [torch.zeros(65, 8)] * 2, [w, w])
    assert e.name == "UNSUPPORTED" and "1..64" in e.message
    e = err(st, [torch.zeros(0, 8)] * 2, [w, w])  # M = 0: an argument error, as in C
    assert e.name == "INVALID_ARGUMENT" and "M is 0" in e.message
    e = err(st, [x, x], [w, w], blocks_per_rank=1024)
    assert e.name == "INVALID_ARGUMENT" and "blocks_per_rank 1024" in e.message
    assert "distinct ranks" in err([st[0], st[0]], [x, x], [w, w]).message
    assert "communicators given" in err([], [], []).message
    # ranks of worlds of different sizes, or more ranks than the world has
    other = [st[0], host.DeviceState(32, 1, 3, None)]
    assert "distinct ranks of one world" in err(other, [x, x], [w, w]).message
    three = st + [host.DeviceState(48, 2, 2, None)]
    assert "distinct ranks of one world" in err(three, [x] * 3, [w] * 3).message
    e = err(st, [torch.zeros(2, 0)] * 2, [torch.zeros(4, 0)] * 2)
    assert e.name == "INVALID_ARGUMENT" and "K = 0" in e.message
    # N = 0: refused as the C op refuses it ("num_tiles is 0" came from the grid's helper)
    e = err(st, [x, x], [torch.zeros(0, 8)] * 2)
    assert e.name == "INVALID_ARGUMENT" and "N is 0" in e.message, e.message
    # y's offsets rm·N + n are int32 in the kernel: M·N up to 2^31 (no memory: meta tensors)
    xm, wm = torch.empty(64, 8, device="meta"), torch.empty(2 ** 25, 8, device="meta")
    assert G._check_inputs(2, [xm, xm], [wm, wm], None) == (64, 2 ** 25)
    wm = torch.empty(2 ** 25 + 1, 8, device="meta")
    e = err(st, [xm, xm], [wm, wm])
    assert e.name == "UNSUPPORTED" and "2^31" in e.message and "M x N" in e.message, e.message
    # arguments that are not ints, a prof that is not int64 (the kernel stores int64)
    for kw, want in ((dict(blocks_per_rank="x"), "blocks_per_rank"),
                     (dict(blocks_per_rank=2.5), "blocks_per_rank"),
                     (dict(wait_ns="x"), "wait_ns"), (dict(wait_ns=1.5), "wait_ns"),
                     (dict(num_warps=3), "num_warps"), (dict(num_warps="4"), "num_warps"),
                     (dict(prof=[0] * 64), "prof"),
                     (dict(prof=torch.zeros(64, dtype=torch.int32)), "prof"),
                     (dict(prof=torch.zeros(64, 2, dtype=torch.int64).t()), "prof")):
        e = err(st, [x, x], [w, w], **kw)
        assert e.name == "INVALID_ARGUMENT" and want in e.message, (kw, e.message)
    e = err(st, [x, x], [w, w], blocks_per_rank=0)
    assert e.name == "INVALID_ARGUMENT" and "blocks_per_rank 0" in e.message
    # checked before the launch: 2 ranks x 1 program (T = 1 tile) x 8 fields
    e = err(st, [x, x], [w, w], prof=torch.zeros(15, dtype=torch.int64))
    assert e.name == "INVALID_ARGUMENT" and "prof has 15 elements; expected >= 16" in e.message
    # M = 64 = MAX_M is the GEMV's (refused only above)
    x64 = torch.zeros(64, 8)
    assert G._check_inputs(2, [x64, x64], [w, w], None) == (64, 4)


@needs_triton
def test_gemv_plan_and_workspace():
    from fco.triton import gemv_allreduce as G

    bm, bn, bk, T = G.plan(1, 8192, 2, 132)
    assert (bm, bn, T) == (16, 32, 256)
    assert G.plan(64, 64 * 132, 4, 132)[1] == 64
    assert G.plan(32, 100, 2) == (32, 32, 128, 4)   # BLOCK_K halved from BLOCK_M 64 on
    assert G.plan(64, 100, 2) == (64, 32, 64, 4)
    assert G.plan(64, 100, 4)[2] == 32
    assert G.slot_bytes(3, 70, 32) == L.round_up(3 * 3 * 32 * 4, 256)
    assert G.workspace_bytes(4, 3, 70, 32) == 2 * 4 * G.slot_bytes(3, 70, 32)


# ---- compiled for sm_90 (no GPU needed) --------------------------------------------------------
@needs_triton
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_gemv_kernel_compiles_for_sm90(dtype):
    """The fused kernel goes through Triton and ptxas for sm_90 and contains the memory-model
    pieces of prims.cuh: release exchanges at system scope (signals, error op), acquire loads at
    system scope (waits), %globaltimer (the bound), bar.red (block-uniform wait decisions), .cg
    loads of peer-written data, and a system-scope CAS (first error wins)."""
    if _interpreting():
        pytest.skip("TRITON_INTERPRET is set")
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    from fco.triton import gemv_allreduce as G

    dt = {"fp32": tl.float32, "bf16": tl.bfloat16, "fp16": tl.float16}[dtype]
    ptr = "*" + dtype
    sig = {"devs": ("i64", "i64"), "xs": (ptr, ptr), "ws": (ptr, ptr), "biases": (ptr, ptr),
           "ys": (ptr, ptr), "Ks": ("i64", "i64"), "M": "i32", "N": "i32", "T": "i32", "B": "i32",
           "slot_bytes": "i32"}
    consts = {"L": 2, "DTYPE": dt, "HAS_BIAS": True, "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64,
              "PRECISION": "ieee" if dtype == "fp32" else "tf32", "PHASES": 3, "UPCAST": False,
              "WAIT_NS": 512, "PROFILE": False, "prof": None}
    if dtype == "bf16":  # the diagnostics' compile: per-program timestamps and %smid
        consts.update(PROFILE=True)
        del consts["prof"]
        sig["prof"] = "*i64"
    sig.update({k: "constexpr" for k in consts})
    src = triton.compiler.ASTSource(fn=G.gemv_allreduce_kernel, signature=sig, constexprs=consts)
    try:
        c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    except Exception as e:  # noqa: BLE001 — e.g. no ptxas in this triton install
        if "ptxas" in str(e).lower():
            pytest.skip(f"cannot run ptxas here: {e}")
        raise
    ptx = c.asm["ptx"]
    assert c.asm.get("cubin")
    for needle in ("atom.global.sys.release.exch.b64", "ld.acquire.sys.global.u64",
                   "%globaltimer", "bar.red.and.pred", "bar.red.or.pred", "ld.global.cg",
                   "atom.global.relaxed.sys.cas.b32", "ld.relaxed.sys.global.s32",
                   # the waits' poll: first warp only, relaxed, with a nanosleep backoff
                   "ld.relaxed.sys.global.u64", "%tid.x", "nanosleep.u32"):
        assert needle in ptx, needle
    assert ("%smid" in ptx) == (dtype == "bf16")


# ---- GEMM + All-to-All: layout, checks, plan, sm_90 code -------------------------------------------
@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
@needs_triton
def test_gemm_layout_matches_gemm_alltoall_h(tmp_path):
    """The Python mirror of src/ops/gemm_alltoall.h's workspace layout is the C one (the Triton
    kernel must land tiles where a C rank would, and need what fco_gemm_alltoall_workspace says)."""
    from fco.triton import gemm_alltoall as GA

    cases = [(P, rows, n, es) for P in range(1, 9) for rows, n, es in
             ((0, 1, 2), (8192, 4096, 2), (37, 33, 4), (1, 7, 2))]
    src = tmp_path / "ga.c"
    src.write_text(
        '#include <stdio.h>\n#include "ops/gemm_alltoall.h"\n#include "cuda/dev.h"\n'
        'int main(void){\n'
        + "".join(f'printf("%zu %zu %zu %zu %zu\\n", fco_ga_hdr_bytes({P}), '
                  f"fco_ga_off_staging({P}), fco_ga_peer_bytes({P}, {r}, {n}, {es}), "
                  f"fco_ga_plan_bytes({P}), fco_ga_half_need(1, 0, {P}, 5, {r}, {n}, {es}));\n"
                  for P, r, n, es in cases)
        + 'printf("%d %d\\n", FCO_SIG_SLOTS, FCO_GEMM_ALLTOALL_MAX_EXPERTS);\nreturn 0;}\n')
    exe = tmp_path / "ga"
    subprocess.run(["gcc", "-std=c11", "-I", os.path.join(ROOT, "include"), "-I",
                    os.path.join(ROOT, "src"), str(src), "-o", str(exe)], check=True)
    lines = subprocess.run([str(exe)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    for (P, r, n, es), line in zip(cases, lines):
        assert [int(x) for x in line.split()] == [
            GA.hdr_bytes(P), GA.off_staging(P), GA.peer_bytes(P, r, n, es), GA.plan_bytes(P),
            GA.half_need(P, r, n, es)], (P, r, n, es)
    slots, max_e = (int(x) for x in lines[-1].split())
    assert (slots - 1, slots - 2, max_e) == (int(GA.HDR_SLOT), GA.MAX_PARTS, GA.MAX_EXPERTS)
    # the segment table (28 bytes per segment, 256·P segments) fits impl 1's plan area
    assert all(28 * 256 * P <= GA.plan_bytes(P) for P in range(1, 9))


@needs_triton
def test_gemm_workspace_matches_libfco():
    """workspace_bytes = fco_gemm_alltoall_workspace(impl 1) (cpu transport: every impl)."""
    try:
        fco.lib_path()
    except fco.FcoError:
        pytest.skip("libfco.so is not built")
    from fco import _lib
    from fco.triton import gemm_alltoall as GA

    f = _lib.bind("fco_gemm_alltoall_workspace", [
        _lib.comm_t, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
        ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)])
    for P in (1, 3):
        comms = _cpu_world(P)
        try:
            for a_rows, out_rows, n, dt, es in ((64, 80, 33, _lib.F32, 4),
                                                (8192, 8192, 4096, _lib.BF16, 2)):
                out = ctypes.c_size_t()
                _lib.check(f(comms[0], a_rows, out_rows, 16, n, dt, 1, ctypes.byref(out)),
                           comms[0], "fco_gemm_alltoall_workspace")
                assert out.value == GA.workspace_bytes(P, out_rows, n, es), (P, a_rows, n)
        finally:
            for c in comms:
                _lib.lib().fco_comm_destroy(c)


@needs_triton
def test_gemm_input_checks():
    import torch

    from fco.triton import gemm_alltoall as GA

    st = [host.DeviceState(16, 0, 2, None), host.DeviceState(32, 1, 2, None)]
    a, w = torch.zeros(10, 8), torch.zeros(3, 8, 6)
    c = torch.zeros(3, 2, dtype=torch.int32)

    def err(*args, **kw):
        with pytest.raises(fco.FcoError) as e:
            GA.gemm_alltoall(*args, **kw)
        return e.value

    assert "one per rank" in err(st, [a], [w, w], [c, c]).message
    assert "dtype" in err(st, [a, a.half()], [w, w], [c, c]).message
    assert "dtype" in err(st, [a.long(), a.long()], [w.long(), w.long()], [c, c]).message
    assert "a_rows and K" in err(st, [a, torch.zeros(11, 8)], [w, w], [c, c]).message
    assert "[E, K, N]" in err(st, [a, a], [w, torch.zeros(3, 9, 6)], [c, c]).message
    assert "[E, N, K]" in err(st, [a, a], [w, w], [c, c], w_layout="nk").message
    assert "N is the same" in err(st, [a, a], [w, torch.zeros(1, 8, 7)],
                                  [c, torch.zeros(1, 2, dtype=torch.int32)]).message
    assert "experts" in err(st, [a, a], [w, torch.zeros(0, 8, 6)], [c, c]).message
    assert "torch.int32 [E, P]" in err(st, [a, a], [w, w], [c, c.long()]).message
    assert "torch.int32 [E, P]" in err(st, [a, a], [w, w], [c, torch.zeros(3, 3, dtype=torch.int32)]
                                       ).message
    assert "contiguous" in err(st, [a, a], [w, torch.zeros(3, 6, 8).transpose(1, 2)],
                               [c, c]).message
    assert "out[1] has shape" in err(st, [a, a], [w, w], [c, c], 12,
                                     outs=[torch.zeros(12, 6), torch.zeros(10, 6)]).message
    assert "w_layout" in err(st, [a, a], [w, w], [c, c], w_layout="mn").message
    assert "distinct ranks" in err([st[0], st[0]], [a, a], [w, w], [c, c]).message
    assert "blocks_per_rank" in err(st, [a, a], [w, w], [c, c], blocks_per_rank=1023).message
    # an out written while a or w is read: refused as fco_gemm_alltoall refuses it
    buf = torch.zeros(200)
    assert "out[0] overlaps a[0]" in err(st, [buf[:80].view(10, 8), a], [w, w], [c, c], 10,
                                         outs=[buf[40:100].view(10, 6), torch.zeros(10, 6)]
                                         ).message
    wbig = torch.zeros(200)
    w1 = wbig[:144].view(3, 8, 6)
    assert "out[1] overlaps w[1]" in err(st, [a, a], [w, w1], [c, c], 5,
                                         outs=[torch.zeros(5, 6), wbig[100:130].view(5, 6)]
                                         ).message
    # across ranks (every rank's programs write every out while every a and w is read): outs
    # that alias each other, an out over another rank's a or w — they ran, silently wrong
    o = torch.zeros(10, 6)
    e = err(st, [a, a], [w, w], [c, c], 10, outs=[o, o])
    assert e.name == "INVALID_ARGUMENT" and "out[0] overlaps out[1]" in e.message, e.message
    assert "out[0] overlaps out[1]" in err(st, [a, a], [w, w], [c, c], 10,
                                           outs=[buf[:60].view(10, 6),
                                                 buf[59:119].view(10, 6)]).message
    assert "out[0] overlaps a[1]" in err(st, [a, buf[:80].view(10, 8)], [w, w], [c, c], 10,
                                         outs=[buf[70:130].view(10, 6), o]).message
    assert "out[1] overlaps w[0]" in err(st, [a, a], [w1, w], [c, c], 10,
                                         outs=[o, wbig[140:200].view(10, 6)]).message
    three = [host.DeviceState(16 * (i + 1), i, 3, None) for i in range(3)]
    c3 = torch.zeros(3, 3, dtype=torch.int32)
    assert "out[2] overlaps a[0]" in err(three, [buf[:80].view(10, 8), a, a], [w] * 3, [c3] * 3,
                                         10, outs=[o, torch.zeros(10, 6),
                                                   buf[79:139].view(10, 6)]).message
    # what stays allowed: one a / w for every rank (read only), outs side by side in a buffer
    assert GA._check_inputs(2, 2, [a, a], [w, w], [c, c], 0, 10,
                            [buf[:60].view(10, 6), buf[60:120].view(10, 6)]) == (10, 8, 6)
    assert "0 communicators" in err([], [], [], []).message
    # out_rows defaults to a_rows (outs of [a_rows, N] fit; checked before the prof check)
    assert "prof has 1 elements" in err(st, [a, a], [w, w], [c, c],
                                        outs=[torch.zeros(10, 6), torch.zeros(10, 6)],
                                        prof=torch.zeros(1, dtype=torch.int64)).message
    other = [st[0], host.DeviceState(32, 1, 3, None)]
    assert "distinct ranks of one world" in err(other, [a, a], [w, w], [c, c]).message
    three = st + [host.DeviceState(48, 2, 2, None)]
    assert "distinct ranks of one world" in err(three, [a] * 3, [w] * 3, [c] * 3).message
    assert "w_layout 2" in err(st, [a, a], [w, w], [c, c], w_layout=2).message
    assert "out[1] has dtype" in err(st, [a, a], [w, w], [c, c], 10,
                                     outs=[torch.zeros(10, 6), torch.zeros(10, 6).half()]).message
    meta = torch.zeros(3, 8, 6, device="meta")
    assert "w[1] is on meta" in err(st, [a, a], [w, meta], [c, c]).message
    assert "out[0] is on meta" in err(st, [a, a], [w, w], [c, c], 10,
                                      outs=[torch.zeros(10, 6, device="meta")] * 2).message
    # 1..MAX_EXPERTS experts per rank
    big = [torch.zeros(GA.MAX_EXPERTS + k, 8, 6) for k in (0, 1)]
    cs = [torch.zeros(GA.MAX_EXPERTS + k, 2, dtype=torch.int32) for k in (0, 1)]
    assert GA._check_inputs(2, 2, [a, a], [big[0]] * 2, [cs[0]] * 2, 0, 10, None) == (10, 8, 6)
    assert "257 experts" in err(st, [a, a], [big[1]] * 2, [cs[1]] * 2).message
    # blocks_per_rank 1..MAX_PARTS (1022 taken: the prof check after it is what refuses)
    e = err(st, [a, a], [w, w], [c, c], blocks_per_rank=GA.MAX_PARTS,
            prof=torch.zeros(8, dtype=torch.int64))
    assert f"expected >= {8 * 2 * GA.MAX_PARTS}" in e.message, e.message
    e = err(st, [a, a], [w, w], [c, c], -1)
    assert e.name == "INVALID_ARGUMENT" and "out_rows -1" in e.message
    # fco_gemm_alltoall's host checks, as fco.gemm_alltoall(impl="triton") runs them
    chk = GA.check_host_args
    for args, kw, want in (((2, 10, 10, 0, 6), {}, "k 0"), ((2, 10, 10, 8, 2 ** 31), {}, "n "),
                           ((2, 10, 10, 8, 6), {"counts_host": -c - 1}, "negative"),
                           ((2, 10, 10, 8, 6), {"counts_host": c + 2}, "more than a_rows"),
                           ((2, 10, 10, 8, 6), {"recv_rows": torch.tensor([6, 5])},
                            "more than out_rows")):
        with pytest.raises(fco.FcoError) as ei:
            chk(*args, **kw)
        assert ei.value.name == "INVALID_ARGUMENT" and want in ei.value.message, ei.value.message
    chk(2, 10, 10, 8, 6, counts_host=c + 1, recv_rows=torch.tensor([5, 5]))
    chk(2, 6, 10, 8, 6, counts_host=c + 1)  # every row of a sent: Σ counts = a_rows
    chk(2, 0, 0, 8, 6)                      # no rows at all


class _FakeLaunch:
    """Stands in for a @triton.jit kernel: records kernel[grid](*args, **kw) (the host side of
    an operator runs whole, on CPU tensors, without a GPU or the interpreter)."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append((grid, args, kw))


@needs_triton
def test_gemm_argument_coercion(monkeypatch):
    """Arguments that are not what they must be raise FcoError(INVALID_ARGUMENT) naming them:
    out_rows 10.9 was truncated and "12" parsed (the torch op refuses both), blocks_per_rank
    "x", order ["split"], sym [1, 2], streamk dict(items="x") and prof [0] * 16 raised
    ValueError / TypeError / AttributeError, and an int32 prof was launched (the kernel
    stores int64 timestamps). Then the launch arguments themselves: wait_ns clamped."""
    import torch

    from fco.triton import gemm_alltoall as GA

    fake = _FakeLaunch()
    monkeypatch.setattr(GA, "gemm_alltoall_kernel", fake)
    st = [host.DeviceState(16, 0, 2, None), host.DeviceState(32, 1, 2, None)]
    a, w = torch.zeros(10, 8), torch.zeros(3, 8, 6)
    c = torch.zeros(3, 2, dtype=torch.int32)

    def err(*args, **kw):
        with pytest.raises(fco.FcoError) as e:
            GA.gemm_alltoall(st, [a, a], [w, w], [c, c], *args, streamk=0, **kw)
        assert e.value.name == "INVALID_ARGUMENT", e.value
        return e.value.message

    assert "out_rows 10.9 is not an int" in err(10.9)
    assert "out_rows '12' is not an int" in err("12")
    assert "blocks_per_rank 'x'" in err(10, blocks_per_rank="x")
    assert "blocks_per_rank 2.5" in err(10, blocks_per_rank=2.5)
    assert "order ['split']" in err(10, order=["split"])
    assert "sym entry 1" in err(10, sym=[1, 2])
    assert "sym entry (4096, 'x', 0)" in err(10, sym=[(4096, "x", 0), None])
    assert "sym entry (4096, 0)" in err(10, sym=[(4096, 0), None])
    assert "sym is 5" in err(10, sym=5)
    with pytest.raises(fco.FcoError) as e:
        GA.gemm_alltoall(st, [a, a], [w, w], [c, c], 10, streamk=dict(items="x"))
    assert e.value.name == "INVALID_ARGUMENT" and "streamk['items']" in e.value.message
    with pytest.raises(fco.FcoError) as e:
        GA.gemm_alltoall(st, [a, a], [w, w], [c, c], 10, streamk=dict(items=64.5))
    assert e.value.name == "INVALID_ARGUMENT" and "streamk['items']" in e.value.message
    assert "prof is list" in err(10, prof=[0] * 16)
    assert "prof is torch.int32" in err(10, prof=torch.zeros(64, dtype=torch.int32))
    assert "not contiguous" in err(10, prof=torch.zeros(64, 2, dtype=torch.int64).t())
    assert "wait_ns 'x'" in err(10, wait_ns="x")
    assert "tile (16, 16, 16, 3, 1)" in err(10, tile=(16, 16, 16, 3, 1))
    assert not fake.calls
    # what is taken: numpy ints, an int64 prof, wait_ns clamped to 0..2^20
    import numpy as np

    prof = torch.zeros(8 * 2 * 4, dtype=torch.int64)
    GA.gemm_alltoall(st, [a, a], [w, w], [c, c], np.int64(12), streamk=0, prof=prof,
                     blocks_per_rank=np.int32(4), wait_ns=2 ** 30, tile=(16, 16, 16, 1, 1))
    (grid, args, kw), = fake.calls
    assert grid == (8,) and args[10] == 12 and kw["WAIT_NS"] == 1 << 20 and kw["prof"] is prof
    assert GA.last_launch["wait_ns"] == 1 << 20 and GA.last_launch["blocks_per_rank"] == 4


@needs_triton
def test_gemv_wait_ns_clamped(monkeypatch):
    """The GEMV's wait_ns= as the knob: clamped to 0..2^20 (it was taken as given)."""
    import torch

    from fco.triton import gemv_allreduce as G

    fake = _FakeLaunch()
    monkeypatch.setattr(G, "gemv_allreduce_kernel", fake)
    st = [host.DeviceState(16, 0, 2, None), host.DeviceState(32, 1, 2, None)]
    x, w = torch.zeros(2, 8), torch.zeros(4, 8)
    for v, want in ((2 ** 30, 1 << 20), (-7, 0), (100, 100)):
        fake.calls.clear()
        G.gemv_allreduce(st, [x, x], [w, w], wait_ns=v)
        assert [kw["WAIT_NS"] for _, _, kw in fake.calls] == [want], v
        assert G.last_launch["wait_ns"] == want


@needs_triton
def test_gemm_index_range():
    """The tile loop's int32 in-tile offsets: rows × K of A, W's columns × K ("nk") or K rows ×
    N ("kn"), stored rows × N — each up to 2^31 elements (the largest index is one less), else
    UNSUPPORTED before anything runs (they wrapped into wrong addresses: K >= 2^24 + 1 with
    128-row tiles)."""
    import torch

    from fco.triton import gemm_alltoall as GA

    chk = GA.check_index_range
    chk(1000, 2 ** 24, 16, 128, 128, 64, False)       # 128 · 2^24 = 2^31: the last index fits
    chk(1000, 2 ** 24, 16, 128, 128, 64, True)
    chk(8, 2 ** 28, 16, 128, 128, 64, False)          # 8 rows: 8 · 2^28 = 2^31
    chk(1000, 64, 2 ** 24, 128, 256, 64, False)       # 128 rows x N, 64 K rows x N
    chk(1000, 16, 2 ** 27, 16, 256, 64, True)         # 16 rows x N = 2^31
    chk(1000, 2 ** 30, 16, 128, 128, 64, True, tma=True)  # TMA: no int32 offsets into A, W
    for args, what in (((1000, 2 ** 24 + 1, 16, 128, 128, 64, False), "BLOCK_M 128"),
                       ((9, 2 ** 28, 16, 128, 128, 64, False), "a_rows 9"),
                       ((8, 2 ** 23 + 16, 256, 16, 256, 64, True), "BLOCK_N 256"),
                       ((16, 64, 2 ** 25 + 1, 16, 16, 64, False), "BLOCK_K 64"),
                       ((1000, 64, 2 ** 24 + 1, 128, 128, 64, False), "x N"),
                       ((1000, 64, 2 ** 25 + 1, 64, 128, 64, True), "x N")):
        with pytest.raises(fco.FcoError) as e:
            chk(*args)
        assert e.value.name == "UNSUPPORTED" and what in e.value.message, (args, e.value)
        assert "2^31" in e.value.message
    with pytest.raises(fco.FcoError) as e:
        chk(1000, 64, 2 ** 24 + 1, 128, 128, 64, False, tma=True)  # the stores: still int32
    assert e.value.name == "UNSUPPORTED" and "x N" in e.value.message
    # through the operator (meta tensors: no memory; refused before any launch)
    st = [host.DeviceState(16, 0, 2, None), host.DeviceState(32, 1, 2, None)]
    K = 2 ** 24 + 16
    a = torch.empty(256, K, device="meta")
    w = torch.empty(1, 16, K, device="meta")
    c = torch.empty(1, 2, dtype=torch.int32, device="meta")
    with pytest.raises(fco.FcoError) as e:
        GA.gemm_alltoall(st, [a, a], [w, w], [c, c], 256, w_layout="nk",
                         tile=(128, 16, 16, 4, 3))
    assert e.value.name == "UNSUPPORTED" and "BLOCK_M 128" in e.value.message, e.value


@needs_triton
def test_occupancy_cache_keys_on_what_triton_specialises(monkeypatch):
    """The programs-per-SM cache holds one entry per compiled kernel: two launches that differ
    only in N % 16 (Triton specialises K and N on divisibility by 16, pointers on 16-byte
    alignment) get separate entries — ptxas gave the f32 64×64×32 stream-K kernel 168 and
    255 registers there, so reusing one's programs per SM for the other overfills the SMs and
    the persistent grid's waits never end. Sizes Triton does not specialise (a_rows, B, need)
    share the entry. The GEMV's cache likewise (it missed the pointers' alignment)."""
    import types

    import torch

    from fco.triton import gemm_alltoall as GA, gemv_allreduce as G

    props = types.SimpleNamespace(multi_processor_count=132, regs_per_multiprocessor=65536,
                                  shared_memory_per_multiprocessor=233472,
                                  max_threads_per_multi_processor=2048)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: props)
    compiled = []

    def compiled_kernel(n_regs):
        return types.SimpleNamespace(n_regs=n_regs, n_spills=0, _init_handles=lambda: None,
                                     metadata=types.SimpleNamespace(shared=0))

    def ga_warmup(*args, grid, num_warps, num_stages, **kw):
        compiled.append(args[12])
        aligned = all(t.data_ptr() % 16 == 0 for t in args[1])
        return compiled_kernel(168 if args[12] % 16 == 0 and aligned else 255)

    monkeypatch.setattr(GA.gemm_alltoall_kernel, "warmup", ga_warmup)
    monkeypatch.setattr(GA, "_occ_cache", {})
    a, w, o = torch.zeros(64, 64), torch.zeros(1, 64, 64), torch.zeros(64, 64)
    c = torch.zeros(1, 2, dtype=torch.int32)
    kw = dict(L=2, DTYPE="fp32", BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, SK=1, PHASES=7)

    def blocks(N, a_rows=64, need=1 << 20, av=a):
        args = ((16, 32), (av, av), (w, w), (o, o), (c, c), (1, 1), (0, 0), (0, 0), (0, 0),
                a_rows, 64, 64, N, 2, 2, need)
        return GA._blocks(args, kw, 2, "cuda:0", 4, 3, 10 ** 6)

    assert blocks(64) == 198        # 168 registers: 3 programs an SM, 396 for 2 ranks
    assert blocks(72) == 132        # 255: 2 an SM (it got 198 from the cache: a hang)
    assert GA.last_launch["n_regs"] == 255
    assert len(GA._occ_cache) == 2 and compiled == [64, 72]
    assert blocks(80) == 198 and blocks(64, a_rows=1000, need=3 << 20) == 198
    assert compiled == [64, 72]     # the same kernels: no new probe
    mis = torch.zeros(64 * 64 + 1)[1:].view(64, 64)  # 4-byte aligned A
    assert blocks(64, av=mis) == 132 and len(GA._occ_cache) == 3
    assert blocks(64, need=1 << 33) == 198 and len(GA._occ_cache) == 4  # an i64 argument now

    def gv_warmup(*args, grid, num_warps, **kw):
        compiled.append("gemv")
        return compiled_kernel(64 if all(t.data_ptr() % 16 == 0 for t in args[1]) else 255)

    monkeypatch.setattr(G.gemv_allreduce_kernel, "warmup", gv_warmup)
    monkeypatch.setattr(G, "_occ_cache", {})
    x, wv = torch.zeros(3, 64), torch.zeros(100, 64)
    xm = torch.zeros(3 * 64 + 1)[1:].view(3, 64)
    gkw = dict(L=1, HAS_BIAS=False, BLOCK_M=16, BLOCK_N=32, PHASES=3)

    def gv(xv, M=3):
        args = ((16,), (xv,), (wv,), (xv,), (x,), (64,), M, 100, 4, 1, 4096)
        return G._blocks(args, gkw, 1000, 1, "cuda:0", 8)

    assert gv(x) == 250 and gv(xm) == 125   # 2 programs an SM (capped), then 1
    assert gv(x, M=5) == 250                # M 3 and 5: one compiled kernel
    assert len(G._occ_cache) == 2 and compiled.count("gemv") == 2


def test_docs_epoch_guard():
    """docs/triton.md gives the epoch guard as dev.h has it: 0xffffffff − 2^24, not 2^32 − 2^24."""
    with open(os.path.join(ROOT, "docs", "triton.md"), encoding="utf-8") as f:
        doc = f.read()
    assert L.EPOCH_LIMIT == 0xffffffff - (1 << 24)
    assert "epoch 0xffffffff − 2^24" in doc and "2^32 − 2^24" not in doc


@needs_triton
def test_gemm_plan(monkeypatch):
    from fco.triton import gemm_alltoall as GA

    monkeypatch.delenv("FCO_TRITON_GA_TILE", raising=False)
    monkeypatch.delenv("FCO_TRITON_GA_ORDER", raising=False)
    assert GA.plan(2, 4096, 8192, 4, 2) == (128, 256, 64, 8, 3)   # big segments
    # few rows per expert: the same tile (its M tiles span the expert's rows of every source)
    assert GA.plan(2, 7168, 1024, 16, 2) == (128, 256, 64, 8, 3)
    assert GA.plan(2, 1024, 1024, 16, 2) == (128, 128, 64, 8, 3)  # narrow N
    assert GA.plan(2, 2048, 1024, 16, 2) == (128, 256, 64, 8, 3)  # N 2048: wide
    assert GA.plan(2, 2047, 1024, 16, 2) == (128, 128, 64, 8, 3)
    assert GA.plan(4, 4096, 8192, 4, 2) == (64, 64, 32, 4, 3)     # f32: FFMA
    # tile order: split (peers' tiles first) when compute-bound, merged (W read once) when not
    assert GA.tile_order(2, 8192, 4) == 1      # 2048 rows per expert
    assert GA.tile_order(2, 2928, 4) == 1      # skewed: 732 on average
    assert GA.tile_order(2, 2048, 4) == 1      # 512: 1024 tokens (merged took 2148 us)
    assert GA.tile_order(2, 4096, 16) == 0     # 256: 512 tokens, 32 experts, top-8
    assert GA.tile_order(2, 1024, 16) == 0     # 64: decode
    assert GA.tile_order(4, 1024, 16) == 1     # f32: FFMA, compute-bound
    assert GA.tile_order(2, 8192, 4, interpret=True) == 0
    monkeypatch.setenv("FCO_TRITON_GA_ORDER", "split")
    assert GA.tile_order(2, 1024, 16) == 1
    monkeypatch.setenv("FCO_TRITON_GA_ORDER", "merged")
    assert GA.tile_order(2, 8192, 4) == 0
    monkeypatch.setenv("FCO_TRITON_GA_ORDER", "fast")
    with pytest.raises(fco.FcoError) as e:
        GA.tile_order(2, 8192, 4)
    assert "FCO_TRITON_GA_ORDER" in e.value.message
    # the grid: every co-resident program, not lowered to even out an upper bound of tiles
    assert GA._full_grid(272, 1, 132, 1) == 132   # was 91 (3 waves for 256 real tiles)
    assert GA._full_grid(10, 1, 132, 1) == 10     # at most one per tile of the bound
    assert GA._full_grid(10 ** 6, 1, 132, 32) == L.SIG_SLOTS - 2
    assert GA._full_grid(1000, 4, 132, 1) == 33   # 4 virtual ranks in one launch
    with pytest.raises(fco.FcoError) as e:
        GA._full_grid(8, 8, 4, 1)
    assert e.value.name == "UNSUPPORTED"
    assert GA.plan(2, 100, 8, 1, 1, interpret=True)[:3] == (16, 16, 16)
    monkeypatch.setenv("FCO_TRITON_GA_TILE", "128,128,64,8,4")
    assert GA.plan(2, 4096, 8192, 4, 2) == (128, 128, 64, 8, 4)
    for bad in ("100,128,64,8,4", "8,128,64,8,4", "128,128,64,0,4", "128,128,64,8",
                # what the kernel cannot take: warps not a power of two or above 16, stages
                # outside 1..8, blocks above 256 or below 16, a sixth value (all were taken)
                "128,128,64,3,4", "128,128,64,32,4", "128,128,64,8,9", "128,128,64,8,0",
                "512,128,64,8,3", "128,512,64,8,3", "128,128,512,8,3", "128,128,8,8,3",
                "128,128,64,8,3,1", "128,128,64,8,x", "junk", ","):
        monkeypatch.setenv("FCO_TRITON_GA_TILE", bad)
        with pytest.raises(fco.FcoError) as e:
            GA.plan(2, 4096, 8192, 4, 2)
        assert e.value.name == "INVALID_ARGUMENT", bad
        assert "FCO_TRITON_GA_TILE" in e.value.message and "1..16" in e.value.message, bad
    for good in ("16,16,16,1,1", "256,256,256,16,8", "64, 32, 16, 2, 2"):
        monkeypatch.setenv("FCO_TRITON_GA_TILE", good)
        assert GA.plan(2, 4096, 8192, 4, 2) == tuple(int(x) for x in good.split(",")), good
    assert GA.workspace_bytes(2, 100, 10, 2) == 2 * GA.half_need(2, 100, 10, 2)
    # the whole per-shape choice, and the waits' backoff cap (FCO_TRITON_WAIT_NS)
    monkeypatch.delenv("FCO_TRITON_GA_TILE", raising=False)
    monkeypatch.delenv("FCO_TRITON_GA_ORDER", raising=False)
    monkeypatch.delenv("FCO_TRITON_WAIT_NS", raising=False)
    assert GA.config(2, 4096, 2048, 4, 2) == dict(tile=(128, 256, 64, 8, 3), split=1,
                                                   wait_ns=512)
    monkeypatch.setenv("FCO_TRITON_WAIT_NS", "0")
    assert GA.config(2, 7168, 4096, 16, 2)["split"] == 0
    assert GA.config(2, 7168, 4096, 16, 2)["wait_ns"] == 0
    for v, want in (("1000000000", 1 << 20), ("-5", 0), ("300", 300)):  # clamped to 0..2^20
        monkeypatch.setenv("FCO_TRITON_WAIT_NS", v)
        assert GA.config(2, 7168, 4096, 16, 2)["wait_ns"] == want, v
    monkeypatch.setenv("FCO_TRITON_WAIT_NS", "junk")
    with pytest.warns(RuntimeWarning, match="FCO_TRITON_WAIT_NS='junk' is not an integer"):
        assert GA.config(2, 7168, 4096, 16, 2)["wait_ns"] == 512
    # what a launch uses: an argument wins and its knob is not read (a malformed one cannot fail
    # the call); unset arguments follow the knobs as above
    monkeypatch.setenv("FCO_TRITON_GA_TILE", "junk")
    monkeypatch.setenv("FCO_TRITON_GA_ORDER", "fast")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # FCO_TRITON_WAIT_NS=junk must not even be read
        assert GA.resolve(2, 7168, 4096, 16, 2, tile=(64, 128, 64, 4, 3), order="split",
                          wait_ns=256) == ((64, 128, 64, 4, 3), 1, 256)
        assert GA.resolve(2, 7168, 4096, 16, 2, tile=[64, 128, 64, 4, 3], order=0,
                          wait_ns=-5) == ((64, 128, 64, 4, 3), 0, 0)
    with pytest.raises(fco.FcoError) as e:
        GA.resolve(2, 7168, 4096, 16, 2, order="split", wait_ns=0)   # tile from the knob
    assert "FCO_TRITON_GA_TILE" in e.value.message
    with pytest.raises(fco.FcoError) as e:
        GA.resolve(2, 7168, 4096, 16, 2, tile=(64, 128, 64, 4, 3), wait_ns=0)
    assert "FCO_TRITON_GA_ORDER" in e.value.message
    with pytest.raises(fco.FcoError) as e:
        GA.resolve(2, 7168, 4096, 16, 2, tile=(64, 128, 64, 4, 3), order="sideways", wait_ns=0)
    assert e.value.name == "INVALID_ARGUMENT" and "sideways" in e.value.message
    # tile= follows the knob's rule (it was taken as given: 4 values, 3 warps, floats)
    for bad in ((64, 128, 64, 4), (64, 128, 64, 3, 3), (64, 128, 64, 4, 0), (64, 128, 64, 4, 9),
                (64, 128, 64, 64, 3), (512, 128, 64, 4, 3), (64, 128, 8, 4, 3),
                (64.0, 128, 64, 4, 3), ("64", 128, 64, 4, 3), (64, 128, 64, 4, True), "abcde",
                64, (64, 128, 64, 4, 3, 1)):
        with pytest.raises(fco.FcoError) as e:
            GA.resolve(2, 7168, 4096, 16, 2, tile=bad, order="split", wait_ns=0)
        assert e.value.name == "INVALID_ARGUMENT" and "tile" in e.value.message, bad
    # wait_ns= clamped to the knob's 0..2^20 (2^30 was taken as is); not an int: refused
    for v, want in ((2 ** 30, 1 << 20), (1 << 20, 1 << 20), (-5, 0), (300, 300)):
        assert GA.resolve(2, 7168, 4096, 16, 2, tile=(64, 128, 64, 4, 3), order=0,
                          wait_ns=v)[2] == want, v
    for bad in ("x", 2.5, "512", [512]):
        with pytest.raises(fco.FcoError) as e:
            GA.resolve(2, 7168, 4096, 16, 2, tile=(64, 128, 64, 4, 3), order=0, wait_ns=bad)
        assert e.value.name == "INVALID_ARGUMENT" and "wait_ns" in e.value.message, bad
    for bad in (["split"], 2, 0.5, "Split"):  # order: 'split' / 'merged' / 1 / 0
        with pytest.raises(fco.FcoError) as e:
            GA.resolve(2, 7168, 4096, 16, 2, tile=(64, 128, 64, 4, 3), order=bad, wait_ns=0)
        assert e.value.name == "INVALID_ARGUMENT" and "order" in e.value.message, bad
    monkeypatch.delenv("FCO_TRITON_GA_TILE", raising=False)
    monkeypatch.delenv("FCO_TRITON_GA_ORDER", raising=False)
    monkeypatch.delenv("FCO_TRITON_WAIT_NS", raising=False)
    assert GA.resolve(2, 4096, 2048, 4, 2) == ((128, 256, 64, 8, 3), 1, 512)


@needs_triton
def test_on_off_knobs(monkeypatch):
    """FCO_GA_DIRECT as the C impls read it (fco_env_flag through fco._lib.env_flag): 0 stages,
    1 / unset announce, anything else is ignored (announce) with a RuntimeWarning once; it was
    `.strip() != "0"`: " 0" staged where the C impls announce, "yes" was taken silently. And
    TRITON_INTERPRET as Triton reads it (its knob, not fco's 0 / 1 rule)."""
    import triton

    from fco import _lib
    from fco.triton import gemm_alltoall as GA, language as fl

    monkeypatch.setattr(_lib, "_flag_warned", set())
    sym = [(0x1000, 0, 32)]  # (table, slot, offset): announced as slot + 1 = 1, or staged: 0

    def slot():
        return GA._sym_args([None], [None], 64, sym)[0][1]

    monkeypatch.delenv("FCO_GA_DIRECT", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert slot() == 1
        for v, want in (("1", 1), ("0", 0), ("0 ", 0)):
            monkeypatch.setenv("FCO_GA_DIRECT", v)
            assert slot() == want, v
    monkeypatch.setenv("FCO_GA_DIRECT", "yes")
    with pytest.warns(RuntimeWarning, match="FCO_GA_DIRECT='yes' is not 0 \\(off\\) or 1"):
        assert slot() == 1
    for v in (" 0", "-1"):  # ignored (the C side ignores " 0" too), said once per name
        monkeypatch.setenv("FCO_GA_DIRECT", v)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert slot() == 1, v
    # announced only 16-byte aligned; slots 0..MAX_SYMMETRIC-1 or -1, a non-NULL table
    monkeypatch.delenv("FCO_GA_DIRECT", raising=False)
    assert GA._sym_args([None], [None], 64, [(0x1000, 15, 8)]) == [(0x1000, 0, 0)]
    assert GA._sym_args([None], [None], 64, [(0x1000, 15, 48)]) == [(0x1000, 16, 48)]
    for bad in ((0x1000, L.MAX_SYMMETRIC, 0), (0, 0, 0), (0x1000, -2, 0), (0x1000, 0, -16)):
        with pytest.raises(fco.FcoError) as e:
            GA._sym_args([None], [None], 64, [bad])
        assert e.value.name == "INVALID_ARGUMENT" and "sym entry" in e.value.message, bad
    knobs = getattr(triton, "knobs", None)
    for v in ("1", "true", "On", "yes", "0", "false", "off", "2", "-1", " 1", ""):
        monkeypatch.setenv("TRITON_INTERPRET", v)
        want = bool(knobs.runtime.interpret) if knobs is not None else v == "1"
        assert fl.interpret_env() is want, v
        assert want == (v.lower() in ("1", "true", "on", "yes")), v  # Triton 3.6's rule


@needs_triton
def test_gemm_streamk_rule(monkeypatch):
    """Stream-K's host side: the knob (argument, FCO_TRITON_GA_STREAMK, on by default on GPUs), its
    checks, the scratch it adds to the workspace, and the device rule's mirror at the five
    workloads' tile counts (only the skewed one splits: 400 tiles on 132 programs)."""
    from fco.triton import gemm_alltoall as GA

    monkeypatch.delenv("FCO_TRITON_GA_STREAMK", raising=False)
    # unset: on for GPU launches (measured, run 63585a1), off under the interpreter
    assert GA.streamk_config(None, 224, interpret=True) == GA.SK_OFF
    assert GA.streamk_config(None, 224, interpret=False) == dict(GA.SK_DEFAULTS, on=1)
    monkeypatch.setenv("FCO_TRITON_GA_STREAMK", "0")
    assert GA.streamk_config(None, 224, interpret=False) == GA.SK_OFF
    monkeypatch.delenv("FCO_TRITON_GA_STREAMK", raising=False)
    on = GA.streamk_config(1, 224)
    assert on == dict(GA.SK_DEFAULTS, on=1)
    assert GA.streamk_config(True, 224) == on
    assert GA.streamk_config(16, 224)["max_slices"] == 16
    assert GA.streamk_config(16, 224)["min_slices"] == 4   # at least min(4, n)
    for n in (2, 3):  # documented 2..64: at most n slices, so at least min(4, n) (once refused)
        sk = GA.streamk_config(n, 224)
        assert sk["on"] == 1 and sk["max_slices"] == n and sk["min_slices"] == n
    assert GA.streamk_config(0, 224) == GA.streamk_config(False, 224) == GA.SK_OFF
    assert GA.streamk_config(1, 31) == GA.SK_OFF   # K 1984 / 64: never 4 slices of 8 K tiles
    assert GA.streamk_config(1, 32)["on"] == 1
    assert GA.streamk_config(dict(min_ksteps=1, min_slices=2), 2)["on"] == 1
    monkeypatch.setenv("FCO_TRITON_GA_STREAMK", "1")
    assert GA.streamk_config(None, 224) == on
    monkeypatch.setenv("FCO_TRITON_GA_STREAMK", "64")   # the most the knob takes
    assert GA.streamk_config(None, 224)["max_slices"] == 64
    monkeypatch.setenv("FCO_TRITON_GA_STREAMK", "12")
    assert GA.streamk_config(None, 224)["max_slices"] == 12
    assert GA.streamk_config(0, 224) == GA.SK_OFF           # the argument wins
    for bad_env in ("yes", "-1", "65"):
        monkeypatch.setenv("FCO_TRITON_GA_STREAMK", bad_env)
        with pytest.raises(fco.FcoError) as e:
            GA.streamk_config(None, 224)
        assert "FCO_TRITON_GA_STREAMK" in e.value.message
    # floats are not ints (1.0 turned stream-K on, 0.0 off, 2.0 was refused); numpy ints are
    for bad in ("on", dict(slices=4), dict(items=48), dict(min_slices=9), dict(min_ksteps=0),
                dict(rows=48), -3, 1.0, 0.0, 4.0):
        with pytest.raises(fco.FcoError) as e:
            GA.streamk_config(bad, 224)
        assert e.value.name == "INVALID_ARGUMENT"
    import numpy as np
    assert GA.streamk_config(np.int64(4), 224)["max_slices"] == 4
    assert GA.streamk_config(np.int32(1), 224) == on and GA.streamk_config(np.int8(0), 224) == \
        GA.SK_OFF
    # scratch: counters (256-byte rounded) + items fp32 tiles, per half; none when off
    assert GA.sk_scratch_bytes(GA.SK_OFF, 128, 256) == 0
    assert GA.sk_scratch_bytes(on, 128, 256) == 256 + 64 * 128 * 256 * 4
    assert GA.sk_scratch_bytes(dict(on, items=128), 16, 16) == 512 + 128 * 16 * 16 * 4
    assert GA.workspace_bytes(2, 100, 10, 2, 4096) == 2 * (GA.half_need(2, 100, 10, 2) + 4096)
    # the rule: (t_full, split tiles, slices)
    assert GA.streamk_split(400, 132, 224, on) == (396, 4, 8)    # skewed: 4 tiles × 8 slices
    assert GA.streamk_split(400, 132, 224, dict(on, max_slices=16)) == (396, 4, 16)
    assert GA.streamk_split(400, 66, 224, on) == (396, 4, 8)     # 2 virtual ranks, one GPU
    assert GA.streamk_split(400, 132, 224, GA.SK_OFF) == (400, 0, 1)
    for tiles in (1024, 256, 896, 448):   # the other four workloads: no split
        assert GA.streamk_split(tiles, 132, 224, on)[1] == 0, tiles
    assert GA.streamk_split(264, 132, 224, on) == (264, 0, 1)    # no partial wave
    assert GA.streamk_split(4, 132, 224, on) == (0, 4, 8)        # one partial wave
    assert GA.streamk_split(140, 132, 16, on) == (140, 0, 1)     # 16 K tiles: 2 slices < 4
    assert GA.streamk_split(132 + 20, 132, 224, on) == (152, 0, 1)  # 64 items // 20 = 3 < 4
    assert GA.streamk_split(132 + 16, 132, 224, on) == (132, 16, 4)
    # tile_total: the device plan's count (M tiles per expert over every source, × N tiles)
    import torch

    c = torch.tensor([[1024, 1024], [146, 146], [147, 146], [146, 147]], dtype=torch.int32)
    assert GA.tile_total(c, 128, 256, 4096) == 400


def _compile_gemm(dtype, nk, tile, L=2, split=0, wait_ns=512, profile=False, sk=0, tma=False,
                  even_n=True, n_div16=True):
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    from fco.triton import gemm_alltoall as GA

    bm, bn, bk, nw, ns = tile
    dt = {"fp32": tl.float32, "bf16": tl.bfloat16, "fp16": tl.float16}[dtype]
    ptr = "*" + dtype
    sig = {"devs": ("i64",) * L, "as_": (ptr,) * L, "ws": (ptr,) * L, "outs": (ptr,) * L,
           "counts": ("*i32",) * L, "Es": ("i32",) * L, "syms": ("i64",) * L,
           "symks": ("i64",) * L, "symos": ("i64",) * L, "a_rows": "i32", "out_rows": "i32",
           "K": "i32", "N": "i32", "B": "i32", "P_host": "i32", "need": "i64"}
    consts = dict(L=L, DTYPE=dt, ES=4 if dtype == "fp32" else 2, W_NK=nk, BLOCK_M=bm,
                  BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, E_PAD=8, P_PAD=2, EVEN_K=True, EVEN_N=even_n,
                  PRECISION="ieee" if dtype == "fp32" else "tf32", PHASES=7, VEC=True, QV=256,
                  COPY_BLOCK=2048, UPCAST=False, SPLIT=split, WAIT_NS=wait_ns, PROFILE=profile,
                  SK=sk, SK_MAX_SLICES=8, SK_MIN_SLICES=4, SK_MIN_KSTEPS=8, SK_ITEMS=64,
                  SK_RB=min(64, bm), TMA=tma)
    if profile:
        sig["prof"] = "*i64"
    else:
        consts["prof"] = None
    sig.update({k: "constexpr" for k in consts})
    # what a launch with 16-byte aligned tensors and K, N multiples of 16 specialises
    attrs = {(arg, i): [["tt.divisibility", 16]] for arg in (1, 2, 3, 4) for i in range(L)}
    attrs.update({(11,): [["tt.divisibility", 16]]})  # K
    if n_div16:
        attrs.update({(12,): [["tt.divisibility", 16]]})  # N
    src = triton.compiler.ASTSource(fn=GA.gemm_alltoall_kernel, signature=sig, constexprs=consts,
                                    attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": nw, "num_stages": ns})


@needs_triton
@pytest.mark.parametrize("dtype,nk,tile,split,profile,sk,tma", [
    ("bf16", True, (128, 256, 64, 8, 3), 0, False, 0, False),
    ("bf16", True, (128, 256, 64, 8, 3), 1, True, 0, False),
    ("bf16", True, (128, 256, 64, 8, 3), 1, False, 1, False),
    ("fp16", False, (128, 128, 64, 8, 3), 0, False, 1, False),
    ("fp32", False, (64, 64, 32, 4, 3), 1, False, 0, False),
    ("bf16", True, (128, 256, 64, 8, 3), 1, False, 0, True),
    ("bf16", True, (128, 256, 64, 8, 4), 1, False, 1, True),
    ("fp16", False, (128, 256, 64, 8, 4), 0, True, 0, True)])
def test_gemm_kernel_compiles_for_sm90(dtype, nk, tile, split, profile, sk, tma):
    """The fused GEMM + All-to-All goes through Triton and ptxas for sm_90 with the memory-model
    pieces (release flags, acquire waits, the bound, block-uniform decisions, .cg reads, the
    first-error CAS) and, for 16-bit types, Hopper tensor cores (wgmma) fed by a cp.async
    pipeline, and 16-byte tile stores (local out and peer staging). Stream-K (sk): the slice
    counter's acq_rel atomic (gpu scope) and 16-byte partial stores / .cg loads; without it
    none of its code is there (SK=0 compiles to the SASS of the kernel before stream-K)."""
    if _interpreting():
        pytest.skip("TRITON_INTERPRET is set")
    try:
        c = _compile_gemm(dtype, nk, tile, split=split, profile=profile, sk=sk, tma=tma)
    except Exception as e:  # noqa: BLE001 — e.g. no ptxas in this triton install
        if "ptxas" in str(e).lower():
            pytest.skip(f"cannot run ptxas here: {e}")
        raise
    ptx = c.asm["ptx"]
    assert c.asm.get("cubin")
    for needle in ("atom.global.sys.release.exch.b64", "ld.acquire.sys.global.u64",
                   "%globaltimer", "bar.red.or.pred", "ld.global.cg",
                   "atom.global.relaxed.sys.cas.b32", "ld.relaxed.sys.global.s32",
                   # the waits poll with relaxed / volatile loads and a nanosleep backoff
                   "ld.relaxed.sys.global.u64", "ld.volatile.global", "nanosleep.u32"):
        assert needle in ptx, needle
    assert ("%smid" in ptx) == profile
    if dtype != "fp32":
        for needle in ("wgmma.mma_async", "cp.async", "st.global.v4"):
            assert needle in ptx, needle
    assert ("atom.global.gpu.acq_rel.add" in ptx) == bool(sk)
    if sk:
        assert "ld.global.cg.v4" in ptx
    # TMA: the A and W blocks come through tensor descriptors made on the device (tensormap
    # writes + the proxy fence, 2 × 128 bytes of Triton's global scratch per program), pipelined
    # num_stages deep with mbarriers; no per-thread cp.async is left in the tile loop.
    assert ("cp.async.bulk.tensor" in ptx) == tma
    assert ("fence.proxy.tensormap" in ptx) == tma
    assert (c.metadata.global_scratch_size > 0) == tma
    if tma:
        assert "mbarrier.try_wait" in ptx and "cp.async.cg" not in ptx
        # (stages - 1) × 2 prologue copies, 2 in the loop
        assert ptx.count("cp.async.bulk.tensor") == 2 * tile[4], ptx.count("cp.async.bulk.tensor")


@needs_triton
def test_gemm_registers_depend_on_n_alignment():
    """Why the occupancy cache keys on Triton's specialisation: the f32 64×64×32 stream-K kernel
    compiled for sm_90 with N % 16 == 0 and without (nothing else differs: N 80 and 72, say)
    gets different register counts from ptxas (168 and 255 with Triton 3.6), so programs per
    SM measured on one must not be reused for the other."""
    if _interpreting():
        pytest.skip("TRITON_INTERPRET is set")
    from triton import knobs

    tool = getattr(getattr(knobs, "nvidia", None), "cuobjdump", None)
    path = getattr(tool, "path", None) if tool is not None else None
    if not path or not os.path.exists(path):
        pytest.skip("no cuobjdump in this triton install")
    regs = {}
    for div in (True, False):
        try:
            c = _compile_gemm("fp32", True, (64, 64, 32, 4, 3), L=1, split=1, sk=1,
                              even_n=False, n_div16=div)
        except Exception as e:  # noqa: BLE001 — e.g. no ptxas in this triton install
            if "ptxas" in str(e).lower():
                pytest.skip(f"cannot run ptxas here: {e}")
            raise
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(c.asm["cubin"])
            f.flush()
            out = subprocess.run([path, "--dump-resource-usage", f.name], capture_output=True,
                                 text=True, check=True).stdout
        regs[div] = int(out.split("REG:")[1].split()[0])
    assert regs[True] != regs[False], regs


def test_gemm_tma_config(monkeypatch):
    """FCO_TRITON_GA_TMA / tma=: on by default on GPUs (off interpreted); only for 16-bit, K and N
    multiples of 8, 16-byte aligned bases; anything else runs the pointer path (a reason, no
    error); a bad env value is an INVALID_ARGUMENT."""
    import torch

    from fco.triton import gemm_alltoall as GA

    monkeypatch.delenv("FCO_TRITON_GA_TMA", raising=False)
    api = GA.tma_api()
    on = (1, "on") if api else (0, "no tensor descriptors in this Triton")
    # unset: on for GPU launches where it can run (measured, run 63585a1), off when interpreted
    assert GA.tma_config(None, 2, 14336, 4096, interpret=True) == (0, "off")
    assert GA.tma_config(None, 2, 14336, 4096, interpret=False) == on
    assert GA.tma_config(None, 4, 14336, 4096, interpret=False)[0] == 0   # f32: FFMA tiles
    monkeypatch.setenv("FCO_TRITON_GA_TMA", "0")
    assert GA.tma_config(None, 2, 14336, 4096, interpret=False) == (0, "off")
    monkeypatch.delenv("FCO_TRITON_GA_TMA", raising=False)
    assert GA.tma_config(1, 2, 14336, 4096) == on
    assert GA.tma_config(True, 2, 2048, 7168) == on
    assert GA.tma_config(0, 2, 2048, 7168) == (0, "off")
    monkeypatch.setenv("FCO_TRITON_GA_TMA", "1")
    assert GA.tma_config(None, 2, 14336, 4096) == on
    assert GA.tma_config(0, 2, 14336, 4096) == (0, "off")  # the argument wins
    assert GA.tma_config(None, 4, 14336, 4096)[0] == 0      # f32: the FFMA tiles
    assert GA.tma_config(None, 2, 14340, 4096)[0] == 0      # K not a multiple of 8
    assert GA.tma_config(None, 2, 14336, 4100)[0] == 0      # N
    t = torch.zeros(64, dtype=torch.bfloat16)
    assert GA.tma_config(None, 2, 64, 64, [t, t[8:]]) == on
    assert GA.tma_config(None, 2, 64, 64, [t, t[1:]])[0] == 0  # a 2-byte aligned base
    assert GA.tma_config(None, 2, 64, 64, [t, t[4:]])[0] == 0  # 8 bytes: not enough
    assert GA.tma_config(None, 2, 24, 40) == on                 # multiples of 8, not of 16
    monkeypatch.setenv("FCO_TRITON_GA_TMA", "0")
    assert GA.tma_config(None, 2, 14336, 4096) == (0, "off")
    for bad in ("2", "yes"):
        monkeypatch.setenv("FCO_TRITON_GA_TMA", bad)
        with pytest.raises(fco.FcoError) as e:
            GA.tma_config(None, 2, 64, 64)
        assert "FCO_TRITON_GA_TMA" in e.value.message
    monkeypatch.delenv("FCO_TRITON_GA_TMA")
    for bad in (1.0, 0.0, 2, "1"):  # 1.0 / 0.0 were taken by their value
        with pytest.raises(fco.FcoError, match="expected None, 0 or 1") as e:
            GA.tma_config(bad, 2, 64, 64)
    import numpy as np
    assert GA.tma_config(np.int64(1), 2, 64, 64) == on
    # no tensor descriptors in this Triton: one warning, then the pointer path quietly
    monkeypatch.setattr(GA, "tma_api", lambda: False)
    monkeypatch.setattr(GA, "_tma_warned", set())
    with pytest.warns(RuntimeWarning, match="pointer path"):
        assert GA.tma_config(1, 2, 64, 64)[0] == 0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert GA.tma_config(1, 2, 64, 64)[0] == 0


def _w_op_triton_on_cpu():
    """fco.gemm_alltoall(impl="triton") on the cpu transport: the argument checks of every impl,
    then UNSUPPORTED (Triton kernels need CUDA); workspace_bytes(impl="triton") = impl 1's."""
    import torch

    import fco as f

    a, w = torch.zeros(8, 4), torch.zeros(2, 4, 3)
    counts = torch.ones(2, 2, dtype=torch.int32)
    with pytest.raises(f.FcoError) as e:
        f.gemm_alltoall(a, w, counts[:1], impl="triton")
    assert e.value.name == "INVALID_ARGUMENT" and "counts" in e.value.message
    with pytest.raises(f.FcoError) as e:
        f.gemm_alltoall(a, w, counts, impl="triton")
    assert e.value.name == "UNSUPPORTED" and "CUDA" in e.value.message
    assert f.gemm_alltoall_workspace_bytes(a, w, 12, impl="triton") == \
        f.gemm_alltoall_workspace_bytes(a, w, 12, impl="tiles")
    # With FCO_TRITON_GA_STREAMK on, the launch's stream-K scratch is counted (K 4096: 64 K
    # tiles, enough to split), so reserving this much before capturing a graph is enough.
    from fco.triton import gemm_alltoall as tg

    a2, w2 = torch.zeros(8, 4096), torch.zeros(2, 4096, 3)
    os.environ["FCO_TRITON_GA_STREAMK"] = "0"
    try:
        plain = f.gemm_alltoall_workspace_bytes(a2, w2, 12, impl="triton")
    finally:
        del os.environ["FCO_TRITON_GA_STREAMK"]
    # unset = on for GPU launches (this process does not interpret): the same as "1"
    assert f.gemm_alltoall_workspace_bytes(a2, w2, 12, impl="triton") > plain
    os.environ["FCO_TRITON_GA_STREAMK"] = "1"
    try:
        with_sk = f.gemm_alltoall_workspace_bytes(a2, w2, 12, impl="triton")
        bm, bn, bk = tg.config(4, 3, 8, 2, 2)["tile"][:3]
        scratch = tg.sk_scratch_bytes(tg.streamk_config(None, -(-4096 // bk)), bm, bn)
    finally:
        del os.environ["FCO_TRITON_GA_STREAMK"]
    assert scratch > 0 and with_sk == plain + 2 * scratch, (plain, with_sk, scratch)
    return True


@needs_triton
def test_op_impl_triton_on_cpu(pool2):
    assert pool2.run(_w_op_triton_on_cpu) == [True, True]


# ---- Triton's CPU interpreter ------------------------------------------------------------------
# The GEMM + All-to-All's tile orders (FCO_TRITON_GA_ORDER): experts of up to 120 rows in 16-row M
# tiles (tiles that span sources, local-only tiles), against float64; then each rank's plan area
# (local-only M tiles [jl0, jl1) hold only its own rows, and in "split" all of them), the header
# (B flags announced per destination with rows) and one flag sig_value(call, 0) per part and peer.
_GA_ORDER_CASE = r"""
import os
import sys

import torch

import _triton_interp as T
from fco.triton import gemm_alltoall as GA, layout as L

order = sys.argv[1]
os.environ["FCO_TRITON_GA_ORDER"] = order
BM = BN = 16
n = 0
classes = set()
for P in (2, 3):
    w = T.World(P)
    calls = 0
    for dt, K, N, layout, bpr in ((torch.float32, 24, 40, "nk", None),
                                  (torch.bfloat16, 16, 16, "kn", 3),
                                  (torch.float32, 40, 33, "kn", 1),
                                  (torch.float16, 16, 20, "nk", 5)):
        n += 1
        As, Ws, Cs = T._ga_data(P, dt, K, N, layout, seed=200 + n, max_count=40)
        refs = T._ga_ref(As, Ws, Cs, layout)
        out_rows = max(r.shape[0] for r in refs) + 3
        outs = [torch.full((out_rows, N), float("nan")).to(dt) for _ in range(P)]
        GA.gemm_alltoall(w.states, As, Ws, Cs, out_rows, w_layout=layout, outs=outs,
                         blocks_per_rank=bpr, tile=(BM, BN, 16, 1, 1))
        calls += 1
        T._ga_check(outs, refs, dt, (order, P, dt, layout, K, N, bpr))
        assert [d.epoch for d in w.devs] == [calls] * P
        assert all(d.arrive == 0 for d in w.devs)
        assert all(e.code == 0 for e in w.errs), [(e.code, e.slot) for e in w.errs]
        es = As[0].element_size()
        nN = -(-N // BN)
        half = L.half_offset(w.devs[0].ws_bytes, calls)
        hb = GA.hdr_bytes(P)
        for me in range(P):
            C = [[int(x) for x in row] for row in Cs[me].tolist()]
            E = len(C)
            ws = w.ws[me]
            plan = half + GA.off_staging(P) + L.round_up(out_rows * N * es, 256)
            i32 = ws[plan:plan + 6400 + 2048 * P].view(torch.int32).tolist()
            arow, rows, jl0, jl1, tbr, tbl = (i32[k * 256:k * 256 + E] for k in range(6))
            t_r, total = i32[1536], i32[1537]
            cnt = i32[1600:1600 + E * P]
            dloc = i32[1600 + 256 * P:1600 + 256 * P + E * P]
            hdr = ws[half + me * hb:half + me * hb + 8 * (4 + 3 * P)].view(torch.int64).tolist()
            B = hdr[2]
            tot = [sum(C[e][s] for e in range(E)) for s in range(P)]
            assert hdr[4 + P:4 + 2 * P] == [B if x else 0 for x in tot], (hdr, tot, B)
            a0, t_rem, t_loc = 0, 0, 0
            for e in range(E):
                R = sum(C[e])
                assert (arow[e], rows[e]) == (a0, R)
                assert cnt[e * P:(e + 1) * P] == C[e]
                assert dloc[e * P:(e + 1) * P] == [sum(C[x][s] for x in range(e))
                                                   for s in range(P)]
                l0 = sum(C[e][:me])
                l1 = l0 + C[e][me]
                nM = -(-R // BM)
                only = [j for j in range(nM) if l0 <= j * BM and min(R, (j + 1) * BM) <= l1]
                want = (only[0], only[-1] + 1) if order == "split" and only else None
                # only tiles of my own rows may run after the flags; split: all of them do
                assert all(l0 <= j * BM and min(R, (j + 1) * BM) <= l1
                           for j in range(jl0[e], jl1[e])), (e, jl0[e], jl1[e], l0, l1, R)
                if want:
                    assert (jl0[e], jl1[e]) == want, (e, jl0[e], jl1[e], want)
                    classes.add("local")
                else:
                    assert jl1[e] - jl0[e] == 0 or order == "split"
                if sum(1 for s in range(P) if C[e][s]) > 1 and nM:
                    classes.add("mixed")
                assert tbr[e] == t_rem
                t_rem += (nM - (jl1[e] - jl0[e])) * nN
                a0 += R
            for e in range(E):
                assert tbl[e] == t_rem + t_loc
                t_loc += (jl1[e] - jl0[e]) * nN
            assert (t_r, total) == (t_rem, t_rem + t_loc)
            # one flag per part and peer with rows, sig_value(call, 0)
            for s in range(P):
                if s != me and tot[s]:
                    got = w.sig[s][me * L.SIG_SLOTS:me * L.SIG_SLOTS + B].tolist()
                    assert got == [L.sig_value(calls, 0)] * B, (me, s, got)
assert classes == ({"local", "mixed"} if order == "split" else {"mixed"}), classes
print("ok", order)
"""


@needs_triton
@pytest.mark.parametrize("order", ["split", "merged"])
def test_interpreter_gemm_tile_order(order):
    env = dict(os.environ, TRITON_INTERPRET="1")
    env.pop("FCO_TRITON_GA_TILE", None)
    r = subprocess.run([sys.executable, "-c", _GA_ORDER_CASE, order], env=env, cwd=HERE,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    assert f"ok {order}" in r.stdout


# ---- Triton's CPU interpreter: the cases of _triton_interp.py ------------------------------
@needs_triton
@pytest.mark.parametrize("case", ["fields", "helpers", "gemv", "timeout", "epoch_limit",
                                  "error_stops",
                                  "bad_table", "gemm",
                                  "gemm_sym", "gemm_sym_freed", "gemm_bad_counts",
                                  "gemm_timeout", "gemm_tile_timeout",
                                  "gemm_bad_table", "gemm_streamk", "gemm_tma", "profile",
                                  "ws_exact"])
def test_interpreter(case):
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, os.path.join(HERE, "_triton_interp.py"), case], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
