/*
 * fuzz.h — what the tests/test_fuzz_*.c harnesses share: an input reader (bytes → small
 * numbers), cached cpu worlds of 1..T_FUZZ_MAX_RANKS ranks, exact-size allocations, and the
 * two mains of one harness (FCO_FUZZ_MAIN): the suite's, which runs FCO_FUZZ_ITERS problems
 * made from the run's seed (default 5000, 1000 with FCO_TEST_QUICK=1; FCO_TEST_SEED reproduces
 * a run), and libFuzzer's (built with -DFCO_LIBFUZZER by `make fuzz`).
 * A harness is `static int fuzz_one(const uint8_t* data, size_t size)`: it decodes a problem from
 * the bytes, runs it, checks it (t_fail on a failure), and returns whether the problem had bad
 * data (counted by the suite's main).
 */
#ifndef FCO_TEST_FUZZ_H_
#define FCO_TEST_FUZZ_H_

#include <stdlib.h>

#include "test.h"

#define T_FUZZ_MAX_RANKS 3

typedef struct {
  const uint8_t* p;
  size_t n, i;
} t_rd_t;

/* The next input byte mod `mod` (0 once the input is used up). */
static inline int t_rd(t_rd_t* r, int mod) {
  const int v = r->i < r->n ? r->p[r->i++] : 0;
  return mod > 0 ? v % mod : 0;
}

/* A world of P ranks on the cpu transport, made on first use and kept (destroyed by the main). */
static t_world_t t_fuzz_worlds_[T_FUZZ_MAX_RANKS + 1];
static inline t_world_t* t_fuzz_world(int P) {
  t_world_t* w = &t_fuzz_worlds_[P];
  if (w->n == 0) {
    fco_config_t cfg;
    ASSERT_OK(fco_config_init(&cfg));
    cfg.timeout_ms = 20000;
    ASSERT_OK(t_world_init(w, FCO_TRANSPORT_CPU, P, &cfg));
  }
  return w;
}

/* malloc of exactly `bytes` (so the sanitizers see one past it), NULL for 0. */
static inline void* t_fuzz_alloc(size_t bytes) {
  if (bytes == 0) return NULL;
  void* p = malloc(bytes);
  if (!p) t_fail(__FILE__, __LINE__, "out of host memory (%zu bytes)", bytes);
  return p;
}

/* An output of `bytes` poisoned (T_POISON: NaN in every dtype), then T_GUARD guard bytes. */
static inline void* t_fuzz_out(size_t bytes) {
  char* p = (char*)t_fuzz_alloc(bytes + T_GUARD);
  memset(p, T_POISON, bytes);
  memset(p + bytes, T_GUARD_BYTE, T_GUARD);
  return p;
}

/* Rank q's output of n elements of dt (rows of `row` elements, for the message) against want,
 * bit for bit (NaN wanted: the element must be left untouched, poison), and its guard bytes. */
static inline void t_fuzz_check_out(int q, fco_dtype_t dt, const void* out, const float* want,
                                    size_t n, size_t row) {
  for (size_t i = 0; i < n; i++) {
    const float got = t_get_elem(dt, out, i);
    if (!(got == want[i] || (got != got && want[i] != want[i])))
      t_fail(__FILE__, __LINE__, "rank %d out[%zu] (row %zu, column %zu) = %g, want %g", q, i,
             i / row, i % row, got, want[i]);
  }
  for (size_t i = 0; i < T_GUARD; i++)
    if (((const uint8_t*)out)[n * fco_dtype_size(dt) + i] != T_GUARD_BYTE)
      t_fail(__FILE__, __LINE__, "rank %d: byte %zu past the output was written", q, i);
}

#ifdef FCO_LIBFUZZER
#define FCO_FUZZ_MAIN(one, what)                                      \
  int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {      \
    (void)one(data, size);                                            \
    return 0;                                                         \
  }
#else
#define FCO_FUZZ_MAIN(one, what)                                                              \
  int main(void) {                                                                            \
    t_seed_init();                                                                            \
    if (t_transport() != FCO_TRANSPORT_CPU)                                                   \
      t_skip("cpu transport only: GPU transports report bad data asynchronously and the "     \
             "communicator must then be destroyed (fco.h)");                                 \
    const long long iters = fco_env_int("FCO_FUZZ_ITERS", t_quick() ? 1000 : 5000);          \
    uint8_t buf[2048];                                                                        \
    long long bad = 0;                                                                        \
    for (long long it = 0; it < iters; it++) {                                                \
      uint64_t x = t_next_seed();                                                             \
      for (size_t i = 0; i < sizeof buf; i += 8) {                                            \
        x = t_mix(x);                                                                         \
        memcpy(buf + i, &x, 8);                                                               \
      }                                                                                       \
      bad += one(buf, sizeof buf);                                                            \
    }                                                                                         \
    for (int P = 1; P <= T_FUZZ_MAX_RANKS; P++)                                               \
      if (t_fuzz_worlds_[P].n) t_world_destroy(&t_fuzz_worlds_[P], 0);                        \
    printf("%s: %lld random problems, %lld of them with bad data\n", what, iters, bad);      \
    printf("PASS\n");                                                                         \
    return 0;                                                                                 \
  }
#endif

#endif
