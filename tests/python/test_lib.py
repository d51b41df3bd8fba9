"""test_lib.py — the ctypes binding itself (one process, no process group): the library is
found and matches the binding (config size, result codes), errors carry fco_last_error, a wrong
FCO_LIB is reported with every place searched.
Run: pytest tests/python/test_lib.py
"""
import ctypes
import os
import subprocess
import sys

import pytest
import torch

import fco
from fco import _lib


def test_library_loads():
    path = fco.lib_path()
    assert os.path.isfile(path) and path.endswith(".so")


def test_library_version_matches_binding():
    assert fco.lib_version() == fco.__version__
    assert _lib.version_string(_lib.BINDING_VERSION_CODE) == fco.__version__
    assert _lib.version_string(10203) == "1.2.3" and _lib.version_string(120099) == "12.0.99"


class _FakeLib:
    """Stands in for a loaded libfco in _declare: only fco_get_version, reporting `code`."""

    def __init__(self, code, has_version=True):
        if has_version:
            def get_version(ref):
                ref._obj.value = code
                return _lib.OK
            self.fco_get_version = get_version


@pytest.mark.parametrize("code", [200, 10100, 0])
def test_library_of_another_major_minor_is_refused(code):
    with pytest.raises(fco.FcoError) as e:
        _lib._declare(_FakeLib(code))
    assert e.value.code == _lib.INTERNAL
    assert _lib.version_string(code) in str(e.value) and "0.1.0" in str(e.value)


class _PatchedLib(_FakeLib):
    """The loaded libfco, but fco_get_version reports `code`."""

    def __getattr__(self, name):
        return getattr(_lib.lib(), name)


@pytest.mark.parametrize("code", [100, 199])
def test_library_of_another_patch_level_is_accepted(code):
    _lib._declare(_PatchedLib(code))  # patch levels mix: no error


def test_library_with_another_config_size_is_refused():
    lib = _PatchedLib(_lib.BINDING_VERSION_CODE)

    def config_init(ref):
        ref._obj.size = 8
        return _lib.OK
    lib.fco_config_init = config_init
    with pytest.raises(fco.FcoError, match="fco_config_t is 8 bytes .* binding is out of date") \
            as e:
        _lib._declare(lib)
    assert e.value.code == _lib.INTERNAL


def test_library_without_fco_get_version_is_refused():
    with pytest.raises(fco.FcoError, match="older than this binding"):
        _lib._declare(_FakeLib(0, has_version=False))


def test_result_names_match_library():
    for code, name in enumerate(_lib.RESULT_NAMES):
        assert _lib.result_string(code) != "unknown result", name
    assert _lib.result_string(len(_lib.RESULT_NAMES)) == "unknown result"
    assert _lib.result_string(_lib.TIMEOUT).startswith("a peer did not signal")


def test_fco_error_names_and_text():
    # every code by its name (the last one too), an unknown code by its number; the function
    # prefixed once (not again when the message already starts with it)
    for code, name in enumerate(_lib.RESULT_NAMES):
        assert fco.FcoError(code, "m").name == name
    e = fco.FcoError(len(_lib.RESULT_NAMES), "m")
    assert e.name == str(len(_lib.RESULT_NAMES)) and str(e) == f"m [FCO_ERR_{e.name}]"
    assert str(fco.FcoError(_lib.INTERNAL, "boom", "fco_x")) == "fco_x: boom [FCO_ERR_INTERNAL]"
    assert str(fco.FcoError(_lib.INTERNAL, "fco_x: boom", "fco_x")) == \
        "fco_x: boom [FCO_ERR_INTERNAL]"


def test_fco_error_pickles():
    # an error raised in a multiprocessing / ProcessPoolExecutor worker reaches the parent as
    # itself (args held only the text: unpickling called FcoError(text) and raised TypeError)
    import copy
    import pickle
    for e in (fco.FcoError(_lib.TIMEOUT, "peer 1 silent", "fco_allreduce"),
              fco.FcoError(_lib.INVALID_ARGUMENT, "bad"), _lib.FcoLibraryNotFound("not here")):
        for back in (pickle.loads(pickle.dumps(e)), copy.copy(e), copy.deepcopy(e)):
            assert type(back) is type(e) and str(back) == str(e)
            assert (back.code, back.name, back.message, back.func) == \
                (e.code, e.name, e.message, e.func)


