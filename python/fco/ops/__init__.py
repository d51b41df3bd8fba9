"""fco.ops — one module per operator; importing a module registers its torch ops (fco::<op>).

allreduce           fco::allreduce, fco::allreduce_
gemv_allreduce      fco::gemv_allreduce
embedding_alltoall  fco::embedding_alltoall, fco::embedding_alltoall_backward
gemm_alltoall       fco::gemm_alltoall, fco::gemm_alltoall_backward
"""
from . import allreduce  # noqa: F401
from . import embedding_alltoall  # noqa: F401
from . import gemm_alltoall  # noqa: F401
from . import gemv_allreduce  # noqa: F401
