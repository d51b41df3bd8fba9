/*
 * gemv_fixture.h — the fixture of the fco_gemv_allreduce tests (test_gemv_allreduce.c: the
 * operator's semantics; test_gemv_allreduce_kernels.c / _group.c: the kernel variants): per-rank buffers,
 * fresh inputs, one call issued for every rank, the float64 reference check, back-to-back calls,
 * and on GPU transports the CUDA-graph capture. Every test program links it (tests/common); only
 * those two include this header.
 */
#ifndef FCO_GEMV_FIXTURE_H_
#define FCO_GEMV_FIXTURE_H_

#include "test.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define GEMV_MAX_M 64
#define GEMV_MAX_N 8192  /* y and bias (several groups a block: the two-phase grouped tests) */
#define GEMV_MAX_KT 4608 /* K before the split (the grouped tiles' tests; the sweeps stay ≤ 1000) */
/* W's elements a rank, N · K_r: room for N 1000 at K_r up to GEMV_MAX_KT (gemv_prepare checks) */
#define GEMV_MAX_NK ((size_t)1000 * GEMV_MAX_KT)

extern const fco_dtype_t gemv_dtypes[3]; /* f32, f16, bf16 */

typedef struct {
  fco_transport_t t;
  int P;
  void *x[T_MAX_RANKS], *w[T_MAX_RANKS], *bias[T_MAX_RANKS], *y[T_MAX_RANKS];
  /* host copies of the inputs, as floats rounded to the dtype */
  float *hx[T_MAX_RANKS], *hw[T_MAX_RANKS], *hb;
  unsigned char* hy; /* one rank's y + guard */
  unsigned char* hy0;
  size_t M, N, K[T_MAX_RANKS];
  fco_dtype_t dt;
  int has_bias;
} gemv_bufs_t;

/* Bytes of one rank's y buffer (GEMV_MAX_M × GEMV_MAX_N f32 + guard). */
size_t gemv_y_bytes(void);
/* Every rank's x, W, bias, y (room for the largest shape) and the host copies. */
void gemv_bufs_alloc(gemv_bufs_t* b, const t_world_t* w);
void gemv_bufs_free(gemv_bufs_t* b);
/* For P = 1..max: a world of P ranks with these buffers, body(w, b, arg), both freed, then
 * "P=<P>: ok (<ms> ms)" on stdout. */
void gemv_each_world(fco_transport_t t, int max,
                     void (*body)(const t_world_t* w, gemv_bufs_t* b, void* arg), void* arg);

/* The largest K ≤ limit (gemv_vec_kt: 1000) whose split (K split unevenly: rank r gets about
 * (r+1)/Σ of it) gives every rank a multiple of 8: K_r · esize % 16 == 0 in every dtype, so
 * every rank takes the vector path (and the PDL prefetch). */
size_t gemv_vec_kt_le(int P, size_t limit);
size_t gemv_vec_kt(int P);

/* Fresh inputs (uniform in [-1, 1), rounded to the dtype; K split unevenly across the ranks),
 * poisoned outputs (and their guards). */
void gemv_prepare(gemv_bufs_t* b, size_t M, size_t N, size_t kt, fco_dtype_t dt, int has_bias,
                  uint64_t seed);
/* Every rank's call in one fco_group_start/end; the first failure. streams: per rank, or NULL. */
fco_result_t gemv_issue(const t_world_t* w, const gemv_bufs_t* b, int impl, void* const* streams);
/* Rank r's call alone (outside a group: a thread per rank). */
fco_result_t gemv_issue_rank(const t_world_t* w, const gemv_bufs_t* b, int r, int impl,
                             void* stream);
/* Compare every rank's y with the float64 reference; returns wrong elements (prints a few). */
size_t gemv_check(const t_world_t* w, gemv_bufs_t* b);
/* Prepare, issue, sync, no async error, gemv_check() == 0. */
void gemv_one_call(const t_world_t* w, gemv_bufs_t* b, size_t M, size_t N, size_t kt,
                   fco_dtype_t dt, int has_bias, int impl);
/* Back-to-back calls, no sync between, impls alternating; inputs fixed, so the last y must
 * be right (a stale epoch or an overwritten half shows as a wrong value or a timeout). */
void gemv_back_to_back(const t_world_t* w, gemv_bufs_t* b, int calls);

#ifdef FCO_HAVE_CUDA
/* Streams for a capture: one per rank (nccl) or one (local), every rank's stream forked from
 * rank 0's inside the capture and joined back at its end. */
typedef struct {
  int n, nstreams;
  fco_transport_t t;
  cudaStream_t st[T_MAX_RANKS];
  void* sp[T_MAX_RANKS]; /* per rank, for gemv_issue() */
  cudaEvent_t fork, join[T_MAX_RANKS];
  cudaGraph_t g;
  cudaGraphExec_t ge;
} gemv_capture_t;

void gemv_capture_init(gemv_capture_t* c, const t_world_t* w);
void gemv_capture_sync(const gemv_capture_t* c);
void gemv_capture_begin(gemv_capture_t* c);
void gemv_capture_end(gemv_capture_t* c);
void gemv_capture_replay(gemv_capture_t* c, int times);
void gemv_capture_free(gemv_capture_t* c);

/* Capture one call of `impl` into a CUDA graph (every rank's stream forked from rank 0's),
 * replay 100 times; poison y before the last replay, then check. */
void gemv_graph(const t_world_t* w, gemv_bufs_t* b, int impl); /* M 16, N 1000, K 1000, bf16 */
void gemv_graph_shape(const t_world_t* w, gemv_bufs_t* b, int impl, size_t M, size_t N, size_t kt,
                      fco_dtype_t dt);
#endif

#endif /* FCO_GEMV_FIXTURE_H_ */
