/*
 * test_allreduce.c — fco_allreduce gives exact sums, bit-identical on every rank: 1–4 ranks,
 * odd and large counts, f32 / f16 / bf16, impl 0, 1 and AUTO, in place and out of place;
 * then 20 calls in a row on one world with fresh inputs each (epochs, varying shapes), and a
 * chain of in-place calls issued back to back (a fast rank's next call must not overwrite data
 * a slow rank is still reading). Every output element and the bytes past its end are checked.
 * On the cpu transport also real-valued inputs, whose sums round: the result must be the fp32
 * sum in rank order 0..P-1, the same bytes on every rank and from both impls. First, on every
 * transport, AUTO's rule as a host function (auto_rule: each transport's and P's one-shot edge).
 *   make test   or   build/tests/test_allreduce   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 drops the largest count.
 */
#include <stdlib.h>

#include "test.h"

#include "../src/core/internal.h"

static const size_t kCounts[] = {1, 2, 3, 7, 255, 1000, 4097, 65537, (1u << 20) + 1};
#define NUM_COUNTS (sizeof kCounts / sizeof kCounts[0])
static const size_t kMaxCount = (1u << 20) + 1;
static const int kImpls[] = {0, 1, FCO_IMPL_AUTO};
static const fco_dtype_t kDtypes[] = {FCO_F32, FCO_F16, FCO_BF16};

static void one_call(const t_world_t* w, t_ar_bufs_t* b, size_t count, fco_dtype_t dtype,
                     int impl, int inplace) {
  uint64_t seed = t_next_seed();
  t_context("P=%d count=%zu %s impl=%d %s seed=0x%016llx", w->n, count, fco_dtype_name(dtype),
            impl, inplace ? "in place" : "out of place", (unsigned long long)seed);
  t_ar_prepare(w, b, count, dtype, inplace, seed);
  ASSERT_OK(t_ar_run(w, b, impl));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, b, seed), 0);
}

/* Every (count, dtype, impl, in place) once; the largest count only in a rotation. */
static void sweep(const t_world_t* w, t_ar_bufs_t* b, int quick) {
  for (size_t c = 0; c < NUM_COUNTS; c++) {
    int big = kCounts[c] > 100000;
    if (big && quick) continue;
    for (int d = 0; d < 3; d++)
      for (int i = 0; i < 3; i++)
        for (int ip = 0; ip < 2; ip++) {
          if (big && ip != (d + i) % 2) continue;
          one_call(w, b, kCounts[c], kDtypes[d], kImpls[i], ip);
        }
  }
}

/* 20 calls in a row, each with fresh inputs and a different shape / dtype / impl. */
static void epochs(const t_world_t* w, t_ar_bufs_t* b) {
  static const size_t counts[] = {4097, 7, 65537, 1, 1000, 255};
  for (int k = 0; k < 20; k++)
    one_call(w, b, counts[k % 6], kDtypes[k % 3], kImpls[(k / 3) % 3], k % 2);
}

/* In-place calls issued back to back, no sync between: out = P^(calls-1) · Σ_r in_r. f32
 * keeps every value exact. */
static void chain(const t_world_t* w, t_ar_bufs_t* b, int impl) {
  const int calls = 5;
  const size_t count = 3001;
  uint64_t seed = t_next_seed();
  t_context("P=%d chain of %d in-place calls impl=%d seed=0x%016llx", w->n, calls, impl,
            (unsigned long long)seed);
  t_ar_prepare(w, b, count, FCO_F32, 1, seed);
  for (int k = 0; k < calls; k++) ASSERT_OK(t_ar_run(w, b, impl));
  t_sync(w);
  double scale = 1;
  for (int k = 1; k < calls; k++) scale *= w->n;
  ASSERT_EQ(t_ar_check_scaled(w, b, seed, scale), 0);
}

/* Real values (uniform in [-1, 1), rounded to the dtype), so sums round and the order of the
 * additions shows (integer inputs hide it: a mutant summing in another order passed). Every
 * rank's out must hold exactly the fp32 sum in rank order 0..P-1, from rank 0's value, rounded
 * once to the dtype (include/fco.h). cpu transport only: impl 0 on nccl is ncclAllReduce, which
 * sums in an order of its own. count 70001: several oneshot chunks in every dtype. */
