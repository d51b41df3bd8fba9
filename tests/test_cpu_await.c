/*
 * test_cpu_await.c — the bounded wait behind every wait of the cpu transport and the CPU
 * operators (fco_cpu_await, src/cpu/sync.c), on a clock the test owns: this program defines
 * clock_gettime, nanosleep and sched_yield, which libfco's calls bind to (an executable's
 * definitions interpose on a shared library's), so time advances only when the wait backs off
 * and a peer's store can be made to land at an exact point of the wait. Checked: a value already
 * there (no back-off), the mask (the growth ack's failure bit ignored in the compare, kept in
 * *seen), a value that arrives mid-wait, a value that lands just as the deadline is found passed
 * (arrived, not a timeout: the deadline is read before the value — before fco_cpu_await the CPU
 * ops' wait re-read the value after the deadline, the transport's growth wait did not), and a
 * value that never comes (a timeout no earlier than the bound and less than one back-off step
 * after it, *seen the last value loaded); then a short wait on the real clock. And the wait that
 * also watches a peer's "gave up" word (fco_cpu_await_or_gone: the cpu transport's growth acks
 * and the operators' signal waits): a value already there wins over the bit, the bit already
 * set or going up mid-wait ends the wait at once (2, not a timeout), a word without the bit
 * changes nothing.
 * Transport-independent.
 *   make test   or   build/tests/test_cpu_await
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../src/cpu/cpu.h"
#include "test.h"

/* ---- the test's clock: on while g_fake, else the kernel's --------------------------------- */
static int g_fake;
static uint64_t g_now_ns;        /* the fake CLOCK_MONOTONIC */
static uint64_t g_backoffs;      /* nanosleep + sched_yield calls while faked */
static _Atomic uint64_t* g_flag; /* stored into at g_land_ns (clock_gettime, below) */
static uint64_t g_land_ns, g_land_value;
static const uint64_t kYieldNs = 1000; /* what a sched_yield costs on the fake clock */

static void advance(uint64_t ns) {
  g_now_ns += ns;
  g_backoffs++;
}

/* The peer's store lands at the first reading of the clock at or after g_land_ns: between the
 * wait's look at the value and its deadline check, where a late store is the race to get right. */
int clock_gettime(clockid_t id, struct timespec* ts) {
  if (!g_fake) return (int)syscall(SYS_clock_gettime, id, ts);
  if (g_flag && g_now_ns >= g_land_ns) {
    atomic_store_explicit(g_flag, g_land_value, memory_order_release);
    g_flag = NULL;
  }
  ts->tv_sec = (time_t)(g_now_ns / 1000000000ull);
  ts->tv_nsec = (long)(g_now_ns % 1000000000ull);
  return 0;
}

int nanosleep(const struct timespec* req, struct timespec* rem) {
  if (!g_fake) return (int)syscall(SYS_nanosleep, req, rem);
  advance((uint64_t)req->tv_sec * 1000000000ull + (uint64_t)req->tv_nsec);
  return 0;
}

int sched_yield(void) {
  if (!g_fake) return (int)syscall(SYS_sched_yield);
  advance(kYieldNs);
  return 0;
}

/* One wait on the fake clock from t = 1 s; the value `land` is stored into *land_on (f when
 * NULL) at land_ns after the start (never when land_ns is UINT64_MAX). gone NULL: fco_cpu_await,
 * else fco_cpu_await_or_gone watching it. Returns the wait's result; *elapsed the fake time. */
static int wait_fake_on(_Atomic uint64_t* f, uint64_t mask, uint64_t want, _Atomic uint64_t* gone,
                        int timeout_ms, _Atomic uint64_t* land_on, uint64_t land_ns, uint64_t land,
                        uint64_t* seen, uint64_t* elapsed) {
  const uint64_t t0 = 1000000000ull;
  g_now_ns = t0;
  g_backoffs = 0;
  g_flag = land_ns == UINT64_MAX ? NULL : land_on ? land_on : f;
  g_land_ns = land_ns == UINT64_MAX ? 0 : t0 + land_ns;
  g_land_value = land;
  g_fake = 1;
  const int r = gone ? fco_cpu_await_or_gone(f, mask, want, gone, timeout_ms, seen)
                     : fco_cpu_await(f, mask, want, timeout_ms, seen);
  g_fake = 0;
  *elapsed = g_now_ns - t0;
  return r;
}

static int wait_fake(_Atomic uint64_t* f, uint64_t mask, uint64_t want, int timeout_ms,
                     uint64_t land_ns, uint64_t land, uint64_t* seen, uint64_t* elapsed) {
  return wait_fake_on(f, mask, want, NULL, timeout_ms, NULL, land_ns, land, seen, elapsed);
}

