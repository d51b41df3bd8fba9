"""layout.py — the device-side state of one fco rank (src/cuda/dev.h: fco_dev_rank_t and
fco_async_err_t) as Python constants, so Triton kernels address its fields by byte offset.
Pure Python (no triton, no torch): CPU tests check it against a ctypes mirror of the C structs.

LAYOUT_VERSION must equal what fco_comm_device_state reports (FCO_DEVICE_STATE_VERSION); bump
both whenever dev.h changes. The workspace rule (src/core/internal.h) and the signal values
(src/cuda/prims.cuh) are repeated here because Triton kernels must follow them exactly to share
a communicator with the C kernels. The GPU transports' allocation continues past ws_bytes with
the LL area (src/core/internal.h, rule (3)): only 64-bit LL words {data, flag} of the C kernels
go there, so a Triton kernel must never write at or past ws_bytes.
"""
import ctypes

LAYOUT_VERSION = 1

MAX_GPU_RANKS = 8       # FCO_MAX_GPU_RANKS
SIG_SLOTS = 1024        # FCO_SIG_SLOTS: signal slots per source rank
MAX_SYMMETRIC = 16      # FCO_MAX_SYMMETRIC: rows of a symmetric-buffer table (fco_mem_find)
DEFAULT_TIMEOUT_MS = 30000  # FCO_DEFAULT_TIMEOUT_MS: used when the table's timeout_ns is 0

# fco_op_kind_t (src/core/internal.h): the op recorded in an async error. OP_EXTERNAL (a user's
# own kernel) is FCO_OP_EXTERNAL there; fco_op_name() names it "external kernel".
OP_ALLREDUCE, OP_GEMV_ALLREDUCE, OP_EMBEDDING_ALLTOALL, OP_GEMM_ALLTOALL, OP_EXTERNAL = 1, 2, 3, 4, 5

# fco_result_t codes a kernel may record.
ERR_INVALID_ARGUMENT, ERR_INVALID_USAGE, ERR_TIMEOUT, ERR_INTERNAL = 1, 2, 8, 9

# The epoch guard (src/cuda/dev.h): a kernel starting at epoch >= EPOCH_LIMIT records
# ERR_INVALID_USAGE with slot ERR_SLOT_EPOCH (the signal values hold the epoch in 32 bits).
EPOCH_LIMIT = 0xffffffff - (1 << 24)
ERR_SLOT_EPOCH = -2


class AsyncErr(ctypes.Structure):
    """fco_async_err_t (host-mapped, written by the device: first error wins)."""
    _fields_ = [
        ("code", ctypes.c_int32),
        ("peer", ctypes.c_int32),
        ("op", ctypes.c_int32),
        ("slot", ctypes.c_int32),
        ("want", ctypes.c_uint64),
        ("seen", ctypes.c_uint64),
    ]


class DevRank(ctypes.Structure):
    """fco_dev_rank_t, field for field (a ctypes mirror: its offsets are the C compiler's)."""
    _fields_ = [
        ("peer_data", ctypes.c_void_p * MAX_GPU_RANKS),
        ("peer_sig", ctypes.c_void_p * MAX_GPU_RANKS),
        ("ws_bytes", ctypes.c_uint64),
        ("rank", ctypes.c_int32),
        ("nranks", ctypes.c_int32),
        ("timeout_ns", ctypes.c_uint64),
        ("err", ctypes.c_void_p),
        ("epoch", ctypes.c_uint64),
        ("arrive", ctypes.c_uint32),
        ("lookup_q", ctypes.c_uint32),
    ]


# Byte offsets, written out (the Triton helpers use these as constexprs; test_triton.py checks
# them against the ctypes mirror above).
OFF_PEER_DATA = 0      # void*    [MAX_GPU_RANKS]
OFF_PEER_SIG = 64      # uint64_t*[MAX_GPU_RANKS]
OFF_WS_BYTES = 128     # uint64
OFF_RANK = 136         # int32
OFF_NRANKS = 140       # int32
OFF_TIMEOUT_NS = 144   # uint64
OFF_ERR = 152          # fco_async_err_t*
OFF_EPOCH = 160        # uint64, owned by kernels
OFF_ARRIVE = 168       # uint32, owned by kernels
DEV_RANK_BYTES = 176
HOST_BYTES = OFF_EPOCH  # FCO_DEV_RANK_HOST_BYTES

ERR_OFF_CODE, ERR_OFF_PEER, ERR_OFF_OP, ERR_OFF_SLOT, ERR_OFF_WANT, ERR_OFF_SEEN = 0, 4, 8, 12, 16, 24
ASYNC_ERR_BYTES = 32


def offsets():
    """{field: byte offset} of fco_dev_rank_t as the constants above say."""
    return {"peer_data": OFF_PEER_DATA, "peer_sig": OFF_PEER_SIG, "ws_bytes": OFF_WS_BYTES,
            "rank": OFF_RANK, "nranks": OFF_NRANKS, "timeout_ns": OFF_TIMEOUT_NS,
            "err": OFF_ERR, "epoch": OFF_EPOCH, "arrive": OFF_ARRIVE}


def ws_half_bytes(ws_bytes):
    """fco_ws_half_bytes: bytes of one epoch half of a workspace of ws_bytes."""
    return (int(ws_bytes) // 2) & ~255


def half_offset(ws_bytes, epoch):
    """Byte offset of the half that peers write during the call with epoch `epoch` (e & 1)."""
    return (int(epoch) & 1) * ws_half_bytes(ws_bytes)


def sig_value(epoch, j):
    """The j-th flag a block raises on its slot in the call with epoch e: (e << 32) | (j + 1)."""
    return ((int(epoch) << 32) | (int(j) + 1)) & 0xFFFFFFFFFFFFFFFF


def round_up(x, a):
    return (int(x) + a - 1) // a * a
