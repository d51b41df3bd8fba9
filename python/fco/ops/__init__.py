"""fco.ops — one module per operator; importing a module registers its torch ops (fco::<op>).

Done:  allreduce (fco::allreduce, fco::allreduce_)
TODO:  gemv_allreduce, embedding_alltoall, gemm_alltoall — their modules hold the plan only and
       register nothing until the C operator lands in include/fco.h.
"""
from . import allreduce  # noqa: F401  (registers fco::allreduce, fco::allreduce_)
