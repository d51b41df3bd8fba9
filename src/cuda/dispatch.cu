/* dispatch.cu — op kind → CUDA backend entry point (one line per operator). */
#include <stdio.h>

#include "cuda_ops.h"

extern "C" fco_result_t fco_cuda_run(const fco_gpu_launch_t* l, char* err) {
  switch (l->r[0].op->kind) {
    case FCO_OP_ALLREDUCE: return fco_cuda_allreduce_run(l, err);
    /* gemv_allreduce */
    /* embedding_alltoall */
    /* gemm_alltoall */
    default:
      snprintf(err, FCO_ERRMSG_LEN, "fco_%s is not implemented on GPUs yet",
               fco_op_name(l->r[0].op->kind));
      return FCO_ERR_UNSUPPORTED;
  }
}
