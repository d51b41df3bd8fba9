/*
 * gemm_alltoall.c — fco_gemm_alltoall on the CPU backend: the reference semantics CI checks
 * against. Every impl number runs the same algorithm (the one impl 1 runs on GPUs):
 *
 *   1. validate this rank's counts (and counts_host, when given: the same values), put a header
 *      {valid, E, why, tot[s], recv[s]} into slot [me] of every rank's header area in this
 *      call's half (epoch & 1: the workspace rule of src/core/internal.h), signal slot 0, wait
 *      for every rank's
 *   2. verdict, identical on every rank: every header valid, every recv_rows_host hint equal to
 *      what its source sends (recv_s[r] = tot_r[s]) and Σ_r tot_r[s] ≤ out_rows for every s;
 *      otherwise FCO_ERR_INVALID_ARGUMENT on every rank and nothing written. The GPU impls use
 *      the hints without checking them (impl 0 on nccl sizes its ncclRecv from recv_rows_host:
 *      a wrong hint hangs or garbles NCCL), so the reference, which CI runs, rejects them.
 *   3. Y = A_e·W_e row by row (double accumulation, rounded once to the dtype), each row written
 *      to its destination: own rows into `out`, others into the destination's staging (same
 *      half) at the row they will have in its `out`
 *   4. signal slot 1, wait for every rank's, copy the peers' rows from staging into `out`
 * Placement: on rank s, rows from r start at base_r(s) = Σ_{r'<r} tot_r'[s]; within them
 * expert e's rows at Σ_{e'<e} counts_r[e'][s]. Layout of the workspace: src/ops/gemm_alltoall.h.
 * No "has the peer started" handshake: a peer still in the previous call reads the other half,
 * and none can be two calls behind (each call waits for every peer's slot 0).
 */
#include <stdlib.h>
#include <string.h>

#include "../ops/gemm_alltoall.h"
#include "cpu.h"

static double load(const void* p, size_t i, fco_dtype_t dt) {
  switch (dt) {
    case FCO_F32: return ((const float*)p)[i];
    case FCO_F16: return fco_f16_to_f32(((const uint16_t*)p)[i]);
    default: return fco_bf16_to_f32(((const uint16_t*)p)[i]);
  }
}

static void store(void* p, size_t i, double v, fco_dtype_t dt) {
  switch (dt) {
    case FCO_F32: ((float*)p)[i] = (float)v; break;
    case FCO_F16: ((uint16_t*)p)[i] = fco_f32_to_f16((float)v); break;
    default: ((uint16_t*)p)[i] = fco_f32_to_bf16((float)v); break;
  }
}

/* y[0..N) = a_row · W_e in double. */
static void row_gemm(double* y, double* arow, const fco_gemm_a2a_args_t* a, const char* a_row,
                     const char* we) {
  size_t K = (size_t)a->k, N = (size_t)a->n;
  for (size_t k = 0; k < K; k++) arow[k] = load(a_row, k, a->dtype);
  if (a->w_layout == FCO_W_NK) {
    for (size_t n = 0; n < N; n++) {
      double acc = 0;
      for (size_t k = 0; k < K; k++) acc += arow[k] * load(we, n * K + k, a->dtype);
      y[n] = acc;
    }
  } else {
    for (size_t n = 0; n < N; n++) y[n] = 0;
    for (size_t k = 0; k < K; k++) {
      double x = arow[k];
      if (x == 0) continue;
      for (size_t n = 0; n < N; n++) y[n] += x * load(we, k * N + n, a->dtype);
    }
  }
}

