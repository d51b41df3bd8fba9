/*
 * cpu.h — the seam between the cpu transport (src/transport/cpu.c) and the CPU backend
 * (src/cpu): the per-rank "peer table" of one call, the wait/signal primitives and the
 * f16/bf16 <-> f32 conversions. C11 only (<stdatomic.h>); not for .cu files.
 *
 * Signals: one uint64 flag per (dst rank, src rank, slot) in the control segment that every
 * rank maps; src writes dst's flags. A call writes its epoch (the communicator's collective
 * sequence number, >= 1, the same on every rank) with a release store; a reader waits with
 * acquire loads until flag >= epoch. Values only grow, so flags never need resetting.
 */
#ifndef FCO_CPU_CPU_H_
#define FCO_CPU_CPU_H_

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "../core/internal.h"

#define FCO_CPU_SIG_SLOTS 64 /* signal slots per (dst, src): >= chunks of any cpu op */

typedef struct fco_cpu_peers {
  fco_comm_t comm;                   /* errors and the sticky async error go here          */
  int rank, nranks;
  uint64_t epoch;                    /* this call's signal value (>= 1)                    */
  char* peer_data[FCO_MAX_RANKS];    /* peer p's data workspace as this rank maps it       */
  size_t ws_bytes;                   /* data workspace bytes per rank                      */
  _Atomic uint64_t* sig;             /* [dst][src][slot], FCO_MAX_RANKS x FCO_MAX_RANKS x SLOTS */
  int timeout_ms;
  /* Peer p's "gave up" word, gone + p * gone_stride (NULL: none): once FCO_CPU_GAVE_UP is set
   * there, p signals nothing more, and a wait for p ends at once (the transport's record word,
   * src/transport/cpu.c). */
  _Atomic uint64_t* gone;
  size_t gone_stride;                /* in words */
  struct fco_cpu_stop* stop;         /* NULL, or told why a wait ended the call (below)     */
} fco_cpu_peers_t;

/* Set in a rank's word once it gave up on a call (a timeout, or a peer that gave up) or was
 * destroyed: it posts, signals and acknowledges nothing more. The other bits keep the call's
 * sequence number (a destroyed rank's: the call after its last). */
#define FCO_CPU_GAVE_UP (1ull << 63)

/* Where fco_cpu_wait stopped a call (for the transport's own "gave up" record): the peer it
 * waited for, and whether that peer had given up (1) or the wait timed out (0). */
typedef struct fco_cpu_stop {
  int peer;
  int gone;
} fco_cpu_stop_t;

static inline _Atomic uint64_t* fco_cpu_flag(const fco_cpu_peers_t* t, int dst, int src,
                                             int slot) {
  return t->sig + ((size_t)dst * FCO_MAX_RANKS + (size_t)src) * FCO_CPU_SIG_SLOTS + slot;
}

/* Tell `dst` that this rank's data for `slot` of this call is written (release). */
static inline void fco_cpu_signal(const fco_cpu_peers_t* t, int dst, int slot) {
  atomic_store_explicit(fco_cpu_flag(t, dst, t->rank, slot), t->epoch, memory_order_release);
}

/* Wait (acquire) until `src` signalled `slot` of this call. On timeout, or once src gave up
 * (t->gone) without signalling it: FCO_ERR_TIMEOUT, the communicator's async error is set, the
 * message names the peer and `what` (the op), and t->stop (if any) says which it was. */
fco_result_t fco_cpu_wait(const fco_cpu_peers_t* t, int src, int slot, const char* what);

/* Bounded back-off for wait loops: spin briefly, then sched_yield, then short sleeps, so
 * more ranks than cores still progress. fco_cpu_backoff() returns 1 once the deadline passed. */
