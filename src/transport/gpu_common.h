/*
 * gpu_common.h — what the two GPU transports (local.c, nccl.cu) share: CUDA error mapping,
 * the per-rank device state every kernel receives (fco_dev_rank_t + host-mapped async error
 * record), the workspace growth policy, the poll_error / capturing hooks and group checks.
 * Plain C with the CUDA runtime API (no kernels); compiled by gcc (CUDA_C_SRC in the Makefile)
 * and included by nccl.cu.
 */
#ifndef FCO_TRANSPORT_GPU_COMMON_H_
#define FCO_TRANSPORT_GPU_COMMON_H_

#include <cuda_runtime_api.h>

#include "../core/internal.h"
#include "../cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record a failed CUDA call on comm: FCO_ERR_CUDA (FCO_ERR_OUT_OF_MEMORY for allocation
 * failures) with cudaGetErrorString, after clearing the sticky error with cudaGetLastError so
 * later calls do not report it again. Returns the code. */
fco_result_t fco_cuda_fail(fco_comm_t comm, cudaError_t e, const char* call, const char* file,
                           int line);

/* As FCO_CHECK, for CUDA runtime calls. `comm` receives the message (NULL: this thread). */
#define FCO_CUDA_CHECK(comm, call)                                                        \
  do {                                                                                    \
    cudaError_t fco_e_ = (call);                                                          \
    if (fco_e_ != cudaSuccess) return fco_cuda_fail((comm), fco_e_, #call, __FILE__, __LINE__); \
  } while (0)

#define FCO_CUDA_CHECK_GOTO(comm, call, res, label)                                       \
  do {                                                                                    \
    cudaError_t fco_e_ = (call);                                                          \
    if (fco_e_ != cudaSuccess) {                                                          \
      (res) = fco_cuda_fail((comm), fco_e_, #call, __FILE__, __LINE__);                   \
      goto label;                                                                         \
    }                                                                                     \
  } while (0)

/* For teardown: record the first failure in `res` (message included), clear the rest, go on. */
#define FCO_CUDA_CHECK_KEEP(comm, call, res)                                              \
  do {                                                                                    \
    cudaError_t fco_e_ = (call);                                                          \
    if (fco_e_ != cudaSuccess) {                                                          \
      if ((res) == FCO_OK) (res) = fco_cuda_fail((comm), fco_e_, #call, __FILE__, __LINE__); \
      else (void)cudaGetLastError();                                                      \
    }                                                                                     \
  } while (0)

/* Workspaces kept for CUDA graphs. A call captured into a graph bakes this rank's workspace
 * address into its host-launched work (impl 0's staging copies, NCCL send / receive, cuBLAS
 * into scratch); kernels address the workspace through the table (fco_dev_rank_t.peer_data,
 * their own part included), which a growth rewrites. So a growth after such a capture does not
 * free the old workspace but keeps it, with its window on nccl, until fco_comm_destroy: a graph
 * captured before a growth and replayed after it then stages in the old workspace and exchanges
 * through the new one, on every rank alike, instead of touching freed memory. A workspace no
 * captured call used is freed at the growth as before. */
typedef struct {
  void* ptr;    /* the allocation (data workspace + LL area)                           */
  void* win;    /* nccl: its ncclWindow_t; NULL on local                               */
} fco_gpu_kept_ws_t;

typedef struct {
  int captured;          /* a call captured into a graph used the current workspace   */
  int n, cap;
  fco_gpu_kept_ws_t* v;  /* kept workspaces, oldest first                             */
} fco_gpu_keep_t;

/* Per-rank device state, identical on both transports. */
typedef struct {
  fco_dev_rank_t* dev;        /* device memory; epoch/arrive owned by kernels once zeroed   */
  fco_async_err_t* err_host;  /* host-mapped pinned record, read by poll_error              */
  fco_async_err_t* err_dev;   /* the same record as the device sees it                      */
  fco_dev_rank_t table;       /* host copy of the host-written prefix of *dev               */
  fco_gpu_keep_t keep;        /* old workspaces a graph may still use (above)               */
} fco_gpu_rank_t;

/* cudaSetDevice(dev) after checking it exists (FCO_ERR_INVALID_ARGUMENT naming it if not). */
fco_result_t fco_gpu_use_device(fco_comm_t comm, int dev);
/* Allocate and zero g->dev and the async error record on the current device (comm->device);
 * fills the rank/nranks/timeout/err part of g->table. Does not write the table yet. */
fco_result_t fco_gpu_rank_create(fco_comm_t comm, fco_gpu_rank_t* g);
/* Copy the host-written prefix (FCO_DEV_RANK_HOST_BYTES) of g->table to g->dev, ordered on the
 * legacy default stream (so a table-filling kernel launched after it on stream 0 sees it).
 * The caller synchronises the device before any user stream may use the table. */
fco_result_t fco_gpu_rank_write_table(fco_comm_t comm, fco_gpu_rank_t* g);
/* Free what fco_gpu_rank_create made (tolerates a partly built or zeroed g); the caller has
 * set the device and synchronised it. Returns the first failure, frees everything anyway. */
fco_result_t fco_gpu_rank_destroy(fco_comm_t comm, fco_gpu_rank_t* g);

/* Row k of comm->sym_dev (allocated by fco_gpu_rank_create, freed by fco_gpu_rank_destroy):
 * peers[0..n) (NULL peers: the row cleared). Synchronous copy; nothing without a table. */
fco_result_t fco_gpu_sym_row(fco_comm_t comm, int k, void* const* peers, int n);

/* Data workspace bytes to allocate for a need of `bytes`: powers of two up to 256 MiB (so a
 * slowly growing size regrows O(log) times), then multiples of 64 MiB; at least 2 MiB (the
 * VMM granularity); and at least twice the current workspace (comm->ws_bytes) when `k` says a
 * captured call used it: it is kept until destroy, so geometric steps bound what growths
 * after captures keep to about the final size (64 MiB steps kept one workspace per step).
 * Never above cfg.max_workspace_bytes when that is set (but >= bytes). Ranks may differ (a
 * rank's captures are its own): the transports grow every rank to the largest (local: over
 * its virtual ranks; nccl: through the gate, src/cuda/gate.h). */
size_t fco_gpu_ws_target(fco_comm_t comm, const fco_gpu_keep_t* k, size_t bytes);

/* Before a call's launch (its device current): mark the current workspace as captured when
 * `stream` is being captured into a CUDA graph (one query while unmarked; an unanswerable
 * query, the legacy stream during a global capture, counts as captured). */
void fco_gpu_keep_note(fco_gpu_keep_t* k, void* stream);
/* At a growth, for a workspace about to be replaced: 1 if it must be kept (a captured call used
 * it), after making room for it in the list (FCO_ERR_OUT_OF_MEMORY, nothing changed, when the
 * host is out of memory); 0 if it may be freed. fco_gpu_keep_add then stores it (cannot fail)
 * and clears the mark for the new workspace. */
fco_result_t fco_gpu_keep_need(fco_comm_t comm, fco_gpu_keep_t* k, int* keep);
void fco_gpu_keep_add(fco_gpu_keep_t* k, void* ptr, void* win);
/* The list itself, once the transport released every kept workspace (at destroy). */
void fco_gpu_keep_clear(fco_gpu_keep_t* k);

/* The transport hooks both GPU transports implement identically. */
fco_result_t fco_gpu_poll_error(fco_comm_t comm, const fco_gpu_rank_t* g);
int fco_gpu_capturing(fco_comm_t comm, void* stream);

/* A launch that failed after part of the call's device work was queued (fco_gpu_launch_t's
 * mid_call): comm keeps the error (every later call returns it), its message the call's own
 * (comm->last_error, set just before) with why. */
void fco_gpu_mid_call_failed(fco_comm_t comm, fco_result_t code);

/* Copy this thread's last error message to every (non-NULL) comm of a failed collective
 * setup step, so fco_last_error gives it whichever rank the caller asks. */
void fco_gpu_share_error(fco_comm_t* comms, int n);

#ifdef __cplusplus
}
#endif
#endif /* FCO_TRANSPORT_GPU_COMMON_H_ */