static void real_sums(const t_world_t* w, t_ar_bufs_t* b) {
  static const size_t counts[] = {5, 1000, 70001};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (int d = 0; d < 3; d++)
      for (int impl = 0; impl < 2; impl++) {
        const size_t count = counts[c], es = fco_dtype_size(kDtypes[d]), bytes = count * es;
        uint64_t seed = t_next_seed(), s = seed;
        t_context("P=%d real-valued sums count=%zu %s impl=%d seed=0x%016llx", w->n, count,
                  fco_dtype_name(kDtypes[d]), impl, (unsigned long long)seed);
        t_ar_prepare(w, b, count, kDtypes[d], 0, seed); /* poisoned outs, guards */
        float* acc = (float*)malloc(count * sizeof(float));
        char* host = (char*)malloc(bytes + T_GUARD);
        ASSERT_TRUE(acc && host);
        for (int r = 0; r < w->n; r++) {
          for (size_t i = 0; i < count; i++) {
            s = t_mix(s);
            t_set_elem(kDtypes[d], host, i, (float)((double)(s >> 11) / 0x1p52 - 1.0));
            float v = t_get_elem(kDtypes[d], host, i);
            acc[i] = r == 0 ? v : acc[i] + v;
          }
          t_put(w->transport, t_rank_device(w->transport, r), b->in[r], host, bytes);
        }
        ASSERT_OK(t_ar_run(w, b, impl));
        t_sync(w);
        char* want = (char*)malloc(bytes);
        ASSERT_NOT_NULL(want);
        for (size_t i = 0; i < count; i++) t_set_elem(kDtypes[d], want, i, acc[i]);
        for (int r = 0; r < w->n; r++) {
          t_get(w->transport, t_rank_device(w->transport, r), host, b->out[r], bytes + T_GUARD);
          size_t bad = 0;
          for (size_t i = 0; i < count; i++) {
            if (!memcmp(host + i * es, want + i * es, es)) continue;
            if (bad++ < 5)
              fprintf(stderr, "  rank %d out[%zu] = %.9g, want %.9g (fp32 sum in rank order)\n",
                      r, i, (double)t_get_elem(kDtypes[d], host, i),
                      (double)t_get_elem(kDtypes[d], want, i));
          }
          for (size_t g = 0; g < T_GUARD; g++)
            bad += (unsigned char)host[bytes + g] != T_GUARD_BYTE;
          ASSERT_EQ(bad, 0);
        }
        free(want);
        free(host);
        free(acc);
      }
}

/* AUTO's rule (fco_allreduce_auto_impl, src/ops/allreduce.c: a host function, exported by
 * libfco, not in fco.h) on made-up communicators of every transport and P 1..8, so the rule runs
 * in CI without a GPU: the one-shot's edge per (transport, P) — at the edge the one-shot, one
 * byte above impl 0 — FCO_ALLREDUCE_ONESHOT_MAX moving it, and the cases that ignore it (cpu:
 * the one-shot always; one rank on local: the one-shot always). */
static void auto_rule(void) {
  static const struct {
    fco_transport_t t;
    int p;
    long long edge; /* bytes; -1: the one-shot at every size */
  } cases[] = {{FCO_TRANSPORT_NCCL, 1, 4 << 20},  {FCO_TRANSPORT_NCCL, 2, 16 << 20},
               {FCO_TRANSPORT_NCCL, 3, 2 << 20},  {FCO_TRANSPORT_NCCL, 4, 2 << 20},
               {FCO_TRANSPORT_NCCL, 5, 1 << 20},  {FCO_TRANSPORT_NCCL, 8, 1 << 20},
               {FCO_TRANSPORT_LOCAL, 1, -1},      {FCO_TRANSPORT_LOCAL, 2, 4 << 20},
               {FCO_TRANSPORT_LOCAL, 3, (8 << 20) / 3}, {FCO_TRANSPORT_LOCAL, 8, 1 << 20},
               {FCO_TRANSPORT_CPU, 1, -1},        {FCO_TRANSPORT_CPU, 4, -1}};
  struct fco_comm c;
  t_knob_set("FCO_ALLREDUCE_ONESHOT_MAX", NULL);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset(&c, 0, sizeof c);
    c.transport = cases[i].t;
    c.nranks = cases[i].p;
    const long long e = cases[i].edge;
    t_context("allreduce AUTO rule: %s, P=%d, edge %lld", fco_transport_name(c.transport),
              c.nranks, e);
    ASSERT_EQ(fco_allreduce_auto_impl(&c, 256), 1);
    ASSERT_EQ(fco_allreduce_auto_impl(&c, (size_t)(e < 0 ? 1 << 30 : e)), 1);
    ASSERT_EQ(fco_allreduce_auto_impl(&c, (size_t)(e < 0 ? 1 << 30 : e) + 1), (e < 0 ? 1 : 0));
    t_knob_set("FCO_ALLREDUCE_ONESHOT_MAX", "64k");
    ASSERT_EQ(fco_allreduce_auto_impl(&c, 64 << 10), 1);
    ASSERT_EQ(fco_allreduce_auto_impl(&c, (64 << 10) + 1), (e < 0 ? 1 : 0));
    t_knob_set("FCO_ALLREDUCE_ONESHOT_MAX", "64M");
    ASSERT_EQ(fco_allreduce_auto_impl(&c, (size_t)64 << 20), 1);
    ASSERT_EQ(fco_allreduce_auto_impl(&c, ((size_t)64 << 20) + 1), (e < 0 ? 1 : 0));
    t_knob_set("FCO_ALLREDUCE_ONESHOT_MAX", NULL);
  }
  t_knob_reset("FCO_ALLREDUCE_ONESHOT_MAX");
}

int main(void) {
  t_seed_init();
  auto_rule();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = t_quick();
  int max = t_test_max_ranks(t);
  for (int p = 1; p <= max; p++) {
    t_world_t w;
    t_ar_bufs_t b;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    t_ar_alloc(&w, &b, kMaxCount);
    sweep(&w, &b, quick);
    epochs(&w, &b);
    for (int i = 0; i < 3; i++) chain(&w, &b, kImpls[i]);
    if (t == FCO_TRANSPORT_CPU) real_sums(&w, &b);
    t_ar_free(&w, &b);
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
    fflush(stdout);
  }
  return t_pass(t, max, t_test_rank_cap());
}
