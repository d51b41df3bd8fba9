/*
 * gemv_allreduce.c — fco_gemv_allreduce on the CPU backend: the reference semantics CI checks.
 * Every impl number runs this same code (the fused GPU variants differ only in how they move
 * tiles, not in what they compute).
 *
 * Each rank computes its fp32 partial p_r[m][n] = Σ_k x_r[m][k] · W_r[n][k] (products and sums
 * in fp32, k ascending), writes it into slot [me] of ITS OWN workspace, signals every peer,
 * waits for all, then sums every rank's slot in rank order 0..P-1 in fp32, adds the bias once
 * (after the sum, as the GPU kernels do) and rounds to the dtype. Every rank therefore gets
 * bit-identical y.
 *
 * Layout of rank p's workspace (S = roundup(M·N·4, 256), h = epoch parity, W = workspace bytes):
 *   [h][src] at h · H + src · S        one fp32 [M][N] slot per source rank, H = W/2 (rounded
 *                                      down to 256), so two halves whatever the call's size
 * The halves alternate with the epoch: a fast rank's next call never overwrites a slot that a
 * slow rank is still reading (a rank reaches call e+2 only after every rank finished e), and
 * since H does not depend on the shape, neither does a next call of another shape or op.
 */
#include <stdlib.h>

#include "cpu.h"
#include "../ops/gemv_allreduce.h"

static float load(const void* p, size_t i, fco_dtype_t dt) {
  switch (dt) {
    case FCO_F32: return ((const float*)p)[i];
    case FCO_F16: return fco_f16_to_f32(((const uint16_t*)p)[i]);
    default: return fco_bf16_to_f32(((const uint16_t*)p)[i]);
  }
}

static void store(void* p, size_t i, float v, fco_dtype_t dt) {
  switch (dt) {
    case FCO_F32: ((float*)p)[i] = v; break;
    case FCO_F16: ((uint16_t*)p)[i] = fco_f32_to_f16(v); break;
    default: ((uint16_t*)p)[i] = fco_f32_to_bf16(v); break;
  }
}

/* part[m][n] = Σ_k x[m][k] · w[n][k] in fp32. x rows are converted once (K floats each). */
static fco_result_t partial(const fco_cpu_peers_t* t, const fco_gemv_ar_args_t* a, float* part) {
  size_t M = a->M, N = a->N, K = a->K;
  float* xf = (float*)malloc(M * K * sizeof(float));
  float* wf = (float*)malloc(K * sizeof(float));
  if (!xf || !wf) {
    free(xf);
    free(wf);
    return fco_set_error(t->comm, FCO_ERR_OUT_OF_MEMORY,
                         "fco_gemv_allreduce: %zu bytes of host scratch", (M + 1) * K * 4);
  }
  for (size_t i = 0; i < M * K; i++) xf[i] = load(a->x, i, a->dtype);
  for (size_t n = 0; n < N; n++) {
    for (size_t k = 0; k < K; k++) wf[k] = load(a->w, n * K + k, a->dtype);
    for (size_t m = 0; m < M; m++) {
      const float* xr = xf + m * K;
      float s = 0.0f;
      for (size_t k = 0; k < K; k++) s += xr[k] * wf[k];
      part[m * N + n] = s;
    }
  }
  free(xf);
  free(wf);
  return FCO_OK;
}

fco_result_t fco_cpu_gemv_allreduce(const fco_cpu_peers_t* t, const fco_op_t* op) {
  fco_gemv_ar_args_t a;
  memcpy(&a, op->u.raw, sizeof a);
  int P = t->nranks, me = t->rank;
  size_t S = fco_round_up(a.M * a.N * 4, 256);
  /* Halves at half the workspace (not at this call's size), so a call of another shape or op
   * never overlaps the half a slow rank may still be reading. */
  size_t half = (size_t)(t->epoch & 1) * (t->ws_bytes / 2 / 256 * 256);
  if (2 * (size_t)P * S > t->ws_bytes)
    return fco_set_error(t->comm, FCO_ERR_INTERNAL,
                         "fco_gemv_allreduce: workspace of %zu bytes per rank, %zu needed",
                         t->ws_bytes, 2 * (size_t)P * S);
  if (op->impl < 0 || op->impl >= FCO_GEMV_ALLREDUCE_NUM_IMPLS)
    return fco_set_error(t->comm, FCO_ERR_UNSUPPORTED,
                         "fco_gemv_allreduce: impl %d does not exist (0..%d)", op->impl,
                         FCO_GEMV_ALLREDUCE_NUM_IMPLS - 1);
  float* mine = (float*)(t->peer_data[me] + half + (size_t)me * S);
  FCO_CHECK(partial(t, &a, mine));
  for (int p = 0; p < P; p++)
    if (p != me) fco_cpu_signal(t, p, 0);
  const float* src[FCO_MAX_RANKS];
  for (int p = 0; p < P; p++) {
    if (p != me) FCO_CHECK(fco_cpu_wait(t, p, 0, "fco_gemv_allreduce"));
    src[p] = (const float*)(t->peer_data[p] + half + (size_t)p * S);
  }
  for (size_t i = 0; i < a.M * a.N; i++) {
    float s = src[0][i];
    for (int p = 1; p < P; p++) s += src[p][i];
    if (a.bias) s += load(a.bias, i % a.N, a.dtype);
    store(a.y, i, s, a.dtype);
  }
  return FCO_OK;
}
