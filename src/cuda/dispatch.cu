/* dispatch.cu — op kind → CUDA backend entry point (one line per operator). */
#include <stdio.h>

#include "cuda_ops.h"

/* A stale error left by earlier work of this thread (the caller's unchecked launch: not sticky)
 * is not this call's: read by a launcher's cudaGetLastError() after a launch that did start, it
 * would report a kernel that runs (and signals its peers, advances the epoch) as not launched,
 * so the caller retries or gives up on a collective its peers complete (gate.cu clears it for
 * the same reason). fco_cuda_restore_device clears it at the end of the call anyway. */
static void clear_stale_error(void) { (void)cudaGetLastError(); }

extern "C" fco_result_t fco_cuda_run(const fco_gpu_launch_t* l, char* err) {
  clear_stale_error();
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
  clear_stale_error();
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
