"""fco — fused compute + collective GPU operators as PyTorch ops.

    import torch.distributed as dist, fco
    dist.init_process_group("nccl")            # or "gloo": CPU tensors use the cpu transport
    torch.cuda.set_device(local_rank)
    fco.init()                                 # communicator for the default group (collective)
    y = fco.allreduce(x)                       # torch op fco::allreduce, differentiable

libfco.so is found through $FCO_LIB, the repository's build/lib/, or the package directory
(see fco/_lib.py). Errors raise fco.FcoError carrying libfco's message. Guide: docs/python.md.
"""
from ._comm import Communicator, communicators, init, shutdown
from ._lib import FcoError, FcoLibraryNotFound, lib_path
from .ops import allreduce as _allreduce_mod
from .ops.allreduce import allreduce, allreduce_

__all__ = [
    "Communicator", "FcoError", "FcoLibraryNotFound", "allreduce", "allreduce_",
    "allreduce_workspace_bytes", "communicators", "init", "lib_path", "shutdown",
]
__version__ = "0.1.0"

allreduce_workspace_bytes = _allreduce_mod.workspace_bytes
