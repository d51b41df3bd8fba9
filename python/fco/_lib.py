"""_lib.py — ctypes binding of libfco: finding and loading libfco.so, the C types of
include/fco.h, result codes turned into FcoError.

libfco.so is looked for, first found wins:
  1. $FCO_LIB (a path to the .so),
  2. the repository's build/lib/libfco.so (a checkout where `make` ran; python/fco is two levels
     below the repository root),
  3. fco/libfco.so inside the installed package (copied there by `pip install ./python`).
It is loaded on first use, not at import, so `import fco` works (docs, registration of the
torch ops) on a machine where the library is not built yet; the first call then raises
FcoLibraryNotFound naming every place it looked.

Each operator module binds its own C function with `bind(name, argtypes)`, so adding an
operator touches no file but its own.
"""
import ctypes
import operator
import os
import threading
import warnings

# Result codes (FCO_RESULT_MAP in include/fco.h). The strings come from fco_result_string;
# tests/python/test_lib.py checks this list against the library.
RESULT_NAMES = (
    "OK",
    "INVALID_ARGUMENT",
    "INVALID_USAGE",
    "UNSUPPORTED",
    "OUT_OF_MEMORY",
    "CUDA",
    "NCCL",
    "SYSTEM",
    "TIMEOUT",
    "INTERNAL",
)
OK, INVALID_ARGUMENT, INVALID_USAGE, UNSUPPORTED, OUT_OF_MEMORY, CUDA, NCCL, SYSTEM, TIMEOUT, \
    INTERNAL = range(len(RESULT_NAMES))

# fco_dtype_t, fco_transport_t, impl constants.
F32, F16, BF16 = 0, 1, 2
TRANSPORT_AUTO, TRANSPORT_NCCL, TRANSPORT_LOCAL, TRANSPORT_CPU = 0, 1, 2, 3
IMPL_BASELINE, IMPL_AUTO = 0, -1
UNIQUE_ID_BYTES = 256
# The libfco this binding is written for (fco.h's FCO_VERSION_CODE); a loaded library of
# another major.minor is refused at load (patch levels mix).
BINDING_VERSION_CODE = 100  # 0.1.0

comm_t = ctypes.c_void_p
result_t = ctypes.c_int


