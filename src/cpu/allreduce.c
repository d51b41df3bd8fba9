/*
 * allreduce.c — fco_allreduce on the CPU backend: the reference semantics CI checks against.
 *
 * Layout of rank p's workspace (S = roundup(count · esize, 256), h = epoch parity):
 *   [h][src] at (h · P + src) · S      one slot per source rank, two halves
 * The halves alternate with the epoch, so a fast rank's next call never overwrites a slot a
 * slow rank is still reducing (a rank reaches call e+2 only after every rank finished e).
 *
 * impl 0 "copy":    each rank copies its input into slot [me] of ITS OWN workspace, signals
 *                   every peer (slot 0), waits for all, then sums every rank's own slot.
 * impl 1 "oneshot": each rank pushes its input, chunk by chunk, into slot [me] of EVERY peer's
 *                   workspace and signals each chunk (slot = chunk index); then it reduces chunk
 *                   by chunk as they arrive, its own part read from its input.
 * Both sum in fp32 in rank order 0..P-1 starting from rank 0's value, so results are
 * bit-identical across impls and ranks. in == out works: the input is copied / pushed
 * before any of `out` is written, and a chunk of `out` is written only after its inputs are read.
 */
#include "cpu.h"

#define BLOCK 1024                 /* elements reduced per pass through an fp32 accumulator */
#define MIN_CHUNK_BYTES (32u << 10) /* oneshot: fewer, larger chunks below this */

/* acc[i] (= or +=) src[i] in fp32. */
static void accumulate(float* acc, const void* src, size_t n, fco_dtype_t dt, int first) {
  switch (dt) {
    case FCO_F32: {
      const float* s = (const float*)src;
      if (first)
        for (size_t i = 0; i < n; i++) acc[i] = s[i];
      else
        for (size_t i = 0; i < n; i++) acc[i] += s[i];
      break;
    }
    case FCO_F16: {
      const uint16_t* s = (const uint16_t*)src;
      if (first)
        for (size_t i = 0; i < n; i++) acc[i] = fco_f16_to_f32(s[i]);
      else
        for (size_t i = 0; i < n; i++) acc[i] += fco_f16_to_f32(s[i]);
      break;
    }
    default: {
      const uint16_t* s = (const uint16_t*)src;
      if (first)
        for (size_t i = 0; i < n; i++) acc[i] = fco_bf16_to_f32(s[i]);
      else
        for (size_t i = 0; i < n; i++) acc[i] += fco_bf16_to_f32(s[i]);
      break;
    }
  }
}

static void store(void* dst, const float* acc, size_t n, fco_dtype_t dt) {
  switch (dt) {
    case FCO_F32: memcpy(dst, acc, n * sizeof(float)); break;
    case FCO_F16: {
      uint16_t* d = (uint16_t*)dst;
      for (size_t i = 0; i < n; i++) d[i] = fco_f32_to_f16(acc[i]);
      break;
    }
    default: {
      uint16_t* d = (uint16_t*)dst;
      for (size_t i = 0; i < n; i++) d[i] = fco_f32_to_bf16(acc[i]);
      break;
    }
  }
}

/* out[0..n) = Σ_p src[p][0..n) in rank order (elements of size esize). */
static void reduce(void* out, const char* const* src, int P, size_t n, fco_dtype_t dt,
                   size_t esize) {
  float acc[BLOCK];
  for (size_t b = 0; b < n; b += BLOCK) {
    size_t m = n - b < BLOCK ? n - b : BLOCK;
    for (int p = 0; p < P; p++) accumulate(acc, src[p] + b * esize, m, dt, p == 0);
    store((char*)out + b * esize, acc, m, dt);
  }
}

