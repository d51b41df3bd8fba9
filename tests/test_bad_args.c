/*
 * test_bad_args.c — every bad argument gives its documented result code and an fco_last_error
 * message that names the argument, and nothing is written (poisoned outputs stay
 * bit-identical). Covers NULL pointers, zero / absurd counts, unknown dtype and impl, ranks and
 * sizes out of range, an uninitialised config, FCO_TRANSPORT=bogus, overlapping buffers, group
 * misuse, a group whose one rank's call is refused (none of the world's calls issued, the
 * communicators still usable) or whose every call is, fco_comm_destroy inside a group,
 * nranks / count / dtype / impl mismatches across ranks (cpu transport; the message gives both
 * values, also when each rank's thread grows the workspace for its own call), absurd reserves,
 * and processes reserving different workspace sizes,
 * the result-code, transport and impl names and the library's version (fco_get_version); and
 * what is not bad: count at its bound 2^40, in and out touching without overlapping.
 *   make test   or   build/tests/test_bad_args   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <pthread.h>
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

/* One allreduce on fresh inputs, issued for every rank in a group, checked: the world works. */
static void ar_works(const t_world_t* w, t_ar_bufs_t* b, size_t count, int impl) {
  uint64_t seed = t_next_seed();
  t_ar_prepare(w, b, count, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(w, b, impl));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, b, seed), 0);
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
  /* count's bound, 2^40 elements, is inclusive (asked of the workspace query: no call so big) */
  ASSERT_OK(fco_allreduce_workspace(c, (size_t)1 << 40, FCO_F32, 1, &bytes));
  ASSERT_RES(fco_allreduce_workspace(c, ((size_t)1 << 40) + 1, FCO_F32, 1, &bytes), E);
  ASSERT_MSG(c, "count");
  /* the names fco.h documents: impl 1 the one-shot, impl 0 the transport's baseline */
  ASSERT_STR_EQ(fco_allreduce_impl_name(c, FCO_IMPL_AUTO), "auto");
  ASSERT_STR_EQ(fco_allreduce_impl_name(c, 1), "oneshot");
  ASSERT_STR_EQ(fco_allreduce_impl_name(c, 0), g_t == FCO_TRANSPORT_NCCL ? "nccl" : "copy");
  ASSERT_NULL(fco_allreduce_impl_name(c, FCO_ALLREDUCE_NUM_IMPLS));
  ASSERT_NULL(fco_allreduce_impl_name(c, -2));
  ASSERT_NULL(fco_allreduce_impl_name(NULL, 0));
  for (int i = 0; i < FCO_ALLREDUCE_NUM_IMPLS; i++) ASSERT_NOT_NULL(fco_allreduce_impl_name(c, i));

  /* None of these failures is sticky: the communicator still works. */
  ASSERT_OK(fco_comm_get_async_error(c));
  ar_works(&g_w, &g_b, N, FCO_IMPL_AUTO);
}

/* in and out side by side in one allocation (out right after in, then in right after out): they
 * touch but do not overlap, so the call runs (one rank: out = in, in unchanged). A check of
 * "overlap" that counted touching as overlapping refused these. */
