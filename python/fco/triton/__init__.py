"""fco.triton — fco's symmetric memory and signals inside Triton kernels (guide: docs/triton.md).

    import fco.triton as ft
    import fco.triton.language as fl          # @triton.jit helpers: rank, peer_ptr, signal, wait...
    st = ft.device_state(comm)                # st.addr: the int64 a kernel takes as `dev`
    ft.ensure_workspace([comm], nbytes)       # collective growth of the symmetric workspace
    from fco.triton.gemv_allreduce import gemv_allreduce_comm
    y = gemv_allreduce_comm(comm, x, w)       # GEMV + AllReduce written with the helpers
    from fco.triton.gemm_alltoall import gemm_alltoall_comm
    out = gemm_alltoall_comm(comm, a, w, counts, out_rows)   # GEMM + All-to-All (MoE combine)

fco.triton.language, .gemv_allreduce and .gemm_alltoall import triton; layout and host (pure
Python, imported here) do not.
"""
from . import host, layout
from .host import DeviceState, blocks_per_rank, device_state, ensure_workspace
from .layout import LAYOUT_VERSION

__all__ = ["DeviceState", "LAYOUT_VERSION", "blocks_per_rank", "device_state",
           "ensure_workspace", "host", "layout"]
