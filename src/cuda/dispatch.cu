/* dispatch.cu — op kind → CUDA backend entry point (one line per operator). */
#include <stdio.h>

#include "cuda_ops.h"

extern "C" fco_result_t fco_cuda_run(const fco_gpu_launch_t* l, char* err) {
  switch (l->r[0].op->kind) {
    case FCO_OP_ALLREDUCE: return fco_cuda_allreduce_run(l, err);
    /* gemv_allreduce */
    case FCO_OP_GEMV_ALLREDUCE: return fco_cuda_gemv_allreduce_run(l, err);
    /* embedding_alltoall */
    case FCO_OP_EMBEDDING_ALLTOALL: return fco_cuda_embedding_alltoall_run(l, err);
    /* gemm_alltoall */
    case FCO_OP_GEMM_ALLTOALL: return fco_cuda_gemm_alltoall_run(l, err);
    default:
      snprintf(err, FCO_ERRMSG_LEN, "fco_%s is not implemented on GPUs yet",
               fco_op_name(l->r[0].op->kind));
      return FCO_ERR_UNSUPPORTED;
  }
}

/* Work that must follow an op's NCCL calls (see cuda_ops.h); one line per op that has any. */
extern "C" fco_result_t fco_cuda_run_after_group(const fco_gpu_launch_t* l, char* err) {
  switch (l->r[0].op->kind) {
    case FCO_OP_EMBEDDING_ALLTOALL: return fco_cuda_embedding_alltoall_after_group(l, err);
    /* gemm_alltoall */
    case FCO_OP_GEMM_ALLTOALL: return fco_cuda_gemm_alltoall_after_group(l, err);
    default: return FCO_OK;
  }
}

/* Host checks across a batch before the nccl transport queues it (see cuda_ops.h). */
extern "C" fco_result_t fco_cuda_check_batch(const fco_gpu_launch_t* ls, int n, char* err) {
  switch (ls[0].r[0].op->kind) {
    /* gemm_alltoall */
    case FCO_OP_GEMM_ALLTOALL: return fco_cuda_gemm_alltoall_check_batch(ls, n, err);
    default: return FCO_OK;
  }
}