class Config(ctypes.Structure):
    """fco_config_t. Always made by config(): fco_config_init fills defaults and the ABI size."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("transport", ctypes.c_int32),
        ("timeout_ms", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("max_workspace_bytes", ctypes.c_int64),
        ("debug", ctypes.c_int32),
        ("reserved", ctypes.c_int32 * 7),
    ]


UniqueId = ctypes.c_ubyte * UNIQUE_ID_BYTES


class FcoError(RuntimeError):
    """A libfco call failed. `code` is the fco_result_t, `name` its name ("INVALID_ARGUMENT"),
    `message` fco_last_error's detailed text (or the Python-side check's)."""

    def __init__(self, code, message, func=None):
        self.code = int(code)
        self.name = RESULT_NAMES[code] if 0 <= code < len(RESULT_NAMES) else str(code)
        self.message = message
        self.func = func
        where = f"{func}: " if func and not message.startswith(func) else ""
        super().__init__(f"{where}{message} [FCO_ERR_{self.name}]")

    def __reduce__(self):
        # pickle / copy rebuild from the fields (args holds only the formatted text), so an error
        # raised in a multiprocessing or ProcessPoolExecutor worker reaches the parent as itself
        return (_rebuild_error, (type(self), self.code, self.message, self.func))


def _rebuild_error(cls, code, message, func):
    e = cls.__new__(cls)
    FcoError.__init__(e, code, message, func)
    return e


class FcoLibraryNotFound(FcoError):
    """libfco.so could not be found or loaded (code SYSTEM)."""

    def __init__(self, message):
        FcoError.__init__(self, SYSTEM, message)


def int_arg(v, name, lo, hi, func):
    """v as an int in lo..hi (operator.index: ints, numpy ints; never a float's truncation nor
    a str's parse); FcoError(INVALID_ARGUMENT) naming `name` otherwise."""
    try:
        i = operator.index(v)
    except TypeError:
        i = None
    if i is None or isinstance(v, bool) or not lo <= i <= hi:
        raise FcoError(INVALID_ARGUMENT,
                       f"{name} {v!r} is not an int in {span(lo)}..{span(hi)}", func)
    return i


def span(x):
    """2^k or 2^k-1 as such in messages."""
    for d in (0, 1):
        if x + d > 1 and (x + d) & (x + d - 1) == 0 and x + d >= 1 << 16:
            return f"2^{(x + d).bit_length() - 1}" + ("-1" if d else "")
    return str(x)


_lib = None
_lib_path = None
_lock = threading.Lock()
_flag_warned = set()


def env_flag(name, default):
    """An on/off knob read as libfco reads its own (fco_env_flag, src/core/error.c): "1" True,
    "0" False (trailing blanks ignored, as there: " 1" is not 1), `default` when unset or empty;
    any other value ("yes", "-1", "2") is ignored, as if unset — `default` — with a
    RuntimeWarning once per name for the process. FCO_GA_DIRECT is read by both, so both must
    agree on every value."""
    v = os.environ.get(name, "")
    if not v:
        return default
    s = v.rstrip(" \t\n")
    if s in ("0", "1"):
        return s == "1"
    if name not in _flag_warned:
        _flag_warned.add(name)
        warnings.warn(f"{name}={v!r} is not 0 (off) or 1 (on): ignored, as if unset",
                      RuntimeWarning, stacklevel=2)
    return default


def _candidates():
    env = os.environ.get("FCO_LIB")
    if env:
        return [env]  # an explicit choice is never silently replaced by another build
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    return [os.path.join(repo, "build", "lib", "libfco.so"), os.path.join(here, "libfco.so")]


def _declare(lib):
    """The library's version (first: another major.minor is refused), then prototypes of the
    core API (operators bind their own with bind())."""
    try:
        get_version = lib.fco_get_version
    except AttributeError:
        raise FcoError(INTERNAL, f"{_lib_path} has no fco_get_version: it is older than this "
                       "binding; rebuild it with `make`") from None
    get_version.restype, get_version.argtypes = result_t, [ctypes.POINTER(ctypes.c_int)]
    ver = ctypes.c_int(-1)
    if get_version(ctypes.byref(ver)) != OK or ver.value // 100 != BINDING_VERSION_CODE // 100:
        raise FcoError(INTERNAL, f"{_lib_path} is libfco {version_string(ver.value)} but this "
                       f"binding is for {version_string(BINDING_VERSION_CODE)} (major.minor must "
                       "match): rebuild libfco or reinstall the package")
    c = ctypes
    protos = {
        "fco_config_init": (result_t, [c.POINTER(Config)]),
        "fco_result_string": (c.c_char_p, [c.c_int]),
        "fco_dtype_name": (c.c_char_p, [c.c_int]),
        "fco_dtype_size": (c.c_size_t, [c.c_int]),
        "fco_transport_name": (c.c_char_p, [c.c_int]),
        "fco_last_error": (c.c_char_p, [comm_t]),
        "fco_get_unique_id": (result_t, [c.POINTER(UniqueId)]),
        "fco_comm_init": (result_t, [c.POINTER(comm_t), c.c_int, c.c_int, c.POINTER(UniqueId),
                                     c.POINTER(Config)]),
        "fco_comm_destroy": (result_t, [comm_t]),
        "fco_comm_rank": (result_t, [comm_t, c.POINTER(c.c_int)]),
        "fco_comm_size": (result_t, [comm_t, c.POINTER(c.c_int)]),
        "fco_comm_transport": (result_t, [comm_t, c.POINTER(c.c_int)]),
        "fco_comm_get_async_error": (result_t, [comm_t]),
        "fco_comm_reserve": (result_t, [comm_t, c.c_size_t]),
        "fco_comm_workspace_bytes": (result_t, [comm_t, c.POINTER(c.c_size_t)]),
        "fco_mem_alloc": (result_t, [comm_t, c.c_size_t, c.POINTER(c.c_void_p)]),
        "fco_mem_free": (result_t, [comm_t, c.c_void_p]),
        "fco_mem_find": (result_t, [comm_t, c.c_void_p, c.c_size_t, c.POINTER(c.c_int),
                                    c.POINTER(c.c_size_t), c.POINTER(c.c_void_p)]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    cfg = Config()
    lib.fco_config_init(ctypes.byref(cfg))
    if cfg.size != ctypes.sizeof(Config):
        raise FcoError(INTERNAL, f"fco_config_t is {cfg.size} bytes in {_lib_path} but "
                       f"{ctypes.sizeof(Config)} in fco/_lib.py: the binding is out of date")


def lib():
    """The loaded libfco (loads it on first call)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            if not os.path.isfile(path):
                tried.append(f"{path} (missing)")
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            _lib_path = path
            _declare(handle)
            _lib = handle
            return _lib
        raise FcoLibraryNotFound(
            "libfco.so not found or not loadable; tried: " + "; ".join(tried) +
            ". Build it with `make` at the repository root, or set FCO_LIB=/path/to/libfco.so")


def version_string(code):
    """'major.minor.patch' of an FCO_VERSION_CODE."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def lib_version():
    """The loaded libfco's version, 'major.minor.patch' (fco_get_version)."""
    ver = ctypes.c_int(-1)
    check(lib().fco_get_version(ctypes.byref(ver)))
    return version_string(ver.value)


def lib_path():
    lib()
    return _lib_path


def bind(name, argtypes, restype=result_t):
    """Prototype and return one C function of libfco; FcoError(UNSUPPORTED) when this libfco
    is older than the binding and lacks it."""
    try:
        f = getattr(lib(), name)
    except AttributeError:
        raise FcoError(UNSUPPORTED, f"{name} is not in {_lib_path} (built from an older "
                       "source? rebuild with `make`)") from None
    f.restype, f.argtypes = restype, argtypes
    return f


def result_string(code):
    return lib().fco_result_string(code).decode()


def last_error(comm=None):
    return lib().fco_last_error(comm).decode(errors="replace")


_last_plan = None


def last_plan(comm=None):
    """fco_last_plan(comm): what the last successful op on comm ran, "<op> impl <n>" plus the GPU
    launcher's detail; "" before any op, after a failed one, and for None."""
    global _last_plan
    if _last_plan is None:
        _last_plan = bind("fco_last_plan", [comm_t], ctypes.c_char_p)
    return _last_plan(comm).decode(errors="replace")


def check(result, comm=None, func=None):
    """Raise FcoError carrying fco_last_error(comm) when result is not FCO_OK."""
    if result != OK:
        msg = last_error(comm) or result_string(result)
        raise FcoError(result, msg, func)


def config(**fields):
    """An fco_config_t with defaults from fco_config_init, then the given fields set."""
    cfg = Config()
    check(lib().fco_config_init(ctypes.byref(cfg)), None, "fco_config_init")
    for k, v in fields.items():
        setattr(cfg, k, v)
    return cfg
