/*
 * dev.h — the seam between GPU transports and kernels: the per-rank device state ("peer
 * table" + epoch + async error). A transport (nccl or local) allocates one fco_dev_rank_t in
 * device memory per rank and fills the pointer part; kernels never know which transport made
 * it. Plain C layout, included by .c and .cu files.
 *
 * Signals: rank p's signal area is an array sig[src][FCO_SIG_SLOTS] of uint64_t in p's
 * symmetric signal window; a sender s writes peer_sig[p][s * FCO_SIG_SLOTS + slot]. On nccl
 * the gate's words (gate.h) follow the rows.
 * Values only grow: a call uses values derived from the epoch (calls completed on this
 * communicator), so flags never need resetting and CUDA-graph replays stay correct.
 * Slots of sig[src][·] in use (ops share them: every call waits for values of its own epoch):
 *   0 .. blocks − 1        allreduce one-shot, gemv (a block's tile flags), gemm impl 1 (a part's
 *                          flag), embedding (0..63: counters of a source's groups), gemm impl 2
 *                          (slot 0: progress, FCO_GA_LAND_EARLY), fco.triton's parts
 *   64 .. 68               embedding fused: presence, bag counter, 2 queues, symmetric out offset
 *                          ((e << 32) | offset / 16: epoch-tagged as every value, since session 56)
 *   FCO_SIG_SLOTS − 3      gemm impl 0 on nccl: "my device counts were my host's" (pack → land)
 *   FCO_SIG_SLOTS − 2      gemm impl 2 "all pushed" and the impl 0 barriers (gemm, embedding)
 *   FCO_SIG_SLOTS − 1      headers (gemm impls 1 and 2, fco.triton), gemv's FCO_CHECK_ARGS hash
 * Limit: the values put the epoch in the upper 32 bits (sig_value, the embedding counters and
 * queues), so they grow only for 2^32 calls of one communicator — about 6 days at 8000 calls a
 * second; past that a wait could be satisfied by a stale value. Guarded: every kernel that
 * starts at epoch ≥ FCO_EPOCH_LIMIT (2^24 calls before the end, so calls already issued or
 * captured still run correctly) records FCO_ERR_INVALID_USAGE in slot FCO_ERR_SLOT_EPOCH
 * (prims.cuh load_rank_view; fco.triton's epoch_guard), and every later call of the
 * communicator returns it: destroy it and create a new one.
 */
#ifndef FCO_CUDA_DEV_H_
#define FCO_CUDA_DEV_H_

#include <stdint.h>

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FCO_EPOCH_LIMIT (0xffffffffull - (1ull << 24)) /* see the file comment */
#define FCO_ERR_SLOT_EPOCH (-2) /* fco_async_err_t.slot of the epoch-limit record */
#define FCO_SIG_SLOTS 1024 /* signal slots per source rank: >= blocks per rank of any kernel */
#define FCO_SIG_BYTES ((size_t)FCO_MAX_GPU_RANKS * FCO_SIG_SLOTS * sizeof(uint64_t))

/* Written by the device (first error wins), read by the host without synchronising:
 * lives in host-mapped pinned memory. */
typedef struct fco_async_err {
  int32_t code;   /* fco_result_t, 0 = none */
  int32_t peer;   /* peer rank that did not signal / table id, -1 when n/a */
  int32_t op;     /* fco_op_kind_t */
  int32_t slot;   /* signal slot / position */
  uint64_t want;  /* value waited for */
  uint64_t seen;  /* value seen */
} fco_async_err_t;

typedef struct fco_dev_rank {
  /* ---- written by the transport (at init and after every workspace growth) ---- */
  void* peer_data[FCO_MAX_GPU_RANKS];     /* peer p's data workspace as this rank sees it   */
  uint64_t* peer_sig[FCO_MAX_GPU_RANKS];  /* peer p's signal area as this rank sees it      */
  uint64_t ws_bytes;                      /* data workspace bytes per rank                  */
  int32_t rank, nranks;
  uint64_t timeout_ns;                    /* bound of every wait                            */
  fco_async_err_t* err;                   /* host-mapped async error record                 */
  /* ---- owned by the kernels (zeroed at creation, never rewritten by the host) ---- */
  uint64_t epoch;                         /* calls completed                                */
  uint32_t arrive;                        /* blocks of the running kernel that finished     */
  uint32_t lookup_q;                      /* embedding impl 0's tile queue, 0 between launches */
} fco_dev_rank_t;

/* Bytes of the host-written prefix (copy only these when refreshing the table). */
#define FCO_DEV_RANK_HOST_BYTES ((size_t)(&((fco_dev_rank_t*)0)->epoch))

#ifdef __cplusplus
}
#endif
#endif /* FCO_CUDA_DEV_H_ */
