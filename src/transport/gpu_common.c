/*
 * gpu_common.c — per-rank GPU state and hooks shared by the local and nccl transports (see
 * gpu_common.h). Everything here runs on the host; the device state it builds is read by the
 * kernels of src/cuda through fco_dev_rank_t.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_common.h"

#include "../cuda/capture.h"

fco_result_t fco_cuda_fail(fco_comm_t comm, cudaError_t e, const char* call, const char* file,
                           int line) {
  (void)cudaGetLastError(); /* clear the sticky (non-fatal) error so later calls start clean */
  fco_result_t code = e == cudaErrorMemoryAllocation ? FCO_ERR_OUT_OF_MEMORY : FCO_ERR_CUDA;
  fco_log(comm, "%s:%d %s -> %s", file, line, call, cudaGetErrorName(e));
  if (comm)
    return fco_set_error(comm, code, "rank %d (device %d): %s failed: %s (%s)", comm->rank,
                         comm->device, call, cudaGetErrorString(e), cudaGetErrorName(e));
  return fco_set_error(NULL, code, "%s failed: %s (%s)", call, cudaGetErrorString(e),
                       cudaGetErrorName(e));
}

fco_result_t fco_gpu_use_device(fco_comm_t comm, int dev) {
  int n = 0;
  FCO_CUDA_CHECK(comm, cudaGetDeviceCount(&n));
  if (dev < 0 || dev >= n)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "rank %d: CUDA device %d does not exist (%d visible)", comm->rank, dev, n);
  FCO_CUDA_CHECK(comm, cudaSetDevice(dev));
  return FCO_OK;
}

fco_result_t fco_gpu_rank_create(fco_comm_t comm, fco_gpu_rank_t* g) {
  /* Pieces are stored as soon as they exist, so fco_gpu_rank_destroy frees a partial state. */
  fco_dev_rank_t* dev = NULL; /* stored only on success: failed calls leave it unspecified */
  fco_async_err_t* err = NULL;
  FCO_CUDA_CHECK(comm, cudaMalloc((void**)&dev, sizeof *dev));
  g->dev = dev;
  FCO_CUDA_CHECK(comm, cudaMemset(g->dev, 0, sizeof *g->dev)); /* epoch/arrive start at 0 */
  comm->dev_state = dev; /* fco_comm_device_state (Triton and other external kernels) */
  void** sym = NULL; /* the symmetric buffers' peer table (comm->sym_dev), all NULL */
  const size_t sym_bytes = (size_t)FCO_MAX_SYMMETRIC * FCO_MAX_GPU_RANKS * sizeof(void*);
  FCO_CUDA_CHECK(comm, cudaMalloc((void**)&sym, sym_bytes));
  comm->sym_dev = sym;
  FCO_CUDA_CHECK(comm, cudaMemset(sym, 0, sym_bytes));
  /* Portable: with several ranks in one process each device's kernels may see the record. */
  FCO_CUDA_CHECK(comm, cudaHostAlloc((void**)&err, sizeof *err,
                                     cudaHostAllocMapped | cudaHostAllocPortable));
  g->err_host = err;
  memset(g->err_host, 0, sizeof *g->err_host);
  FCO_CUDA_CHECK(comm, cudaHostGetDevicePointer((void**)&g->err_dev, g->err_host, 0));
  memset(&g->table, 0, sizeof g->table);
  g->table.rank = comm->rank;
  g->table.nranks = comm->nranks;
  g->table.timeout_ns = (uint64_t)comm->cfg.timeout_ms * 1000000ull;
  g->table.err = g->err_dev;
  return FCO_OK;
}

fco_result_t fco_gpu_rank_write_table(fco_comm_t comm, fco_gpu_rank_t* g) {
  /* Only the host-written prefix: epoch/arrive belong to the kernels after creation. */
  FCO_CUDA_CHECK(comm, cudaMemcpy(g->dev, &g->table, FCO_DEV_RANK_HOST_BYTES,
                                  cudaMemcpyHostToDevice));
  return FCO_OK;
}

