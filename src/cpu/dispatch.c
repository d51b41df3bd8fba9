/* dispatch.c — op kind → CPU backend entry point (one line per operator). */
#include "cpu.h"

fco_result_t fco_cpu_run(const fco_cpu_peers_t* t, const fco_op_t* op) {
  switch (op->kind) {
    case FCO_OP_ALLREDUCE: return fco_cpu_allreduce(t, op);
    /* gemv_allreduce */
    case FCO_OP_GEMV_ALLREDUCE: return fco_cpu_gemv_allreduce(t, op);
    /* embedding_alltoall */
    case FCO_OP_EMBEDDING_ALLTOALL: return fco_cpu_embedding_alltoall(t, op);
    /* gemm_alltoall */
    case FCO_OP_GEMM_ALLTOALL: return fco_cpu_gemm_alltoall(t, op);
    default:
      return fco_set_error(t->comm, FCO_ERR_UNSUPPORTED, "fco_%s is not implemented on the cpu "
                           "transport yet", fco_op_name(op->kind));
  }
}