int main(void) {
  uint64_t rng = t_seed_init();
  const uint64_t kFail = 1ull << 63; /* the growth ack's failure bit (src/transport/cpu.c) */
  for (int rep = 0; rep < 20; rep++) {
    rng = t_mix(rng);
    const uint64_t want = 2 + rng % 1000000; /* an epoch */
    const int timeout_ms = 1 + (int)((rng >> 20) % 50);
    const uint64_t tmo_ns = (uint64_t)timeout_ms * 1000000ull;
    _Atomic uint64_t f;
    uint64_t seen = 0, el = 0;

    t_context("ready want=%llu", (unsigned long long)want);
    atomic_store(&f, want + rng % 3);
    ASSERT_EQ(wait_fake(&f, ~0ull, want, timeout_ms, UINT64_MAX, 0, &seen, &el), 0);
    ASSERT_EQ(seen, atomic_load(&f));
    ASSERT_EQ(g_backoffs, 0);

    t_context("mask want=%llu", (unsigned long long)want);
    atomic_store(&f, want | kFail);
    ASSERT_EQ(wait_fake(&f, ~kFail, want, timeout_ms, UINT64_MAX, 0, &seen, &el), 0);
    ASSERT_EQ(seen, want | kFail);
    /* the failure bit does not make an old value count as arrived */
    atomic_store(&f, (want - 1) | kFail);
    ASSERT_EQ(wait_fake(&f, ~kFail, want, timeout_ms, UINT64_MAX, 0, &seen, &el), 1);
    ASSERT_EQ(seen, (want - 1) | kFail);

    t_context("mid-wait want=%llu timeout=%d ms", (unsigned long long)want, timeout_ms);
    atomic_store(&f, want - 1);
    const uint64_t at = rng % (tmo_ns / 2 + 1);
    ASSERT_EQ(wait_fake(&f, ~0ull, want, timeout_ms, at, want, &seen, &el), 0);
    ASSERT_EQ(seen, want);
    ASSERT_GE(el, at);
    ASSERT_LT(el, tmo_ns);

    /* The store lands at the deadline, in the clock reading that finds it passed: the wait's
     * last look at the value comes after that reading, so it counts. */
    t_context("late want=%llu timeout=%d ms", (unsigned long long)want, timeout_ms);
    atomic_store(&f, want - 1);
    ASSERT_EQ(wait_fake(&f, ~0ull, want, timeout_ms, tmo_ns, want + 1, &seen, &el), 0);
    ASSERT_EQ(seen, want + 1);
    ASSERT_GE(el, tmo_ns);

    t_context("never want=%llu timeout=%d ms", (unsigned long long)want, timeout_ms);
    atomic_store(&f, want - 1);
    ASSERT_EQ(wait_fake(&f, ~0ull, want, timeout_ms, UINT64_MAX, 0, &seen, &el), 1);
    ASSERT_EQ(seen, want - 1);
    ASSERT_GE(el, tmo_ns);
    ASSERT_LT(el, tmo_ns + 1000000ull); /* within a back-off step (sleeps are 50 µs) */
    ASSERT_GT(g_backoffs, 0);

    /* A peer's "gave up" word (FCO_CPU_GAVE_UP over the call it left, here want or later). */
    _Atomic uint64_t g;
    const uint64_t bit = FCO_CPU_GAVE_UP | (want + rng % 2);
    t_context("gone: value there want=%llu", (unsigned long long)want);
    atomic_store(&f, want);
    atomic_store(&g, bit);
    ASSERT_EQ(wait_fake_on(&f, ~0ull, want, &g, timeout_ms, NULL, UINT64_MAX, 0, &seen, &el), 0);
    ASSERT_EQ(seen, want);
    t_context("gone: before the wait want=%llu", (unsigned long long)want);
    atomic_store(&f, want - 1);
    ASSERT_EQ(wait_fake_on(&f, ~0ull, want, &g, timeout_ms, NULL, UINT64_MAX, 0, &seen, &el), 2);
    ASSERT_EQ(seen, want - 1);
    ASSERT_LT(el, tmo_ns);
    t_context("gone: mid-wait want=%llu timeout=%d ms", (unsigned long long)want, timeout_ms);
    atomic_store(&g, want); /* a word without the bit: a record posted, nothing more */
    ASSERT_EQ(wait_fake_on(&f, ~0ull, want, &g, timeout_ms, &g, at, bit, &seen, &el), 2);
    ASSERT_EQ(seen, want - 1);
    ASSERT_GE(el, at);
    ASSERT_LT(el, tmo_ns);
    t_context("gone: never want=%llu timeout=%d ms", (unsigned long long)want, timeout_ms);
    atomic_store(&g, want);
    ASSERT_EQ(wait_fake_on(&f, ~0ull, want, &g, timeout_ms, NULL, UINT64_MAX, 0, &seen, &el), 1);
    ASSERT_GE(el, tmo_ns);
    t_context("gone: no bit, the value mid-wait want=%llu", (unsigned long long)want);
    ASSERT_EQ(wait_fake_on(&f, ~0ull, want, &g, timeout_ms, NULL, at, want, &seen, &el), 0);
    ASSERT_EQ(seen, want);
  }
  /* the real clock is back: a short wait for a value that never comes ends after its bound */
  t_context("real clock");
  _Atomic uint64_t f = 0;
  uint64_t seen = 7;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  ASSERT_EQ(fco_cpu_await(&f, ~0ull, 1, 20, &seen), 1);
  clock_gettime(CLOCK_MONOTONIC, &b);
  ASSERT_EQ(seen, 0);
  ASSERT_GE((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec), 20000000ll);
  t_context("%s", "");
  printf("PASS\n");
  return 0;
}
