/*
 * test_gemm_alltoall_freed.c — impls 1 (tiles) and 2 (chunks) after one rank freed its own
 * buffer of the symmetric slot its peers' outs lie in (fco_mem_free is local): every out must
 * still be right, with no error anywhere. Every rank allocates a symmetric buffer (collective),
 * every rank's out but rank f's lies in its own, then rank f frees its buffer: its table no longer
 * maps that slot at any peer, so its header says it does not hold the slot (FCO_GA_H_HELD); it
 * stages its rows for the peers, which land them, while the other senders still store straight
 * into the peers' outs (fco_last_plan says "direct"). P = 2..4 (FCO_TEST_MAX_RANKS), f = 0 and
 * P − 1, both impls, bf16 and f32, fresh random inputs and counts each call (rank f sends every
 * rank rows, some segments span several 128-row tiles), outputs poisoned, float64 reference.
 * Until the held mask, rank f recorded FCO_ERR_INVALID_USAGE and stored nothing for its peers,
 * which kept the poison in rank f's rows with no error of their own.
 * Every transport (cpu: symmetric outs are ordinary memory there; the same result).
 *   FCO_TRANSPORT=local build/tests/test_gemm_alltoall_freed
 * FCO_TEST_SEED reproduces a run.
 */
#include <string.h>

#include "ga_fixture.h"

/* Two experts per rank, ragged counts with zero segments (up to 299 rows: several tiles), and
 * rank f's expert 0 sends every rank at least one row, so each of its peers needs rank f's rows. */
static void make_case(ga_case_t* c, int P, int f, int K, int N, int layout, fco_dtype_t dt,
                      uint64_t seed) {
  ga_two_expert_case(c, P, K, N, layout, dt);
  uint64_t s = seed;
  for (int r = 0; r < P; r++)
    for (int i = 0; i < 2 * P; i++) {
      s = t_mix(s);
      int v = (s >> 40) % 4 == 0 ? 0 : (int)((s >> 8) % ((s >> 50) % 2 ? 300 : 20));
      if (r == f && i < P && v == 0) v = 1 + (int)(s % 7);
      c->counts[r][i] = v;
    }
  ga_finish_case(c, t_mix(s), (int)(seed % 3));
}

static void one(const t_world_t* w, int f, int impl, fco_dtype_t dt, int layout, int hints) {
  const int P = w->n;
  const uint64_t seed = t_next_seed();
  t_context("P=%d rank %d freed its slot, impl %d %s %s hints=%d seed=0x%016llx", P, f, impl,
            fco_dtype_name(dt), layout ? "W[N,K]" : "W[K,N]", hints, (unsigned long long)seed);
  ga_case_t c;
  make_case(&c, P, f, dt == FCO_F32 ? 64 : 40, dt == FCO_F32 ? 136 : 24, layout, dt, seed);
  ga_sym_mask = ((1u << P) - 1) & ~(1u << f); /* rank f's out ordinary, the others symmetric */
  ga_bufs_t b;
  ga_upload(w, &c, &b); /* a symmetric buffer on every rank, in one collective fco_mem_alloc */
  ASSERT_OK(fco_mem_free(w->comms[f], b.sym[f])); /* local: the peers keep theirs */
  b.sym[f] = NULL;
  ga_poison(w, &c, &b);
  ASSERT_OK(ga_issue(w, &c, &b, impl, hints, NULL));
  t_sync(w);
  for (int r = 0; r < P; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(ga_check(w, &c, &b), 0);
  /* The peers did announce their symmetric outs (the path under test, not staging for all). */
  if (t_is_gpu(w->transport))
    for (int r = 0; r < P; r++)
      if (r != f && !strstr(fco_last_plan(w->comms[r]), " direct"))
        t_fail(__FILE__, __LINE__, "rank %d: plan \"%s\" has no direct stores", r,
               fco_last_plan(w->comms[r]));
  ga_free_bufs(w, &c, &b);
  ga_free_case(&c);
  ga_sym_mask = 0;
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 2);
  int max = t_test_max_ranks(t) < GA_MAXP ? t_test_max_ranks(t) : GA_MAXP;
  t_knob_set("FCO_GA_DIRECT", NULL); /* the default: symmetric outs are announced */
  for (int p = 2; p <= max; p++) {
    t_world_t w;
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    const int freer[2] = {0, p - 1};
    for (int i = 0; i < 2; i++)
      for (int impl = 1; impl <= 2; impl++) {
        one(&w, freer[i], impl, FCO_BF16, impl % 2, 1);
        one(&w, freer[i], impl, FCO_F32, (impl + 1) % 2, 0);
      }
    /* Then every rank holds the slot again: the fast path, every peer stores directly. */
    ga_sym_mask = (1u << p) - 1;
    for (int impl = 1; impl <= 2; impl++) {
      t_context("P=%d every out symmetric, impl %d", p, impl);
      ga_case_t c;
      make_case(&c, p, 0, 40, 24, 0, FCO_BF16, t_next_seed());
      ga_run_checked(&w, &c, impl, 1);
    }
    ga_sym_mask = 0;
    t_world_destroy(&w, 0);
    printf("P=%d: ok\n", p);
    fflush(stdout);
  }
  t_knob_reset("FCO_GA_DIRECT");
  return t_pass(t, max, t_test_rank_cap() < GA_MAXP ? t_test_rank_cap() : GA_MAXP);
}
