/*
 * sync.c — bounded waits of the CPU backend and the cpu transport: back-off (spin, yield,
 * sleep) and the flag wait that turns a silent peer into FCO_ERR_TIMEOUT (at once when the
 * peer is known to have given up on the call).
 */
#include <sched.h>
#include <time.h>

#include "cpu.h"

#define SPIN_POLLS 128        /* pure spinning: a peer on another core answers within ~µs */
#define YIELD_NS 200000ull    /* then sched_yield for this long: same-core peers get to run */
#define SLEEP_NS 50000L       /* then sleep: more ranks than cores, or a peer that is late   */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

uint64_t fco_cpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void fco_cpu_backoff_init(fco_cpu_backoff_t* b, int timeout_ms) {
  b->start_ns = fco_cpu_now_ns();
  b->deadline_ns = b->start_ns + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000ull;
  b->polls = 0;
}

int fco_cpu_backoff(fco_cpu_backoff_t* b) {
  if (++b->polls < SPIN_POLLS) {
    cpu_relax();
    return 0;
  }
  uint64_t now = fco_cpu_now_ns();
  if (now >= b->deadline_ns) return 1;
  if (now - b->start_ns < YIELD_NS) {
    sched_yield();
  } else {
    struct timespec ts = {0, SLEEP_NS};
    nanosleep(&ts, NULL);
  }
  return 0;
}

int fco_cpu_await_or_gone(_Atomic uint64_t* f, uint64_t mask, uint64_t want,
                          _Atomic uint64_t* gone, int timeout_ms, uint64_t* seen) {
  uint64_t v = atomic_load_explicit(f, memory_order_acquire);
  if ((v & mask) >= want) {
    *seen = v;
    return 0;
  }
  fco_cpu_backoff_t b;
  fco_cpu_backoff_init(&b, timeout_ms);
  for (;;) {
    const int expired = fco_cpu_backoff(&b); /* the deadline read before the value */
    v = atomic_load_explicit(f, memory_order_acquire);
    *seen = v;
    if ((v & mask) >= want) return 0;
    if (gone && (atomic_load_explicit(gone, memory_order_acquire) & FCO_CPU_GAVE_UP)) {
      /* the bit went up after everything the peer stored before it (release, acquire) */
      v = atomic_load_explicit(f, memory_order_acquire);
      *seen = v;
      return (v & mask) >= want ? 0 : 2;
    }
    if (expired) return 1;
  }
}

int fco_cpu_await(_Atomic uint64_t* f, uint64_t mask, uint64_t want, int timeout_ms,
                  uint64_t* seen) {
  return fco_cpu_await_or_gone(f, mask, want, NULL, timeout_ms, seen);
}

fco_result_t fco_cpu_wait(const fco_cpu_peers_t* t, int src, int slot, const char* what) {
  uint64_t seen;
  _Atomic uint64_t* gone = t->gone ? t->gone + (size_t)src * t->gone_stride : NULL;
  const int r = fco_cpu_await_or_gone(fco_cpu_flag(t, t->rank, src, slot), ~0ull, t->epoch, gone,
                                      t->timeout_ms, &seen);
  if (r == 0) return FCO_OK;
  t->comm->async_error = FCO_ERR_TIMEOUT;
  if (t->stop) *t->stop = (fco_cpu_stop_t){.peer = src, .gone = r == 2};
  if (r == 2)
    return fco_set_error(t->comm, FCO_ERR_TIMEOUT,
                         "%s (call %llu): rank %d gave up on this call before it signalled slot "
                         "%d; the communicator is unusable, destroy it",
                         what, (unsigned long long)t->epoch, src, slot);
  return fco_set_error(t->comm, FCO_ERR_TIMEOUT,
                       "%s (call %llu): rank %d did not signal slot %d within %d ms (flag %llu, "
                       "waiting for %llu); the communicator is unusable, destroy it",
                       what, (unsigned long long)t->epoch, src, slot, t->timeout_ms,
                       (unsigned long long)seen, (unsigned long long)t->epoch);
}