fco_result_t fco_gpu_rank_destroy(fco_comm_t comm, fco_gpu_rank_t* g) {
  fco_result_t r = FCO_OK;
  if (g->err_host) FCO_CUDA_CHECK_KEEP(comm, cudaFreeHost(g->err_host), r);
  g->err_host = NULL;
  g->err_dev = NULL;
  if (g->dev) FCO_CUDA_CHECK_KEEP(comm, cudaFree(g->dev), r);
  g->dev = NULL;
  comm->dev_state = NULL;
  if (comm->sym_dev) FCO_CUDA_CHECK_KEEP(comm, cudaFree(comm->sym_dev), r);
  comm->sym_dev = NULL;
  return r;
}

fco_result_t fco_gpu_sym_row(fco_comm_t comm, int k, void* const* peers, int n) {
  if (!comm->sym_dev) return FCO_OK; /* a partly built or destroyed rank: no table */
  void* row[FCO_MAX_GPU_RANKS] = {0};
  for (int p = 0; p < n && p < FCO_MAX_GPU_RANKS; p++) row[p] = peers ? peers[p] : NULL;
  FCO_CUDA_CHECK(comm, cudaMemcpy(comm->sym_dev + (size_t)k * FCO_MAX_GPU_RANKS, row, sizeof row,
                                  cudaMemcpyHostToDevice));
  return FCO_OK;
}

size_t fco_gpu_ws_target(fco_comm_t comm, const fco_gpu_keep_t* k, size_t bytes) {
  const size_t min = (size_t)2 << 20, pow2_max = (size_t)256 << 20, step = (size_t)64 << 20;
  size_t t = min;
  if (bytes > pow2_max) {
    t = fco_round_up(bytes, step);
  } else {
    while (t < bytes) t <<= 1;
  }
  if (k && k->captured && comm->ws_bytes > 0 && t < 2 * comm->ws_bytes) t = 2 * comm->ws_bytes;
  long long cap = comm->cfg.max_workspace_bytes;
  if (cap > 0 && t > (size_t)cap) t = bytes > (size_t)cap ? bytes : (size_t)cap;
  return t;
}

static const char* op_name(int32_t op) { return fco_op_name((fco_op_kind_t)op); }

fco_result_t fco_gpu_poll_error(fco_comm_t comm, const fco_gpu_rank_t* g) {
  const volatile fco_async_err_t* e = g ? g->err_host : NULL;
  if (!e) return FCO_OK;
  int32_t code = e->code;
  if (code == 0) return FCO_OK;
  /* The device claims the record by publishing code first, then fills the details, writing
   * op (never 0: op kinds start at 1) last after a system fence. Give it a moment (<= 10 ms). */
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (e->op != 0) break;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) > 10000000LL) break;
  }
  int32_t peer = e->peer, op = e->op, slot = e->slot;
  unsigned long long want = e->want, seen = e->seen;
  fco_result_t c = code > 0 && code < FCO_NUM_RESULTS ? (fco_result_t)code : FCO_ERR_INTERNAL;
  if (c == FCO_ERR_TIMEOUT)
    return fco_set_error(comm, c,
                         "rank %d: timed out after %d ms waiting for peer %d (op %s, slot %d, "
                         "want 0x%llx, seen 0x%llx); the communicator is unusable: destroy it",
                         comm->rank, comm->cfg.timeout_ms, peer, op_name(op), slot, want, seen);
  if (c == FCO_ERR_INVALID_USAGE && slot == FCO_ERR_SLOT_EPOCH)
    return fco_set_error(comm, c,
                         "rank %d: the communicator has run %llu calls (op %s started at that "
                         "epoch): its signal values hold the epoch in 32 bits, so calls stop "
                         "2^24 before they would wrap; the calls so far completed correctly: "
                         "destroy the communicator and create a new one",
                         comm->rank, seen, op_name(op));
  /* embedding_alltoall bad data: peer = global table id, slot = kind (1 index, 2 offsets; see
   * src/ops/embedding_alltoall.h), want = position, seen = the bad value. */
  if (c == FCO_ERR_INVALID_ARGUMENT && op == FCO_OP_EMBEDDING_ALLTOALL && (slot == 1 || slot == 2))
    return fco_set_error(comm, c,
                         slot == 1 ? "rank %d: fco_embedding_alltoall: indices[%llu] = %lld is "
                                     "outside table %d (global id): skipped; the communicator is "
                                     "unusable: destroy it"
                                   : "rank %d: fco_embedding_alltoall: offsets[%llu] and the "
                                     "next (= %lld) of table %d (global id) decrease or leave [0, "
                                     "num_indices]: the bag was treated as empty; the "
                                     "communicator is unusable: destroy it",
                         comm->rank, want, (long long)seen, peer);
  return fco_set_error(comm, c,
                       "rank %d: the device reported %s (code %d; op %s, peer/table %d, "
                       "slot/position %d, want 0x%llx, seen 0x%llx); the communicator is "
                       "unusable: destroy it",
                       comm->rank, fco_result_string(c), (int)code, op_name(op), peer, slot, want,
                       seen);
}

