/*
 * test_bad_args.c — every bad argument gives its documented result code and an fco_last_error
 * message that names the argument, and nothing is written (poisoned outputs stay
 * bit-identical). Covers NULL pointers, zero / absurd counts, unknown dtype and impl, ranks and
 * sizes out of range, an uninitialised config, FCO_TRANSPORT=bogus, overlapping buffers, group
 * misuse, a group whose one rank's call is refused (none of the world's calls issued, the
 * communicators still usable), nranks / count / dtype mismatches across ranks (cpu transport),
 * the result-code names and the library's version (fco_get_version).
 *   make test   or   build/tests/test_bad_args   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define N 1000 /* elements of the buffers the bad calls are given */

static fco_transport_t g_t;
static t_world_t g_w;
static t_ar_bufs_t g_b;

/* Poison rank 0's output (and guard); the bad call must leave it as it is. */
static void poison(void) { t_ar_prepare(&g_w, &g_b, N, FCO_F32, 0, 1); }
static void assert_untouched(int line) {
  if (t_ar_check_untouched(&g_w, &g_b)) t_fail(__FILE__, line, "a failed call wrote output");
}

/* A bad fco_allreduce on rank 0: `code`, a message naming `word` on the comm (or, when comm
 * is NULL, on the thread), no output written. */