def test_check_falls_back_to_the_result_string(monkeypatch):
    _lib.check(_lib.OK)
    monkeypatch.setattr(_lib, "last_error", lambda comm=None: "")  # libfco left no message
    with pytest.raises(fco.FcoError, match=r"^fco_x: a peer did not signal") as e:
        _lib.check(_lib.TIMEOUT, None, "fco_x")
    assert e.value.name == "TIMEOUT" and e.value.func == "fco_x"


def test_without_torch_distributed():
    # this process has no process group: fco.init says so, fco.last_plan is "" (creates nothing)
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("torch.distributed is initialized in this process")
    with pytest.raises(fco.FcoError, match="torch.distributed is not initialized") as e:
        fco.init()
    assert e.value.name == "INVALID_USAGE" and e.value.func == "fco.init"
    # an op or a symmetric tensor without fco.init looks for the group's communicator: the same
    # error (it names fco.init), no communicator made
    calls = {
        "allreduce": lambda: fco.allreduce(torch.ones(4)),
        "gemv_allreduce": lambda: fco.gemv_allreduce(torch.ones(1, 4), torch.ones(3, 4)),
        "empty_symmetric": lambda: fco.empty_symmetric((4,), torch.float32, device="cpu"),
    }
    for what, call in calls.items():
        with pytest.raises(fco.FcoError, match="torch.distributed is not initialized") as e:
            call()
        assert e.value.name == "INVALID_USAGE", what
        assert "fco.init()" in str(e.value), what
    assert fco.last_plan() == "" and fco.last_plan(device="cpu") == ""


def test_dtype_and_transport_names():
    L = _lib.lib()
    assert [L.fco_dtype_name(d).decode() for d in (_lib.F32, _lib.F16, _lib.BF16)] == \
        ["f32", "f16", "bf16"]
    assert L.fco_transport_name(_lib.TRANSPORT_CPU).decode() == "cpu"
    assert L.fco_transport_name(_lib.TRANSPORT_NCCL).decode() == "nccl"


def test_config_defaults():
    cfg = _lib.config()
    assert cfg.size == ctypes.sizeof(_lib.Config)
    assert cfg.transport == _lib.TRANSPORT_AUTO and cfg.device == -1


def test_error_carries_last_error():
    # fco_comm_init with nranks 0: rejected by libfco with a message naming the value
    uid = _lib.UniqueId()
    _lib.check(_lib.lib().fco_get_unique_id(ctypes.byref(uid)))
    h = _lib.comm_t()
    cfg = _lib.config(transport=_lib.TRANSPORT_CPU)
    r = _lib.lib().fco_comm_init(ctypes.byref(h), 0, 0, ctypes.byref(uid), ctypes.byref(cfg))
    with pytest.raises(fco.FcoError, match="nranks 0") as e:
        _lib.check(r, None, "fco_comm_init")
    assert e.value.code == _lib.INVALID_ARGUMENT and e.value.name == "INVALID_ARGUMENT"
    assert "FCO_ERR_INVALID_ARGUMENT" in str(e.value) and "fco_comm_init" in str(e.value)


def test_one_rank_communicator_direct():
    # the C API without torch.distributed: one rank on the cpu transport
    L = _lib.lib()
    uid = _lib.UniqueId()
    _lib.check(L.fco_get_unique_id(ctypes.byref(uid)))
    h = _lib.comm_t()
    cfg = _lib.config(transport=_lib.TRANSPORT_CPU)
    _lib.check(L.fco_comm_init(ctypes.byref(h), 1, 0, ctypes.byref(uid), ctypes.byref(cfg)))
    try:
        import torch

        x = torch.arange(10, dtype=torch.float32)
        y = torch.empty_like(x)
        f = _lib.bind("fco_allreduce", [_lib.comm_t, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_void_p])
        _lib.check(f(h, x.data_ptr(), y.data_ptr(), 10, _lib.F32, -1, None), h.value)
        assert torch.equal(x, y)
    finally:
        _lib.check(L.fco_comm_destroy(h))