static fco_result_t allreduce_copy(const fco_cpu_peers_t* t, const fco_allreduce_args_t* a,
                                   size_t esize, size_t slot_bytes, size_t half) {
  int P = t->nranks, me = t->rank;
  memcpy(t->peer_data[me] + half + (size_t)me * slot_bytes, a->in, a->count * esize);
  for (int p = 0; p < P; p++)
    if (p != me) fco_cpu_signal(t, p, 0);
  const char* src[FCO_MAX_RANKS];
  for (int p = 0; p < P; p++) {
    if (p != me) FCO_CHECK(fco_cpu_wait(t, p, 0, "fco_allreduce (copy)"));
    src[p] = t->peer_data[p] + half + (size_t)p * slot_bytes;
  }
  reduce(a->out, src, P, a->count, a->dtype, esize);
  return FCO_OK;
}

static fco_result_t allreduce_oneshot(const fco_cpu_peers_t* t, const fco_allreduce_args_t* a,
                                      size_t esize, size_t slot_bytes, size_t half) {
  int P = t->nranks, me = t->rank;
  size_t count = a->count;
  size_t chunk = (count + FCO_CPU_SIG_SLOTS - 1) / FCO_CPU_SIG_SLOTS;
  if (chunk * esize < MIN_CHUNK_BYTES) chunk = MIN_CHUNK_BYTES / esize;
  chunk = fco_round_up(chunk, 64); /* whole cache lines */
  int nchunks = (int)((count + chunk - 1) / chunk); /* <= FCO_CPU_SIG_SLOTS */
  const char* in = (const char*)a->in;
  /* Push everything first (peers start reducing sooner; `in` is fully read before `out` is
   * written, which makes in == out safe). Start at me+1 so ranks do not all hit rank 0. */
  for (int c = 0; c < nchunks; c++) {
    size_t off = (size_t)c * chunk, n = count - off < chunk ? count - off : chunk;
    for (int k = 1; k < P; k++) {
      int p = (me + k) % P;
      memcpy(t->peer_data[p] + half + (size_t)me * slot_bytes + off * esize, in + off * esize,
             n * esize);
      fco_cpu_signal(t, p, c);
    }
  }
  const char* mine = t->peer_data[me] + half;
  for (int c = 0; c < nchunks; c++) {
    size_t off = (size_t)c * chunk, n = count - off < chunk ? count - off : chunk;
    const char* src[FCO_MAX_RANKS];
    for (int p = 0; p < P; p++) {
      if (p == me) {
        src[p] = in + off * esize;
      } else {
        FCO_CHECK(fco_cpu_wait(t, p, c, "fco_allreduce (oneshot)"));
        src[p] = mine + (size_t)p * slot_bytes + off * esize;
      }
    }
    reduce((char*)a->out + off * esize, src, P, n, a->dtype, esize);
  }
  return FCO_OK;
}

fco_result_t fco_cpu_allreduce(const fco_cpu_peers_t* t, const fco_op_t* op) {
  const fco_allreduce_args_t* a = &op->u.allreduce;
  size_t esize = fco_dtype_size(a->dtype);
  size_t slot_bytes = fco_round_up(a->count * esize, 256);
  /* Halves at 0 and ws/2 whatever the size (the workspace rule in src/cuda/dev.h). */
  size_t half = (size_t)(t->epoch & 1) * fco_ws_half_bytes(t->ws_bytes);
  if (2 * (size_t)t->nranks * slot_bytes > t->ws_bytes)
    return fco_set_error(t->comm, FCO_ERR_INTERNAL,
                         "fco_allreduce: workspace of %zu bytes per rank, %zu needed",
                         t->ws_bytes, 2 * (size_t)t->nranks * slot_bytes);
  switch (op->impl) {
    case 0: return allreduce_copy(t, a, esize, slot_bytes, half);
    case 1: return allreduce_oneshot(t, a, esize, slot_bytes, half);
    default:
      return fco_set_error(t->comm, FCO_ERR_UNSUPPORTED,
                           "fco_allreduce: impl %d does not exist on the cpu transport (0 copy, "
                           "1 oneshot)", op->impl);
  }
}