typedef struct {
  uint64_t start_ns, deadline_ns;
  uint32_t polls;
} fco_cpu_backoff_t;
uint64_t fco_cpu_now_ns(void);
void fco_cpu_backoff_init(fco_cpu_backoff_t* b, int timeout_ms);
int fco_cpu_backoff(fco_cpu_backoff_t* b);
/* Wait (acquire, with back-off) until (*f & mask) >= want; 1 if timeout_ms passed first. *seen:
 * the last value loaded — on a timeout one loaded after the deadline, so a value that lands
 * during the last back-off counts as arrived, never as a timeout. */
int fco_cpu_await(_Atomic uint64_t* f, uint64_t mask, uint64_t want, int timeout_ms,
                  uint64_t* seen);
/* The same, and 2 once FCO_CPU_GAVE_UP is set in *gone (NULL: never) while the value has not
 * arrived: the value is read once more after the bit, so what the peer stored before it gave up
 * counts. Loads *gone only when the value is not there at the first look. */
int fco_cpu_await_or_gone(_Atomic uint64_t* f, uint64_t mask, uint64_t want,
                          _Atomic uint64_t* gone, int timeout_ms, uint64_t* seen);

/* ---- operators (src/cpu/<op>.c) ----------------------------------------------------------- */
/* Run one rank's op (dispatch on op->kind, src/cpu/dispatch.c). */
fco_result_t fco_cpu_run(const fco_cpu_peers_t* t, const fco_op_t* op);

/* fco_allreduce for one rank; the transport checked that the ranks' arguments agree and that
 * the workspace holds op->ws_bytes. */
fco_result_t fco_cpu_allreduce(const fco_cpu_peers_t* t, const fco_op_t* op);
/* gemv_allreduce */
/* fco_gemv_allreduce for one rank (src/cpu/gemv_allreduce.c): the fp32 reference. */
fco_result_t fco_cpu_gemv_allreduce(const fco_cpu_peers_t* t, const fco_op_t* op);
/* embedding_alltoall */
/* fco_embedding_alltoall for one rank (src/cpu/embedding_alltoall.c): the reference semantics. */
fco_result_t fco_cpu_embedding_alltoall(const fco_cpu_peers_t* t, const fco_op_t* op);
/* gemm_alltoall */
/* fco_gemm_alltoall for one rank (src/cpu/gemm_alltoall.c): the reference, every impl. */
fco_result_t fco_cpu_gemm_alltoall(const fco_cpu_peers_t* t, const fco_op_t* op);

/* ---- f16 / bf16 <-> f32: round to nearest even, NaN stays NaN (quieted), Inf stays Inf ---- */
static inline uint32_t fco_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float fco_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline float fco_bf16_to_f32(uint16_t h) { return fco_bits_f32((uint32_t)h << 16); }

static inline uint16_t fco_f32_to_bf16(float f) {
  uint32_t x = fco_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u); /* ties to even; a carry into the exponent is right */
  return (uint16_t)(x >> 16);
}

static inline float fco_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return fco_bits_f32(sign | 0x7f800000u | (man << 13)); /* Inf, NaN */
  if (exp == 0) {
    if (man == 0) return fco_bits_f32(sign);
    uint32_t e = 113; /* subnormal: normalise man * 2^-24 */
    while (!(man & 0x400u)) {
      man <<= 1;
      e--;
    }
    return fco_bits_f32(sign | (e << 23) | ((man & 0x3ffu) << 13));
  }
  return fco_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t fco_f32_to_f16(float f) {
  uint32_t x = fco_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to Inf */
  if (ax < 0x38800000u) { /* below 2^-14: subnormal half (units of 2^-24) or zero */
    uint32_t shift = 126u - (ax >> 23);
    if (shift > 24) return (uint16_t)sign; /* < 2^-25: rounds to 0 */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++; /* may become the smallest normal */
    return (uint16_t)(sign | q);
  }
  uint32_t r = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++; /* a carry into the exponent is right */
  return (uint16_t)(sign | r);
}

#endif /* FCO_CPU_CPU_H_ */