fco_result_t fco_cpu_gemm_alltoall(const fco_cpu_peers_t* t, const fco_op_t* op) {
  const fco_gemm_a2a_args_t* a = (const fco_gemm_a2a_args_t*)op->u.raw;
  const char* what = "fco_gemm_alltoall";
  const int P = t->nranks, me = t->rank, E = a->num_experts;
  const size_t es = fco_dtype_size(a->dtype), N = (size_t)a->n, K = (size_t)a->k;
  const size_t row_bytes = N * es;
  const size_t need = fco_ga_half_need(1, 0, P, a->a_rows, a->out_rows, a->n, es);
  if (fco_ws_half_bytes(t->ws_bytes) < need)
    return fco_set_error(t->comm, FCO_ERR_INTERNAL, "%s: workspace of %zu bytes, %zu needed",
                         what, t->ws_bytes, 2 * need);
  const size_t half = fco_ga_half_off(t->ws_bytes, t->epoch);

  /* 1. Own header. */
  int64_t hdr[4 + 3 * FCO_MAX_RANKS];
  memset(hdr, 0, sizeof hdr);
  int valid = 1;
  int64_t sum = 0;
  for (int e = 0; e < E; e++)
    for (int s = 0; s < P; s++) {
      int32_t c = a->counts[(size_t)e * P + s];
      if (c < 0) valid = 0;
      else hdr[FCO_GA_H_TOT(P, s)] += c;
      sum += c;
    }
  if (sum > a->a_rows) valid = 0;
  int why = valid ? 0 : FCO_GA_WHY_BAD_COUNTS;
  if (valid && a->counts_host &&
      memcmp(a->counts_host, a->counts, (size_t)E * (size_t)P * sizeof(int32_t)) != 0) {
    valid = 0;
    why = FCO_GA_WHY_COUNTS_CHANGED;
  }
  hdr[FCO_GA_H_VALID] = valid;
  hdr[FCO_GA_H_E] = E;
  hdr[FCO_GA_H_WHY] = why;
  for (int s = 0; s < P; s++)
    hdr[FCO_GA_H_RECV(P, s)] = a->recv_rows_host ? a->recv_rows_host[s] : -1;
  size_t hb = 8 * (4 + 3 * (size_t)P);
  for (int k = 0; k < P; k++) {
    int p = (me + k) % P;
    memcpy(fco_ga_hdr(t->peer_data[p], t->ws_bytes, P, t->epoch, me), hdr, hb);
    if (p != me) fco_cpu_signal(t, p, 0);
  }
  for (int p = 0; p < P; p++)
    if (p != me) FCO_CHECK(fco_cpu_wait(t, p, 0, what));

  /* 2. Verdict from every header (the same on every rank). */
  const int64_t* H[FCO_MAX_RANKS];
  for (int r = 0; r < P; r++) H[r] = fco_ga_hdr(t->peer_data[me], t->ws_bytes, P, t->epoch, r);
  for (int r = 0; r < P; r++)
    if (!H[r][FCO_GA_H_VALID]) {
      if (H[r][FCO_GA_H_WHY] == FCO_GA_WHY_COUNTS_CHANGED)
        return fco_set_error(t->comm, FCO_ERR_INVALID_ARGUMENT,
                             "%s: rank %d's counts_host differ from its counts; nothing was "
                             "written", what, r);
      return fco_set_error(t->comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: rank %d's counts are invalid (a negative count, or rows summing "
                           "to more than a_rows %lld); nothing was written",
                           what, r, (long long)a->a_rows);
    }
  for (int s = 0; s < P; s++) /* s's recv_rows_host[r] must be what r sends s */
    for (int r = 0; r < P; r++) {
      const int64_t hint = H[s][FCO_GA_H_RECV(P, r)], sent = H[r][FCO_GA_H_TOT(P, s)];
      if (hint >= 0 && hint != sent)
        return fco_set_error(t->comm, FCO_ERR_INVALID_ARGUMENT,
                             "%s: rank %d's recv_rows_host[%d] = %lld, but rank %d sends it %lld "
                             "rows; nothing was written",
                             what, s, r, (long long)hint, r, (long long)sent);
    }
  int64_t base[FCO_MAX_RANKS]; /* base[s]: where my rows start in s's out */
  for (int s = 0; s < P; s++) {
    int64_t total = 0;
    for (int r = 0; r < P; r++) {
      if (r == me) base[s] = total;
      total += H[r][FCO_GA_H_TOT(P, s)];
    }
    if (total > a->out_rows)
      return fco_set_error(t->comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: rank %d would receive %lld rows, more than out_rows %lld; "
                           "nothing was written",
                           what, s, (long long)total, (long long)a->out_rows);
  }

  /* 3. GEMM, rows straight to their destinations. */
  double* y = (double*)malloc((N + K) * sizeof(double));
  void* yrow = malloc(row_bytes);
  if (!y || !yrow) {
    free(y);
    free(yrow);
    return fco_set_error(t->comm, FCO_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
  }
  const size_t off_staging = half + fco_ga_off_staging(P);
  const char* A = (const char*)a->a;
  int64_t arow = 0;
  int64_t seg_off[FCO_MAX_RANKS] = {0}; /* per destination: rows of earlier experts */
  for (int e = 0; e < E; e++) {
    const char* we = (const char*)a->w + (size_t)e * K * N * es;
    for (int s = 0; s < P; s++) {
      int32_t c = a->counts[(size_t)e * P + s];
      char* dst = s == me ? (char*)a->out : t->peer_data[s] + off_staging;
      for (int32_t i = 0; i < c; i++, arow++) {
        row_gemm(y, y + N, a, A + (size_t)arow * K * es, we);
        for (size_t n = 0; n < N; n++) store(yrow, n, y[n], a->dtype);
        memcpy(dst + (size_t)(base[s] + seg_off[s] + i) * row_bytes, yrow, row_bytes);
      }
      seg_off[s] += c;
    }
  }
  free(y);
  free(yrow);

  /* 4. Peers' rows: wait, then staging → out. */
  for (int k = 1; k < P; k++) fco_cpu_signal(t, (me + k) % P, 1);
  int64_t off = 0;
  for (int r = 0; r < P; r++) {
    int64_t rows = H[r][FCO_GA_H_TOT(P, me)];
    if (r != me) {
      FCO_CHECK(fco_cpu_wait(t, r, 1, what));
      if (rows > 0)
        memcpy((char*)a->out + (size_t)off * row_bytes,
               t->peer_data[me] + off_staging + (size_t)off * row_bytes, (size_t)rows * row_bytes);
    }
    off += rows;
  }
  return FCO_OK;
}