static void adjacent_buffers(void) {
  enum { kN = 64 };
  const size_t bytes = kN * sizeof(float);
  t_world_t w;
  float host[2 * kN], back[2 * kN];
  ASSERT_OK(t_world_init(&w, g_t, 1, NULL));
  const int dev = t_rank_device(g_t, 0);
  char* p = (char*)t_alloc(g_t, dev, 2 * bytes);
  for (int in_first = 1; in_first >= 0; in_first--) {
    t_context("allreduce of %d f32, out right %s in", kN, in_first ? "after" : "before");
    const size_t in_off = in_first ? 0 : bytes, out_off = in_first ? bytes : 0;
    memset(host, T_POISON, sizeof host);
    for (int i = 0; i < kN; i++) host[in_off / sizeof(float) + i] = (float)(i + 1);
    t_put(g_t, dev, p, host, sizeof host);
    ASSERT_OK(fco_allreduce(w.comms[0], p + in_off, p + out_off, kN, FCO_F32, FCO_IMPL_AUTO,
                            NULL));
    t_sync(&w);
    t_get(g_t, dev, back, p, sizeof back);
    for (int i = 0; i < kN; i++) {
      ASSERT_EQ(back[in_off / sizeof(float) + i], i + 1);
      ASSERT_EQ(back[out_off / sizeof(float) + i], i + 1);
    }
  }
  t_free(g_t, dev, p);
  t_world_destroy(&w, 0);
  t_context("%s", "");
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
  { /* sizes no allocation can have, refused before any transport frees or rounds anything:
     * before session 55, 2^63 bytes in all gave FCO_ERR_SYSTEM (ftruncate) on cpu, and
     * (size_t)-1 wrapped on the GPU transports to a workspace of 0 bytes, FCO_OK */
    size_t held = 0;
    ASSERT_OK(fco_comm_workspace_bytes(c, &held));
    const size_t huge[] = {((size_t)1 << 63) / (size_t)g_w.n, (size_t)-1, ((size_t)1 << 50) + 1};
    for (int i = 0; i < 3; i++) {
      ASSERT_RES(fco_comm_reserve(c, huge[i]), FCO_ERR_OUT_OF_MEMORY);
      ASSERT_MSG(c, "overflows");
      ASSERT_OK(fco_comm_workspace_bytes(c, &s));
      ASSERT_EQ(s, held); /* the old workspace kept */
    }
  }
  ASSERT_RES(fco_comm_workspace_bytes(NULL, &s), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_RES(fco_comm_workspace_bytes(c, NULL), E);
  ASSERT_MSG(c, "bytes");
  void* dev = NULL;
  uint32_t version = 0;
  ASSERT_RES(fco_comm_device_state(NULL, &dev, &s, &version), E);
  ASSERT_MSG(NULL, "comm");
  ASSERT_RES(fco_comm_device_state(c, NULL, &s, &version), E);
  ASSERT_MSG(c, "dev_state");
  ASSERT_RES(fco_comm_device_state(c, &dev, NULL, &version), E);
  ASSERT_MSG(c, "bytes");
  ASSERT_RES(fco_comm_device_state(c, &dev, &s, NULL), E);
  ASSERT_MSG(c, "version");
  if (g_t == FCO_TRANSPORT_CPU) { /* GPU transports only (fco.h) */
    ASSERT_RES(fco_comm_device_state(c, &dev, &s, &version), FCO_ERR_UNSUPPORTED);
    ASSERT_MSG(c, "no device state");
    ASSERT_NULL(dev);
  }
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
  ASSERT_MSG(NULL, "rank -1 out of range [0, 2)");
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
  /* comms[0..ndev) (up to 64) are NULL after a failure whatever they held (until session 55 a
   * refused config or ndev left the caller's values); nothing past them is written */
  fco_comm_t const junk = (fco_comm_t)&zero;
#define BAD_ALL(ndev, cfgp, code, word)                                                  \
  do {                                                                                   \
    for (int i_ = 0; i_ < T_MAX_RANKS + 2; i_++) comms[i_] = junk;                      \
    t_context("fco_comm_init_all(comms, %s, NULL, %s)", #ndev, #cfgp);                   \
    ASSERT_RES(fco_comm_init_all(comms, ndev, NULL, cfgp), code);                        \
    for (int i_ = 0; i_ < T_MAX_RANKS + 2; i_++)                                         \
      ASSERT_TRUE(comms[i_] == (i_ < (ndev) && i_ < 64 ? NULL : junk));                  \
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
  /* the failed call left the id all zero (fco.h), which fco_comm_init refuses */
  ASSERT_EQ(memcmp(&id, &zero, sizeof id), 0);
  BAD_INIT(1, 0, &id, &cfg, E, "fco_get_unique_id");
  ASSERT_OK(fco_get_unique_id(&id));

  ASSERT_RES(fco_comm_init_from_nccl(NULL, (void*)&cfg, NULL), E);
  ASSERT_MSG(NULL, "comm");
  c = NULL;
  ASSERT_RES(fco_comm_init_from_nccl(&c, NULL, NULL), E);
  ASSERT_NULL(c);
  ASSERT_MSG(NULL, "nccl_comm");
#ifndef FCO_HAVE_CUDA
  /* cfg NULL means the nccl transport here (whatever FCO_TRANSPORT says): a CPU-only build
   * cannot run it, and says so before it looks at the (bogus) NCCL communicator */
  c = NULL;
  ASSERT_RES(fco_comm_init_from_nccl(&c, (void*)&cfg, NULL), FCO_ERR_UNSUPPORTED);
  ASSERT_NULL(c);
  ASSERT_MSG(NULL, "CUDA");
  ASSERT_MSG(NULL, "nccl");
#endif
  t_context("%s", "");
}

/* ---- mismatches across ranks (cpu transport) ------------------------------------------------- */
typedef struct {
  fco_unique_id_t id;
  int nranks[2], rank[2];
  int timeout_ms;
} mismatch_arg_t;

/* Child `idx` joins as rank a->rank[idx] of a->nranks[idx]; exit 0 when init failed as
 * documented: nranks differ → INVALID_ARGUMENT naming nranks (or TIMEOUT: the peer can give up
 * first); one rank claimed twice → INVALID_ARGUMENT naming that rank for both callers (the one
 * waiting sees the other's abort long before its timeout). */
static int mismatch_child(int idx, void* p) {
  mismatch_arg_t* a = (mismatch_arg_t*)p;
  const int dup = a->rank[0] == a->rank[1];
  fco_config_t cfg;
  fco_comm_t c = NULL;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = a->timeout_ms;
  t_context("process %d joins as rank %d of %d", idx, a->rank[idx], a->nranks[idx]);
  fco_result_t r = fco_comm_init(&c, a->nranks[idx], a->rank[idx], &a->id, &cfg);
  if (r == FCO_OK) t_fail(__FILE__, __LINE__, "fco_comm_init succeeded despite the mismatch");
  ASSERT_NULL(c);
  if (dup) {
    char rank[16];
    snprintf(rank, sizeof rank, "rank %d", a->rank[idx]);
    ASSERT_RES(r, FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(NULL, rank);
    ASSERT_MSG(NULL, "used once");
  } else {
    ASSERT_TRUE(r == FCO_ERR_INVALID_ARGUMENT || r == FCO_ERR_TIMEOUT);
    if (r == FCO_ERR_INVALID_ARGUMENT) ASSERT_MSG(NULL, "nranks");
  }
  printf("process %d (rank %d of %d): %s: %s\n", idx, a->rank[idx], a->nranks[idx],
         fco_result_string(r), fco_last_error(NULL));
  return 0;
}

static void join_mismatch(const mismatch_arg_t* in) {
  mismatch_arg_t a = *in;
  int st[2];
  ASSERT_OK(fco_get_unique_id(&a.id));
  t_fork_run(2, mismatch_child, &a, 30, st);
  ASSERT_EQ(st[0], 0);
  ASSERT_EQ(st[1], 0);
}

static void init_mismatch(void) {
  const char* old = getenv("FCO_TRANSPORT");
  char* saved = old ? strdup(old) : NULL;
  setenv("FCO_TRANSPORT", "cpu", 1);
  join_mismatch(&(mismatch_arg_t){.nranks = {2, 3}, .rank = {0, 1}, .timeout_ms = 1500});
  /* both callers take the rank 1 of a world of 3 (rank 0 and 2 never come) */
  join_mismatch(&(mismatch_arg_t){.nranks = {3, 3}, .rank = {1, 1}, .timeout_ms = 10000});
  if (saved) setenv("FCO_TRANSPORT", saved, 1);
  else unsetenv("FCO_TRANSPORT");
  free(saved);
}

/* Two processes reserve different workspace sizes (cpu; a world reserves as a whole, so only
 * processes can): each fco_comm_reserve fails with FCO_ERR_INVALID_ARGUMENT naming both sizes and
 * that reserve bytes may differ, nothing grows, and the communicators keep working. */
static int reserve_child(int idx, void* p) {
  fco_unique_id_t* id = (fco_unique_id_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  size_t held = 1;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = 5000;
  ASSERT_OK(fco_comm_init(&c, 2, idx, id, &cfg));
  t_context("process %d reserves %d MiB, its peer %d MiB", idx, idx + 1, 2 - idx);
  ASSERT_RES(fco_comm_reserve(c, (size_t)(idx + 1) << 20), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "1048576");
  ASSERT_MSG(c, "2097152");
  ASSERT_MSG(c, "fco_comm_reserve bytes differ");
  ASSERT_OK(fco_comm_workspace_bytes(c, &held));
  ASSERT_EQ(held, 0);
  float in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = (float)(idx + 1);
  ASSERT_OK(fco_allreduce(c, in, out, 256, FCO_F32, 1, NULL));
  for (int i = 0; i < 256; i++) ASSERT_EQ(out[i], 3);
  ASSERT_OK(fco_comm_destroy(c));
  return 0;
}

static void reserve_mismatch(void) {
  fco_unique_id_t id;
  int st[2];
  ASSERT_OK(fco_get_unique_id(&id));
  t_fork_run(2, reserve_child, &id, 30, st);
  ASSERT_EQ(st[0], 0);
  ASSERT_EQ(st[1], 0);
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
  static const char* const kWhat[] = {"count", "dtype", "count (rank 1's larger)", "impl"};
  for (int what = 0; what < 4; what++) {
    t_context("ranks disagree on %s", kWhat[what]);
    t_ar_prepare(&w, &b, N, FCO_F32, 0, 1);
    ASSERT_OK(fco_group_start());
    fco_result_t r0 = fco_allreduce(w.comms[0], b.in[0], b.out[0], N, FCO_F32, 0, NULL);
    const size_t n1 = what == 0 ? N - 1 : what == 2 ? 2 * N : N;
    fco_result_t r1 = fco_allreduce(w.comms[1], b.in[1], b.out[1], n1,
                                    what == 1 ? FCO_BF16 : FCO_F32, what == 3 ? 1 : 0, NULL);
    ASSERT_OK(r0);
    ASSERT_OK(r1);
    ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
    const char* word = what == 1 ? "dtype" : what == 3 ? "impl" : "count";
    ASSERT_MSG(w.comms[0], word);
    ASSERT_MSG(w.comms[1], word);
    /* cpu: the message describes both calls, each impl by number and name */
    if (what == 3 && t == FCO_TRANSPORT_CPU) {
      ASSERT_MSG(w.comms[0], "impl=0 copy");
      ASSERT_MSG(w.comms[0], "impl=1 oneshot");
      /* each call whole: the operator, every shape field, the impl */
      char call[96];
      snprintf(call, sizeof call, "fco_allreduce(count=%d, dtype=f32, impl=1 oneshot)", (int)N);
      ASSERT_MSG(w.comms[0], call);
    }
    /* cpu: both ranks by number in every rank's message (a group hands each rank the first
     * failure's text, so "this rank" would name the wrong one on the other) */
    if (t == FCO_TRANSPORT_CPU)
      for (int r = 0; r < 2; r++) {
        const char* m = fco_last_error(w.comms[r]);
        if (!t_contains_word(m, "rank 0") || !t_contains_word(m, "rank 1") ||
            t_contains(m, "this rank"))
          t_fail(__FILE__, __LINE__, "rank %d's mismatch message: \"%s\"", r, m);
      }
    if (what == 1) { /* both values, by name (the field's name alone is in every description) */
      ASSERT_MSG(w.comms[0], "f32");
      ASSERT_MSG(w.comms[0], "bf16");
    }
    ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
  }
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);
  t_context("%s", "");
}

/* A thread per rank, each calling fco_allreduce with its own count (cpu): each rank grows the
 * workspace for its own call before the calls are compared, so the growth records differ.
 * Every rank's message names the field and both values (until session 55: "workspace growth:
 * arguments differ ... (operation arguments or fco_comm_reserve bytes differ)", no field, and
 * fco_comm_reserve blamed though never called); nothing written; the next call works. */
typedef struct {
  const t_world_t* w;
  const t_ar_bufs_t* b;
  int r;
  size_t count;
  fco_result_t res;
} grow_job_t;

static void* grow_thread(void* arg) {
  grow_job_t* j = (grow_job_t*)arg;
  j->res = fco_allreduce(j->w->comms[j->r], j->b->in[j->r], j->b->out[j->r], j->count, FCO_F32,
                         1, NULL);
  return NULL;
}

static void grow_mismatch_threads(void) {
  t_world_t w;
  t_ar_bufs_t b;
  ASSERT_OK(t_world_init(&w, FCO_TRANSPORT_CPU, 2, NULL));
  t_ar_alloc(&w, &b, 4 * N);
  t_context("a thread per rank, counts %d and %d (the workspace grows differently)", N, 4 * N);
  t_ar_prepare(&w, &b, 4 * N, FCO_F32, 0, 1);
  pthread_t th[2];
  grow_job_t jobs[2];
  for (int r = 0; r < 2; r++) {
    jobs[r] = (grow_job_t){&w, &b, r, r ? 4 * N : N, FCO_OK};
    ASSERT_EQ(pthread_create(&th[r], NULL, grow_thread, &jobs[r]), 0);
  }
  for (int r = 0; r < 2; r++) ASSERT_EQ(pthread_join(th[r], NULL), 0);
  char want0[48], want1[48];
  snprintf(want0, sizeof want0, "rank 0 has %d", N);
  snprintf(want1, sizeof want1, "rank 1 has %d", 4 * N);
  for (int r = 0; r < 2; r++) {
    ASSERT_RES(jobs[r].res, FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(w.comms[r], "count differs across ranks");
    ASSERT_MSG(w.comms[r], want0);
    ASSERT_MSG(w.comms[r], want1);
    if (t_contains(fco_last_error(w.comms[r]), "fco_comm_reserve"))
      t_fail(__FILE__, __LINE__, "rank %d's message blames fco_comm_reserve: \"%s\"", r,
             fco_last_error(w.comms[r]));
  }
  ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
  ar_works(&w, &b, 4 * N, 1);
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
  ASSERT_NULL(fco_transport_name((fco_transport_t)-1));
  ASSERT_STR_EQ(fco_transport_name(FCO_TRANSPORT_AUTO), "auto");
  ASSERT_STR_EQ(fco_transport_name(FCO_TRANSPORT_NCCL), "nccl");
  ASSERT_STR_EQ(fco_transport_name(FCO_TRANSPORT_LOCAL), "local");
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
  ar_works(&g_w, &g_b, N, 1);
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
  ar_works(&g_w, &g_b, N, 1);
  t_context("%s", "");
}

/* As group_refusal, but the refused call leaves the refused rank with fewer calls queued than
 * its peers (they queue two, it queues a good one and then the refused one): the world is
 * cancelled with the refusal's message, not refused for its unequal call sequences ("rank 0 has
 * 2 calls ..., rank P-1 has 1": a mutant that ran the sequence check on a world holding a
 * refused call passed group_refusal, whose sequences are equal). */
static void group_refusal_uneven(void) {
  const int P = g_w.n;
  if (P < 2) return;
  t_context("a group with rank %d's second call refused (its peers queue two)", P - 1);
  poison();
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < P; r++)
    for (int k = 0; k < 2; k++) {
      fco_result_t e = fco_allreduce(g_w.comms[r], g_b.in[r],
                                     r == P - 1 && k == 1 ? NULL : g_b.out[r], N, FCO_F32, 1,
                                     NULL);
      if (e != FCO_OK && first == FCO_OK) first = e;
    }
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_RES(first, FCO_ERR_INVALID_ARGUMENT);
  char want[64];
  snprintf(want, sizeof want, "rank %d's call in this group failed", P - 1);
  for (int r = 0; r < P - 1; r++) ASSERT_MSG(g_w.comms[r], want);
  ASSERT_MSG(g_w.comms[P - 1], "out");
  for (int r = 0; r < P; r++)
    if (t_contains(fco_last_error(g_w.comms[r]), "calls of its world"))
      t_fail(__FILE__, __LINE__, "rank %d's message is the sequence check's: \"%s\"", r,
             fco_last_error(g_w.comms[r]));
  t_sync(&g_w);
  assert_untouched(__LINE__);
  for (int r = 0; r < P; r++) ASSERT_OK(fco_comm_get_async_error(g_w.comms[r]));
  ar_works(&g_w, &g_b, N, 1);
  t_context("%s", "");
}

/* Queries that fail inside a group (fco_allreduce_workspace with bytes NULL, fco_mem_alloc of 0
 * bytes, on every rank between its calls) are no operator calls: fco_group_end issues the
 * group's calls, which complete (until session 54 any failure set on a rank of the world
 * cancelled every call of the group, as a refused operator call does). */
static void group_query_failure(void) {
  const int P = g_w.n;
  t_context("a group with failing queries between its calls (%d ranks)", P);
  uint64_t seed = t_next_seed();
  t_ar_prepare(&g_w, &g_b, N, FCO_F32, 0, seed);
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < P; r++) {
    ASSERT_RES(fco_allreduce_workspace(g_w.comms[r], N, FCO_F32, 1, NULL),
               FCO_ERR_INVALID_ARGUMENT);
    ASSERT_OK(fco_allreduce(g_w.comms[r], g_b.in[r], g_b.out[r], N, FCO_F32, 1, NULL));
    void* p = NULL;
    ASSERT_NE(fco_mem_alloc(g_w.comms[r], 0, &p), FCO_OK);
  }
  ASSERT_OK(fco_group_end());
  t_sync(&g_w);
  ASSERT_EQ(t_ar_check(&g_w, &g_b, seed), 0);
  for (int r = 0; r < P; r++) ASSERT_STR_HAS(fco_last_plan(g_w.comms[r]), "allreduce impl 1");
  t_context("%s", "");
}

/* A group whose every call is refused returns the refusal's code from fco_group_end (until
 * session 55 it returned FCO_OK: nothing was queued), and a refusal on a lone call as well; the
 * communicators stay usable. */
static void group_all_refused(void) {
  const int P = g_w.n;
  t_context("a group with every rank's call refused (%d ranks)", P);
  poison();
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < P; r++)
    ASSERT_RES(fco_allreduce(g_w.comms[r], g_b.in[r], NULL, N, FCO_F32, 1, NULL),
               FCO_ERR_INVALID_ARGUMENT);
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(NULL, "out");
  t_sync(&g_w);
  assert_untouched(__LINE__);
  /* a nested group: the outer fco_group_end reports the inner refusal */
  ASSERT_OK(fco_group_start());
  ASSERT_OK(fco_group_start());
  ASSERT_RES(fco_allreduce(g_w.comms[0], g_b.in[0], g_b.out[0], 0, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_OK(fco_group_end());
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(NULL, "count");
  /* the next group starts clean */
  ASSERT_OK(fco_group_start());
  ASSERT_OK(fco_group_end());
  ar_works(&g_w, &g_b, N, 1);
  t_context("%s", "");
}

/* fco_comm_destroy of a communicator with a call queued in this thread's open group is refused
 * (FCO_ERR_INVALID_USAGE, nothing freed): before session 55 it freed the communicator and
 * fco_group_end then ran the queued call on freed memory. The group then completes. */
static void destroy_in_group(void) {
  const int P = g_w.n;
  t_context("fco_comm_destroy inside a group (%d ranks)", P);
  uint64_t seed = t_next_seed();
  t_ar_prepare(&g_w, &g_b, N, FCO_F32, 0, seed);
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < P; r++)
    ASSERT_OK(fco_allreduce(g_w.comms[r], g_b.in[r], g_b.out[r], N, FCO_F32, 1, NULL));
  ASSERT_RES(fco_comm_destroy(g_w.comms[0]), FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(g_w.comms[0], "fco_group_end first");
  ASSERT_OK(fco_group_end());
  t_sync(&g_w);
  ASSERT_EQ(t_ar_check(&g_w, &g_b, seed), 0);
  t_context("%s", "");
}

/* A world whose rank 1 was destroyed (allowed: only rank 0's call was queued) refuses rank 0's
 * calls at once (FCO_ERR_INVALID_USAGE naming rank 1), queued or direct, and rank 0 stays
 * healthy (until session 57 the cpu transport ran the call, which waited for rank 1 until the
 * timeout and left rank 0 unusable). */
static void peer_destroyed(void) {
  t_context("%s", "a world with rank 1 destroyed");
  fco_config_t cfg;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = 5000;
  t_world_t w;
  ASSERT_OK(t_world_init(&w, g_t, 2, &cfg));
  t_ar_bufs_t b;
  t_ar_alloc(&w, &b, N);
  t_ar_prepare(&w, &b, N, FCO_F32, 0, t_next_seed());
  ASSERT_OK(fco_group_start());
  ASSERT_OK(fco_allreduce(w.comms[0], b.in[0], b.out[0], N, FCO_F32, 1, NULL));
  ASSERT_OK(fco_comm_destroy(w.comms[1]));
  w.comms[1] = NULL;
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(w.comms[0], "rank 1 of this fco_comm_init_all group was destroyed");
  ASSERT_RES(fco_allreduce(w.comms[0], b.in[0], b.out[0], N, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_USAGE);
  ASSERT_OK(fco_comm_get_async_error(w.comms[0]));
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0); /* rank 0; rank 1's NULL is accepted */
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
  adjacent_buffers();
  query_args();
  init_args();
  group_refusal();
  group_refusal_uneven();
  group_query_failure();
  group_all_refused();
  destroy_in_group();
  t_ar_free(&g_w, &g_b);
  t_world_destroy(&g_w, 0);
  if (n >= 2) peer_destroyed();
  if (g_t != FCO_TRANSPORT_NCCL && t_max_ranks(g_t) >= 2) call_mismatch(g_t);
  else printf("count/dtype mismatch part skipped on transport %s\n", fco_transport_name(g_t));
  if (g_t == FCO_TRANSPORT_CPU) {
    init_mismatch();
    reserve_mismatch();
    grow_mismatch_threads();
  } else {
    printf("init (nranks, one rank twice) / reserve mismatch parts skipped: they fork "
           "processes (cpu transport only)\n");
  }
  printf("PASS\n");
  return 0;
}
