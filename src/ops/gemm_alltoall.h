/*
 * gemm_alltoall.h — fco_gemm_alltoall's argument record (stored in fco_op_t.u.raw) and the
 * layout of its symmetric workspace, shared by src/ops, src/cpu and src/cuda (plain C).
 *
 * Workspace of one rank (offsets are functions of values every rank agrees on: P, a_rows,
 * out_rows, N, dtype — so every rank grows to the same size):
 *   hdr      2 halves (epoch parity) × P slots × hdr_bytes: slot r holds rank r's header for
 *            this rank (written by r with a put, then signalled). A header says what r sends:
 *              [0] valid (1: r's counts are sane)   [1] E_r   [2] blocks per rank (impl 1)
 *              [3] reserved
 *              [4 + s]        tot[s]    rows r sends to rank s
 *              [4 + P + s]    tiles[s]  impl 1: output tiles r sends to s
 *              [4 + 2P + s]   tstart[s] impl 1: index of r's first tile for s in its tile list
 *            Halves alternate with the epoch: a rank can be one call ahead, never two (every
 *            call waits for every rank's header first).
 *   plan     this rank's private scratch (impl 1 segment table, impl 2 placement)
 *   staging  out_rows × N elements laid out like `out`: rows from peers land here, the receiver
 *            copies them into `out` once they have arrived. Rows a rank sends itself go to `out`
 *            directly. No parity halves: a sender writes only after it has every rank's header
 *            of the same call, which the receiver posts after it finished the previous call.
 *   y        a_rows × N (impls 0 and 2): the local GEMM result before it is pushed
 *   send     a_rows × N (impl 0, nccl): y packed destination-major for ncclSend
 */
#ifndef FCO_OPS_GEMM_ALLTOALL_H_
#define FCO_OPS_GEMM_ALLTOALL_H_

#include <stdint.h>

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The layout helpers are used by kernels too. */
#ifdef __CUDACC__
#define FCO_GA_HD __host__ __device__
#else
#define FCO_GA_HD
#endif

typedef struct {
  const void* a;
  const void* w;
  void* out;
  const int32_t* counts;         /* device [E][P] (host memory on the cpu transport) */
  const int32_t* counts_host;    /* NULL or host [E][P]                               */
  const int32_t* recv_rows_host; /* NULL or host [P]                                  */
  int64_t a_rows, out_rows, k, n;
  int32_t num_experts, w_layout;
  fco_dtype_t dtype;
} fco_gemm_a2a_args_t;

/* Header fields (int64 each). */
#define FCO_GA_H_VALID 0
#define FCO_GA_H_E 1
#define FCO_GA_H_BLOCKS 2
#define FCO_GA_H_TOT(P, s) (4 + (s))
#define FCO_GA_H_TILES(P, s) (4 + (P) + (s))
#define FCO_GA_H_TSTART(P, s) (4 + 2 * (P) + (s))

/* Plan area: impl 1 keeps one 32-byte entry per (destination, expert) segment. */
#define FCO_GA_SEG_BYTES 32

static inline FCO_GA_HD size_t fco_ga_round(size_t x) { return (x + 255) / 256 * 256; }
static inline FCO_GA_HD size_t fco_ga_hdr_bytes(int P) { return (8 * (4 + 3 * (size_t)P) + 127) / 128 * 128; }
static inline FCO_GA_HD size_t fco_ga_hdr_area(int P) { return fco_ga_round(2 * (size_t)P * fco_ga_hdr_bytes(P)); }
static inline FCO_GA_HD size_t fco_ga_plan_bytes(int P) {
  return fco_ga_round((size_t)FCO_GEMM_ALLTOALL_MAX_EXPERTS * (size_t)P * FCO_GA_SEG_BYTES + 1024);
}
static inline FCO_GA_HD size_t fco_ga_off_plan(int P) { return fco_ga_hdr_area(P); }
static inline FCO_GA_HD size_t fco_ga_off_staging(int P) { return fco_ga_off_plan(P) + fco_ga_plan_bytes(P); }
static inline FCO_GA_HD size_t fco_ga_rows_bytes(int64_t rows, int64_t n, size_t es) {
  return fco_ga_round((size_t)rows * (size_t)n * es);
}
static inline FCO_GA_HD size_t fco_ga_off_y(int P, int64_t out_rows, int64_t n, size_t es) {
  return fco_ga_off_staging(P) + fco_ga_rows_bytes(out_rows, n, es);
}
static inline FCO_GA_HD size_t fco_ga_off_send(int P, int64_t a_rows, int64_t out_rows, int64_t n, size_t es) {
  return fco_ga_off_y(P, out_rows, n, es) + fco_ga_rows_bytes(a_rows, n, es);
}
/* Pointer to the header slot of `src` in the workspace `ws` for epoch e. */
static inline FCO_GA_HD int64_t* fco_ga_hdr(void* ws, int P, uint64_t e, int src) {
  return (int64_t*)((char*)ws + ((size_t)(e & 1) * (size_t)P + (size_t)src) * fco_ga_hdr_bytes(P));
}

#ifdef __cplusplus
}
#endif
#endif /* FCO_OPS_GEMM_ALLTOALL_H_ */