#define BAD_AR(comm, in, out, count, dtype, impl, code, word)                              \
  do {                                                                                    \
    poison();                                                                             \
    t_context("fco_allreduce(%s, %s, %s, %s, %s, %s)", #comm, #in, #out, #count, #dtype, \
              #impl);                                                                     \
    ASSERT_RES(fco_allreduce(comm, in, out, count, dtype, impl, NULL), code);             \
    ASSERT_MSG(comm, word);                                                               \
    ASSERT_MSG(NULL, word);                                                               \
    t_sync(&g_w);                                                                         \
    assert_untouched(__LINE__);                                                           \
  } while (0)

static void allreduce_args(void) {
  fco_comm_t c = g_w.comms[0];
  void* in = g_b.in[0];
  void* out = g_b.out[0];
  const fco_result_t E = FCO_ERR_INVALID_ARGUMENT;
  BAD_AR(NULL, in, out, N, FCO_F32, 0, E, "comm");
  BAD_AR(c, NULL, out, N, FCO_F32, 0, E, "in");
  BAD_AR(c, in, NULL, N, FCO_F32, 1, E, "out");
  BAD_AR(c, in, out, 0, FCO_F32, 0, E, "count");
  BAD_AR(c, in, out, (size_t)-1, FCO_F32, 0, E, "count"); /* a negative count cast */
  BAD_AR(c, in, out, (size_t)1 << 50, FCO_F32, 1, E, "count");
  BAD_AR(c, in, out, N, (fco_dtype_t)7, 0, E, "dtype");
  BAD_AR(c, in, out, N, (fco_dtype_t)-1, 1, E, "dtype");
  BAD_AR(c, in, out, N, FCO_NUM_DTYPES, FCO_IMPL_AUTO, E, "dtype");
  BAD_AR(c, in, out, N, FCO_F32, FCO_ALLREDUCE_NUM_IMPLS, E, "impl");
  BAD_AR(c, in, out, N, FCO_F32, -2, E, "impl");
  BAD_AR(c, in, out, N, FCO_F32, 1000, E, "impl");
  /* Overlapping but not equal: in is out shifted by one element (both poisoned). */
  BAD_AR(c, (char*)out + 4, out, N - 1, FCO_F32, 0, E, "overlap");
  BAD_AR(c, out, (char*)out + 4, N - 1, FCO_BF16, 1, E, "overlap");
  t_context("%s", "");

  size_t bytes = 0;
  ASSERT_RES(fco_allreduce_workspace(c, N, FCO_F32, 0, NULL), E);
  ASSERT_MSG(c, "bytes");
  ASSERT_RES(fco_allreduce_workspace(c, 0, FCO_F32, 0, &bytes), E);
  ASSERT_MSG(c, "count");
  ASSERT_RES(fco_allreduce_workspace(c, N, (fco_dtype_t)7, 0, &bytes), E);
  ASSERT_MSG(c, "dtype");
  ASSERT_RES(fco_allreduce_workspace(c, N, FCO_F32, 5, &bytes), E);
  ASSERT_MSG(c, "impl");
  ASSERT_RES(fco_allreduce_workspace(NULL, N, FCO_F32, 0, &bytes), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_NULL(fco_allreduce_impl_name(c, FCO_ALLREDUCE_NUM_IMPLS));
  ASSERT_NULL(fco_allreduce_impl_name(c, -2));
  ASSERT_NULL(fco_allreduce_impl_name(NULL, 0));
  for (int i = 0; i < FCO_ALLREDUCE_NUM_IMPLS; i++) ASSERT_NOT_NULL(fco_allreduce_impl_name(c, i));

  /* None of these failures is sticky: the communicator still works. */
  ASSERT_OK(fco_comm_get_async_error(c));
  uint64_t seed = t_next_seed();
  t_ar_prepare(&g_w, &g_b, N, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(&g_w, &g_b, FCO_IMPL_AUTO));
  t_sync(&g_w);
  ASSERT_EQ(t_ar_check(&g_w, &g_b, seed), 0);
}

static void query_args(void) {
  fco_comm_t c = g_w.comms[0];
  const fco_result_t E = FCO_ERR_INVALID_ARGUMENT;
  int x = 0;
  size_t s = 0;
  fco_transport_t t;
  ASSERT_RES(fco_config_init(NULL), E);
  ASSERT_MSG(NULL, "cfg");
  ASSERT_RES(fco_get_unique_id(NULL), E);
  ASSERT_MSG(NULL, "id");
  ASSERT_RES(fco_comm_rank(NULL, &x), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_RES(fco_comm_rank(c, NULL), E);
  ASSERT_MSG(c, "rank");
  ASSERT_RES(fco_comm_size(NULL, &x), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_RES(fco_comm_size(c, NULL), E);
  ASSERT_MSG(c, "size");
  ASSERT_RES(fco_comm_transport(NULL, &t), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_RES(fco_comm_transport(c, NULL), E);
  ASSERT_RES(fco_comm_get_async_error(NULL), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_RES(fco_comm_reserve(NULL, 1), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_RES(fco_comm_workspace_bytes(NULL, &s), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_RES(fco_comm_workspace_bytes(c, NULL), E);
  ASSERT_MSG(c, "bytes");
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(NULL, "fco_group_start");
  ASSERT_RES(fco_get_version(NULL), E);
  ASSERT_MSG(NULL, "version");
}

/* ---- communicator creation ------------------------------------------------------------------- */
static void init_args(void) {
  const fco_result_t E = FCO_ERR_INVALID_ARGUMENT;
  fco_unique_id_t id, zero;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  fco_comm_t comms[T_MAX_RANKS + 2];
  ASSERT_OK(fco_get_unique_id(&id));
  memset(&zero, 0, sizeof zero);
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = g_t;
  cfg.timeout_ms = 2000;
  int max = g_t == FCO_TRANSPORT_CPU ? 64 : 8; /* fco.h: nranks ≤ 64 (≤ 8 on GPU transports) */

  ASSERT_RES(fco_comm_init(NULL, 2, 0, &id, &cfg), E);
  ASSERT_MSG(NULL, "comm");
#define BAD_INIT(nranks, rank, idp, cfgp, code, word)                                    \
  do {                                                                                   \
    c = NULL;                                                                            \
    t_context("fco_comm_init(&c, %s, %s, %s, %s)", #nranks, #rank, #idp, #cfgp);         \
    ASSERT_RES(fco_comm_init(&c, nranks, rank, idp, cfgp), code);                        \
    ASSERT_NULL(c);                                                                      \
    ASSERT_MSG(NULL, word);                                                              \
  } while (0)
  BAD_INIT(2, 0, NULL, &cfg, E, "id");
  BAD_INIT(2, 0, &zero, &cfg, E, "id"); /* not made by fco_get_unique_id */
  BAD_INIT(0, 0, &id, &cfg, E, "nranks");
  BAD_INIT(-1, 0, &id, &cfg, E, "nranks");
  BAD_INIT(max + 1, 0, &id, &cfg, E, "nranks");
  BAD_INIT(1000000, 0, &id, &cfg, E, "nranks");
  BAD_INIT(2, -1, &id, &cfg, E, "rank");
  BAD_INIT(2, 2, &id, &cfg, E, "rank");
  BAD_INIT(1, 1, &id, &cfg, E, "rank");
  fco_config_t bad = cfg;
  bad.size = 0; /* a config that never went through fco_config_init */
  BAD_INIT(1, 0, &id, &bad, E, "fco_config_init");
  bad.size = (uint32_t)sizeof bad + 8;
  BAD_INIT(1, 0, &id, &bad, E, "size");
  bad = cfg;
  bad.transport = 99;
  BAD_INIT(1, 0, &id, &bad, E, "transport");
  bad.transport = -3;
  BAD_INIT(1, 0, &id, &bad, E, "transport");

  /* fco_comm_init_all: comms entries are never left pointing at anything on failure. */
#define BAD_ALL(ndev, cfgp, code, word)                                                  \
  do {                                                                                   \
    for (int i_ = 0; i_ < T_MAX_RANKS + 2; i_++) comms[i_] = NULL;                      \
    t_context("fco_comm_init_all(comms, %s, NULL, %s)", #ndev, #cfgp);                   \
    ASSERT_RES(fco_comm_init_all(comms, ndev, NULL, cfgp), code);                        \
    for (int i_ = 0; i_ < T_MAX_RANKS + 2; i_++) ASSERT_NULL(comms[i_]);                \
    ASSERT_MSG(NULL, word);                                                              \
  } while (0)
  ASSERT_RES(fco_comm_init_all(NULL, 2, NULL, &cfg), E);
  ASSERT_MSG(NULL, "comms");
  BAD_ALL(0, &cfg, E, "ndev");
  BAD_ALL(-2, &cfg, E, "ndev");
  BAD_ALL(max + 1, &cfg, E, "ndev");
  bad = cfg;
  bad.size = 1;
  BAD_ALL(2, &bad, E, "fco_config_init");

  /* FCO_TRANSPORT=bogus (it is read when cfg leaves the transport to AUTO). */
  const char* old = getenv("FCO_TRANSPORT");
  char* saved = old ? strdup(old) : NULL;
  setenv("FCO_TRANSPORT", "bogus", 1);
  BAD_ALL(2, NULL, E, "FCO_TRANSPORT");
  ASSERT_MSG(NULL, "bogus");
  BAD_INIT(1, 0, &id, NULL, E, "FCO_TRANSPORT");
  ASSERT_RES(fco_get_unique_id(&id), E);
  ASSERT_MSG(NULL, "FCO_TRANSPORT");
  if (saved) setenv("FCO_TRANSPORT", saved, 1);
  else unsetenv("FCO_TRANSPORT");
  free(saved);

  ASSERT_RES(fco_comm_init_from_nccl(NULL, (void*)&cfg, NULL), E);
  ASSERT_MSG(NULL, "comm");
  c = NULL;
  ASSERT_RES(fco_comm_init_from_nccl(&c, NULL, NULL), E);
  ASSERT_NULL(c);
  ASSERT_MSG(NULL, "nccl_comm");
  t_context("%s", "");
}

/* ---- mismatches across ranks (cpu transport) ----------------------------------------------------- */
typedef struct {
  fco_unique_id_t id;
  int nranks[2];
} mismatch_arg_t;

/* Child `idx` joins with its own idea of nranks; exit 0 when init failed as documented. */
static int mismatch_child(int idx, void* p) {
  mismatch_arg_t* a = (mismatch_arg_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = 1500;
  fco_result_t r = fco_comm_init(&c, a->nranks[idx], idx, &a->id, &cfg);
  t_context("process %d joined with nranks %d", idx, a->nranks[idx]);
  if (r == FCO_OK) t_fail(__FILE__, __LINE__, "fco_comm_init succeeded despite nranks mismatch");
  ASSERT_NULL(c);
  ASSERT_TRUE(r == FCO_ERR_INVALID_ARGUMENT || r == FCO_ERR_TIMEOUT);
  if (r == FCO_ERR_INVALID_ARGUMENT) ASSERT_MSG(NULL, "nranks");
  printf("process %d (nranks %d): %s: %s\n", idx, a->nranks[idx], fco_result_string(r),
         fco_last_error(NULL));
  return 0;
}

static void nranks_mismatch(void) {
  const char* old = getenv("FCO_TRANSPORT");
  char* saved = old ? strdup(old) : NULL;
  setenv("FCO_TRANSPORT", "cpu", 1);
  mismatch_arg_t a = {.nranks = {2, 3}};
  int st[2];
  ASSERT_OK(fco_get_unique_id(&a.id));
  t_fork_run(2, mismatch_child, &a, 30, st);
  ASSERT_EQ(st[0], 0);
  ASSERT_EQ(st[1], 0);
  if (saved) setenv("FCO_TRANSPORT", saved, 1);
  else unsetenv("FCO_TRANSPORT");
  free(saved);
}

/* Rank 1 disagrees with rank 0 on count or dtype inside one allreduce (cpu: the ranks compare
 * call records; local: the group's ops are compared before the launch); what 2: rank 1's count
 * is the larger (2N), so its call needs more workspace than any before (the group must grow to
 * the largest need, not the first op's: a mutant doing that failed rank 1 alone, and rank 0
 * waited for it until the timeout). */
static void call_mismatch(fco_transport_t t) {
  t_world_t w;
  t_ar_bufs_t b;
  ASSERT_OK(t_world_init(&w, t, 2, NULL));
  t_ar_alloc(&w, &b, 2 * N);
  for (int what = 0; what < 3; what++) {
    t_context("ranks disagree on %s",
              what == 1 ? "dtype" : what ? "count (rank 1's larger)" : "count");
    t_ar_prepare(&w, &b, N, FCO_F32, 0, 1);
    ASSERT_OK(fco_group_start());
    fco_result_t r0 = fco_allreduce(w.comms[0], b.in[0], b.out[0], N, FCO_F32, 0, NULL);
    fco_result_t r1 = what == 1
                          ? fco_allreduce(w.comms[1], b.in[1], b.out[1], N, FCO_BF16, 0, NULL)
                          : fco_allreduce(w.comms[1], b.in[1], b.out[1], what ? 2 * N : N - 1,
                                          FCO_F32, 0, NULL);
    ASSERT_OK(r0);
    ASSERT_OK(r1);
    ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(w.comms[0], what == 1 ? "dtype" : "count");
    ASSERT_MSG(w.comms[1], what == 1 ? "dtype" : "count");
    ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
  }
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);
  t_context("%s", "");
}

/* ---- names --------------------------------------------------------------------------------- */
static void names(void) {
  const char* s[FCO_NUM_RESULTS];
  for (int i = 0; i < FCO_NUM_RESULTS; i++) {
    s[i] = fco_result_string((fco_result_t)i);
    ASSERT_NOT_NULL(s[i]);
    ASSERT_TRUE(s[i][0] != 0);
    ASSERT_TRUE(strcmp(s[i], "unknown result") != 0);
    for (int j = 0; j < i; j++) ASSERT_TRUE(strcmp(s[i], s[j]) != 0);
  }
  ASSERT_STR_EQ(fco_result_string(FCO_NUM_RESULTS), "unknown result");
  ASSERT_STR_EQ(fco_result_string((fco_result_t)-1), "unknown result");
  ASSERT_STR_EQ(fco_result_string((fco_result_t)12345), "unknown result");
  ASSERT_STR_EQ(fco_dtype_name(FCO_F32), "f32");
  ASSERT_STR_EQ(fco_dtype_name(FCO_F16), "f16");
  ASSERT_STR_EQ(fco_dtype_name(FCO_BF16), "bf16");
  ASSERT_NULL(fco_dtype_name((fco_dtype_t)7));
  ASSERT_EQ(fco_dtype_size((fco_dtype_t)7), 0);
  ASSERT_EQ(fco_dtype_size((fco_dtype_t)-1), 0);
  ASSERT_NULL(fco_transport_name((fco_transport_t)99));
  ASSERT_STR_EQ(fco_transport_name(FCO_TRANSPORT_CPU), "cpu");
  int v = -1; /* the library this test links is the one built from this header */
  ASSERT_OK(fco_get_version(&v));
  ASSERT_EQ(v, FCO_VERSION_CODE);
}

/* One thread drives the world in a group and the last rank's call is refused by its own checks
 * (out NULL; it queued a good call before): fco_group_end issues none of the world's calls —
 * it fails at once with the refusal's code, every rank's message names the refused rank (the
 * refused rank's is its own), every plan is cleared, nothing is written — and the
 * communicators keep working (before session 42 the other ranks' calls ran and waited for the
 * missing one until the timeout, leaving the communicators unusable). */
static void group_refusal(void) {
  const int P = g_w.n;
  if (P < 2) return;
  /* a good call first, so every rank holds a plan that the refused group must clear (with none
   * held, a mutant that kept the peers' plans passed) */
  t_context("a good call before the refused group");
  uint64_t seed = t_next_seed();
  t_ar_prepare(&g_w, &g_b, N, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(&g_w, &g_b, 1));
  t_sync(&g_w);
  ASSERT_EQ(t_ar_check(&g_w, &g_b, seed), 0);
  for (int r = 0; r < P; r++) ASSERT_TRUE(fco_last_plan(g_w.comms[r])[0] != '\0');
  t_context("a group with rank %d's call refused", P - 1);
  poison();
  double t0 = t_now_ms();
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < P; r++) {
    /* the refused rank queued a good call first: not issued either, and its message stays the
     * refusal's own (the peers' note must not overwrite it) */
    if (r == P - 1)
      ASSERT_OK(fco_allreduce(g_w.comms[r], g_b.in[r], g_b.out[r], N, FCO_F32, 1, NULL));
    fco_result_t e = fco_allreduce(g_w.comms[r], g_b.in[r], r == P - 1 ? NULL : g_b.out[r], N,
                                   FCO_F32, 1, NULL);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_RES(first, FCO_ERR_INVALID_ARGUMENT);
  ASSERT_LT(t_now_ms() - t0, 2500); /* not the 5 s timeout */
  for (int r = 0; r < P - 1; r++) {
    char want[64];
    snprintf(want, sizeof want, "rank %d's call in this group failed", P - 1);
    if (!strstr(fco_last_error(g_w.comms[r]), want))
      t_fail(__FILE__, __LINE__, "rank %d's message does not name the refused call: \"%s\"", r,
             fco_last_error(g_w.comms[r]));
    ASSERT_STR_EQ(fco_last_plan(g_w.comms[r]), "");
  }
  ASSERT_MSG(g_w.comms[P - 1], "out");
  /* the refused rank keeps its own message, not the peers' note about it */
  if (strstr(fco_last_error(g_w.comms[P - 1]), "in this group failed"))
    t_fail(__FILE__, __LINE__, "the refused rank's message is the peers' note: \"%s\"",
           fco_last_error(g_w.comms[P - 1]));
  ASSERT_STR_EQ(fco_last_plan(g_w.comms[P - 1]), "");
  t_sync(&g_w);
  assert_untouched(__LINE__);
  for (int r = 0; r < P; r++) ASSERT_OK(fco_comm_get_async_error(g_w.comms[r]));
  seed = t_next_seed();
  t_ar_prepare(&g_w, &g_b, N, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(&g_w, &g_b, 1));
  t_sync(&g_w);
  ASSERT_EQ(t_ar_check(&g_w, &g_b, seed), 0);
  t_context("%s", "");
}

int main(void) {
  t_seed_init();
  g_t = t_transport();
  t_require_ranks(g_t, 1);
  names();
  int n = t_max_ranks(g_t) < 2 ? 1 : 2;
  fco_config_t cfg;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = 5000; /* a bad call that slipped through fails the test soon, not in 30 s */
  ASSERT_OK(t_world_init(&g_w, g_t, n, &cfg));
  t_ar_alloc(&g_w, &g_b, N);
  allreduce_args();
  query_args();
  init_args();
  group_refusal();
  t_ar_free(&g_w, &g_b);
  t_world_destroy(&g_w, 0);
  if (g_t != FCO_TRANSPORT_NCCL && t_max_ranks(g_t) >= 2) call_mismatch(g_t);
  else printf("count/dtype mismatch part skipped on transport %s\n", fco_transport_name(g_t));
  if (g_t == FCO_TRANSPORT_CPU) nranks_mismatch();
  else printf("nranks mismatch part skipped: it forks processes (cpu transport only)\n");
  printf("PASS\n");
  return 0;
}