void fco_gpu_keep_note(fco_gpu_keep_t* k, void* stream) {
  if (k->captured) return;
  int capturing = 0;
  /* a failed query keeps the workspace too: keeping is always safe */
  k->captured = fco_stream_capture_query((cudaStream_t)stream, &capturing) != cudaSuccess ||
                capturing;
}

fco_result_t fco_gpu_keep_need(fco_comm_t comm, fco_gpu_keep_t* k, int* keep) {
  *keep = k->captured;
  if (!k->captured || k->n < k->cap) return FCO_OK;
  const int cap = k->cap ? 2 * k->cap : 4;
  fco_gpu_kept_ws_t* v = (fco_gpu_kept_ws_t*)realloc(k->v, (size_t)cap * sizeof *v);
  if (!v)
    return fco_set_error(comm, FCO_ERR_OUT_OF_MEMORY,
                         "rank %d: out of host memory keeping a captured call's workspace",
                         comm->rank);
  k->v = v;
  k->cap = cap;
  return FCO_OK;
}

void fco_gpu_keep_add(fco_gpu_keep_t* k, void* ptr, void* win) {
  if (ptr && k->n < k->cap) k->v[k->n++] = (fco_gpu_kept_ws_t){ptr, win};
  k->captured = 0;
}

void fco_gpu_keep_clear(fco_gpu_keep_t* k) {
  free(k->v);
  memset(k, 0, sizeof *k);
}

/* The legacy stream during another stream's global capture counts as capturing (capture.h),
 * so growth is refused with a clear message instead of breaking that capture; a stream whose
 * query fails otherwise does not (the call's own launch reports it). */
static int stream_capturing(cudaStream_t stream) {
  int capturing = 0;
  (void)fco_stream_capture_query(stream, &capturing);
  return capturing;
}

/* Called before a call's bracket too (fco_gemm_alltoall's AUTO asks it when the call is made):
 * the caller's device is given back here. NULL: the legacy stream or the per-thread one
 * (internal.h: what a setup step would break). */
int fco_gpu_capturing(fco_comm_t comm, void* stream) {
  const int caller = fco_device_save(comm->transport);
  if (cudaSetDevice(comm->device) != cudaSuccess) {
    (void)cudaGetLastError();
    fco_device_restore(caller);
    return 0;
  }
  const int c = stream ? stream_capturing((cudaStream_t)stream)
                       : stream_capturing(NULL) || stream_capturing(cudaStreamPerThread);
  fco_device_restore(caller);
  return c;
}

void fco_gpu_mid_call_failed(fco_comm_t comm, fco_result_t code) {
  if (comm->async_error != FCO_OK) return;
  char msg[FCO_ERRMSG_LEN];
  memcpy(msg, comm->last_error, sizeof msg);
  comm->async_error = code;
  comm->async_msg[0] = '\0'; /* fco_set_error below fills it */
  /* the reason first (so a long call message cannot cut it off), then the call's message */
  fco_set_error(comm, code, "the communicator is unusable (destroy it): a call failed after part "
                "of its device work was queued (its epoch did not end on the device; peers may "
                "wait for the rest): %s", msg);
}

void fco_gpu_share_error(fco_comm_t* comms, int n) {
  const char* msg = fco_last_error(NULL);
  for (int i = 0; i < n; i++)
    if (comms[i] && comms[i]->last_error != msg)
      memcpy(comms[i]->last_error, msg, FCO_ERRMSG_LEN);
}
