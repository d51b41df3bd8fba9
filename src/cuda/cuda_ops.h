/*
 * cuda_ops.h — host entry points of the CUDA backend (src/cuda), called by the GPU transports.
 * C-callable; cudaStream_t is passed as void* so .c files need no CUDA headers.
 *
 * A launch covers `num_local` ranks in ONE grid (the local transport passes every virtual rank;
 * the nccl transport passes 1). Each rank gets the same number of blocks; block → (rank, part).
 * Errors: a non-FCO_OK return with the message written into err[FCO_ERRMSG_LEN].
 */
#ifndef FCO_CUDA_OPS_H_
#define FCO_CUDA_OPS_H_

#include "dev.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const void* in;
  void* out;
  fco_dev_rank_t* dev; /* device pointer to this rank's state */
  void* ws;            /* this rank's data workspace (= its dev->peer_data[rank]) as a host-
                        * usable device pointer; needed by fco_cuda_allreduce_copy only */
} fco_cuda_ar_rank_t;

typedef struct {
  int num_local;              /* ranks covered by this grid (1..FCO_MAX_GPU_RANKS)  */
  int nranks;                 /* communicator size                                  */
  size_t count;
  fco_dtype_t dtype;
  void* stream;
  fco_cuda_ar_rank_t r[FCO_MAX_GPU_RANKS];
} fco_cuda_ar_launch_t;

/* ---- generic dispatch: what a GPU transport hands the backend for one op ---------------- */
typedef struct {
  const fco_op_t* op;   /* this rank's op (kind, impl, args)                              */
  fco_dev_rank_t* dev;  /* this rank's device state (peer table, epoch, async error)      */
  void* ws;             /* this rank's data workspace, host-usable device pointer         */
  void* nccl_comm;      /* ncclComm_t on the nccl transport (for baselines); NULL on local */
} fco_gpu_rank_ctx_t;
/* Two ways to the workspace, never mixed on one region: `ws` is baked into a CUDA graph with the
 * work it is given to (impl 0's staging, NCCL send / receive, impl 2's cuBLAS scratch and the
 * kernels that read it); dev->peer_data[rank] (the table, this rank's part included) is read by
 * kernels at run time. A growth rewrites the table and, after a captured call, keeps the old
 * workspace (src/transport/gpu_common.h), so a replay after it stages in the old one and
 * exchanges through the new one. What a peer reads or writes must go through the table on both
 * sides, with the table's ws_bytes for its offsets (halves): a kernel that combined `ws` with
 * the table's halves (gemm's plan, before session 59) reached past the old workspace. */

typedef struct {
  fco_transport_t transport; /* FCO_TRANSPORT_NCCL or FCO_TRANSPORT_LOCAL                   */
  int num_local;             /* ranks in this launch: local = every virtual rank (one grid), nccl = 1 */
  int nranks;                /* communicator size                                           */
  void* stream;
  /* r[0]'s comm->last_plan (FCO_PLAN_LEN bytes), already "<op> impl <n>"; may be NULL. A
   * launcher appends what it chose with fco_plan_append(l->plan, " kernel ...", ...) (NULL-safe,
   * truncates); the local transport copies it to every virtual rank after the launch. */
  char* plan;
  /* Set to 1 by a launcher whose failure came after part of the call's device work was queued
   * (gemm impl 2's exchange: the device epoch then does not end, and a peer may wait for the
   * rest): the transport makes the failure sticky on the launch's comms
   * (fco_gpu_mid_call_failed). May be NULL. */
  int* mid_call;
  fco_gpu_rank_ctx_t r[FCO_MAX_GPU_RANKS];
} fco_gpu_launch_t;

/* Launch ops r[0..num_local) (same kind/impl/shape, checked by the transport) on `stream`, on
 * the current device. Dispatches on the op kind (src/cuda/dispatch.cu). On the nccl transport
 * with several ranks in one thread the transport wraps calls in ncclGroupStart/End, so baselines
 * may call NCCL collectives directly. */
fco_result_t fco_cuda_run(const fco_gpu_launch_t* l, char* err);
/* Called by the nccl transport for every op of a batch after its NCCL group ended (n > 1 ranks
 * in one thread defer every NCCL call to that point): work that must follow an op's NCCL calls
 * on the stream (embedding_alltoall impl 0: the permute after the send/recv). FCO_OK and no-op
 * for kinds that need nothing. */
fco_result_t fco_cuda_run_after_group(const fco_gpu_launch_t* l, char* err);
/* Called by the nccl transport before it queues anything of a batch of n > 1 ranks that one
 * thread drives (ls[i]: rank i's launch): host-side refusals that look at every rank, so that no
 * rank's NCCL send / receive starts without its peers' (a group cancelled mid-way can leave
 * NCCL's connections half set up: audit56 R1). FCO_OK for kinds that need nothing. */
fco_result_t fco_cuda_check_batch(const fco_gpu_launch_t* ls, int n, char* err);

/* Per-op entry points behind fco_cuda_run (one line each). */
fco_result_t fco_cuda_allreduce_run(const fco_gpu_launch_t* l, char* err);
/* gemv_allreduce */
fco_result_t fco_cuda_gemv_allreduce_run(const fco_gpu_launch_t* l, char* err);
/* Its impls 0 (fco_ar = 0: NCCL's / the local copy all-reduce) and 3 (fco's one-shot): cuBLAS,
 * then the all-reduce of y (gemv_allreduce_blas.cu). */
fco_result_t fco_cuda_gemv_allreduce_baseline(const fco_gpu_launch_t* l, int fco_ar, char* err);
/* embedding_alltoall */
fco_result_t fco_cuda_embedding_alltoall_run(const fco_gpu_launch_t* l, char* err);
fco_result_t fco_cuda_embedding_alltoall_after_group(const fco_gpu_launch_t* l, char* err);
/* gemm_alltoall */
fco_result_t fco_cuda_gemm_alltoall_run(const fco_gpu_launch_t* l, char* err);
fco_result_t fco_cuda_gemm_alltoall_check_batch(const fco_gpu_launch_t* ls, int n, char* err);
fco_result_t fco_cuda_gemm_alltoall_after_group(const fco_gpu_launch_t* l, char* err);

/* impl 1: one-shot over the peer table (needs 2·P·roundup(count·esize,256) workspace). */
fco_result_t fco_cuda_allreduce_oneshot(const fco_cuda_ar_launch_t* l, char* err);
/* local transport impl 0: copy each rank's input into its workspace, then one kernel reduces
 * every rank's slot into every rank's output (needs roundup(count·esize,256) workspace). */
fco_result_t fco_cuda_allreduce_copy(const fco_cuda_ar_launch_t* l, char* err);

/* Device count without failing when there is no driver (0 then). */
int fco_cuda_device_count(void);
/* The calling thread's current device (-1 when cudaGetDevice fails), and making dev current
 * again when it differs and is in use (its primary context active; dev < 0: nothing); neither
 * leaves a sticky error. */
int fco_cuda_current_device(void);
void fco_cuda_restore_device(int dev);

#ifdef __cplusplus
}
#endif
#endif /* FCO_CUDA_OPS_H_ */
