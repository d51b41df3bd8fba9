"""fco — fused compute + collective GPU operators as PyTorch ops.

    import torch.distributed as dist, fco
    dist.init_process_group("nccl")            # or "gloo": CPU tensors use the cpu transport
    torch.cuda.set_device(local_rank)
    fco.init()                                 # communicator for the default group (collective)
    y = fco.allreduce(x)                       # torch op fco::allreduce, differentiable
    y = fco.gemv_allreduce(x, w_down)          # row-parallel linear (TP decode)
    out = fco.embedding_alltoall(...)          # DLRM model-parallel tables → sample owners
    out = fco.gemm_alltoall(a, w, counts)      # MoE expert GEMM → back to the token owners
    buf = fco.empty_symmetric(shape, dtype)    # peers store outputs straight into it (out=buf)

libfco.so is found through $FCO_LIB, the repository's build/lib/, or the package directory
(see fco/_lib.py). Errors raise fco.FcoError carrying libfco's message. Guide: docs/python.md.
"""
from ._comm import Communicator, communicators, empty_symmetric, init, last_plan, shutdown
from ._lib import FcoError, FcoLibraryNotFound, lib_path, lib_version
from .ops import allreduce as _allreduce_mod
from .ops import embedding_alltoall as _embedding_alltoall_mod
from .ops import gemm_alltoall as _gemm_alltoall_mod
from .ops import gemv_allreduce as _gemv_allreduce_mod
from .ops.allreduce import allreduce, allreduce_
from .ops.embedding_alltoall import embedding_alltoall
from .ops.gemm_alltoall import gemm_alltoall
from .ops.gemv_allreduce import gemv_allreduce

__all__ = [
    "Communicator", "FcoError", "FcoLibraryNotFound", "allreduce", "allreduce_",
    "allreduce_workspace_bytes", "communicators", "embedding_alltoall", "empty_symmetric",
    "embedding_alltoall_workspace_bytes", "gemm_alltoall", "gemm_alltoall_workspace_bytes",
    "gemv_allreduce", "gemv_allreduce_workspace_bytes", "init", "last_plan", "lib_path",
    "lib_version",
    "shutdown",
]
__version__ = "0.1.0"

allreduce_workspace_bytes = _allreduce_mod.workspace_bytes
gemv_allreduce_workspace_bytes = _gemv_allreduce_mod.workspace_bytes
embedding_alltoall_workspace_bytes = _embedding_alltoall_mod.workspace_bytes
gemm_alltoall_workspace_bytes = _gemm_alltoall_mod.workspace_bytes