def test_bind_missing_symbol():
    with pytest.raises(fco.FcoError, match="fco_no_such_function") as e:
        _lib.bind("fco_no_such_function", [])
    assert e.value.name == "UNSUPPORTED"


def test_bad_fco_lib_reports_where_it_looked(tmp_path):
    env = dict(os.environ, FCO_LIB=str(tmp_path / "nope.so"))
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(fco.__file__))
    code = ("import fco\n"
            "try:\n"
            "    fco.lib_path()\n"
            "except fco.FcoLibraryNotFound as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env)
    assert "nope.so (missing)" in out.stdout and "make" in out.stdout, out.stdout + out.stderr
    # a file that is there but no shared library: the loader's reason, and nothing else tried
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an ELF file\n")
    env["FCO_LIB"] = str(bad)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env)
    tried = out.stdout.partition("tried: ")[2]
    assert tried.startswith(f"{bad} (") and "(missing)" not in tried, out.stdout + out.stderr
    assert "; " not in tried.partition(". Build")[0], out.stdout  # one candidate only


def test_wrappers_and_ops_go_together():
    # every exported fco.<op> has its registered fco::<op> (and its backward op when it has one)
    import torch

    assert hasattr(torch.ops.fco, "allreduce") and hasattr(torch.ops.fco, "allreduce_")
    for name in ("allreduce", "gemv_allreduce", "embedding_alltoall", "gemm_alltoall",
                 "embedding_alltoall_backward", "gemm_alltoall_backward"):
        try:
            torch.ops.fco.__getattr__(name).default
            registered = True
        except (AttributeError, RuntimeError):
            registered = False
        assert registered, name
        assert hasattr(fco, name) or name.endswith("_backward"), name


def test_env_flag(monkeypatch):
    """_lib.env_flag, the Python side's on/off knobs (FCO_TORCH_DIRECT, FCO_GA_DIRECT), reads as
    libfco's fco_env_flag: 1 on, 0 off (trailing blanks ignored, not leading), unset / empty the
    default; anything else is ignored — the default — with a RuntimeWarning once per name."""
    import warnings

    name = "FCO_TEST_PY_FLAG_PROBE"
    monkeypatch.setattr(_lib, "_flag_warned", set())
    monkeypatch.delenv(name, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid value (or none) says nothing
        assert _lib.env_flag(name, True) is True and _lib.env_flag(name, False) is False
        for v, want in (("", True), ("1", True), ("0", False), ("1 ", True), ("0\n", False)):
            monkeypatch.setenv(name, v)
            assert _lib.env_flag(name, not want if v else want) is want, v
    for i, v in enumerate(("yes", "-1", " 1 ", "2", "on")):
        monkeypatch.setenv(name, v)
        if i == 0:
            with pytest.warns(RuntimeWarning, match=f"{name}='yes' is not 0 \\(off\\) or 1 "
                              "\\(on\\): ignored, as if unset"):
                assert _lib.env_flag(name, True) is True
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once per name
            assert _lib.env_flag(name, True) is True and _lib.env_flag(name, False) is False, v
    other = "FCO_TEST_PY_FLAG_PROBE_2"  # another name is said on its own
    monkeypatch.setenv(other, "-1")
    with pytest.warns(RuntimeWarning, match=f"{other}='-1'"):
        assert _lib.env_flag(other, False) is False


@pytest.mark.parametrize("value,direct,warned", [("0", False, False), ("0 ", False, False),
                                                 ("yes", True, True), ("-1", True, True)])
def test_torch_direct_knob(value, direct, warned):
    """FCO_TORCH_DIRECT (read at import) through env_flag: was `!= "0"`, so "0 " left the
    shortcut on and "yes" / "-1" were taken silently."""
    env = dict(os.environ, FCO_TORCH_DIRECT=value)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(fco.__file__))
    code = "import fco.ops._common as c\nprint('direct', c._DIRECT)\n"
    out = subprocess.run([sys.executable, "-W", "always::RuntimeWarning", "-c", code],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"direct {direct}" in out.stdout, out.stdout + out.stderr
    said = f"FCO_TORCH_DIRECT={value!r} is not 0 (off) or 1 (on)" in out.stderr
    assert said == warned, out.stderr
