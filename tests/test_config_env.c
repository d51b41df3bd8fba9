/*
 * test_config_env.c — configuration reaches the communicator: FCO_TRANSPORT picks the
 * transport when cfg leaves it to AUTO (and an explicit cfg.transport wins over it; "auto" in
 * any case is as unset, names match without case; local in a CPU-only build: FCO_ERR_UNSUPPORTED);
 * FCO_TIMEOUT_MS bounds waits when cfg.timeout_ms is 0 (and cfg.timeout_ms wins over it; 0 or
 * a negative value is the default, 30 s);
 * cfg.max_workspace_bytes caps the workspace: a call needing more fails with
 * FCO_ERR_OUT_OF_MEMORY, a message, and nothing written, and the communicator keeps working.
 * Also the suite's own knob helper (tests/common: t_knob_set / t_knob_reset), on which every
 * test's knob-setting parts rely: a reset puts back the caller's value, or unsets; and the
 * suite's FCO_TEST_MAX_RANKS (1..8, anything else said once and 4). And integer
 * knobs (every FCO_* number the library reads, src/core/error.c fco_env_int): size suffixes
 * k / M / G with an optional B or iB, decimal or hex after 0x (never octal); a value that is not
 * an integer, or out of range with its suffix, is ignored (as if unset) and said so on stderr,
 * once per knob (also a name longer than the record keeps; 32 knobs in a fresh process). String
 * knobs (FCO_GA_TILE, FCO_GA_EPI, FCO_EA_DECODE: fco_env_choice) likewise: a name not among
 * the choices is ignored and said once, with the list;
 * and on/off knobs (fco_env_flag): 0 or 1, anything else ignored and said once. cfg.debug = 1
 * logs the init and errors to stderr ("fco[rank/nranks] ..."); 0 leaves stderr alone; FCO_DEBUG=1
 * (read once a process: checked in a child process) logs them too, and errors of calls without a
 * communicator as "fco error ...".
 *   make test   or   build/tests/test_config_env   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static fco_transport_t g_t;
static char* g_env_saved;

static void restore_transport_env(void) {
  if (g_env_saved) setenv("FCO_TRANSPORT", g_env_saved, 1);
  else unsetenv("FCO_TRANSPORT");
}

static void check_transport(fco_comm_t* comms, int n, fco_transport_t want) {
  for (int r = 0; r < n; r++) {
    fco_transport_t got = FCO_TRANSPORT_AUTO;
    ASSERT_OK(fco_comm_transport(comms[r], &got));
    ASSERT_EQ(got, want);
  }
}

static void transport_env(void) {
  fco_comm_t comms[2];
  fco_config_t cfg;
  t_context("FCO_TRANSPORT=cpu, cfg NULL");
  setenv("FCO_TRANSPORT", "cpu", 1);
  ASSERT_OK(fco_comm_init_all(comms, 2, NULL, NULL));
  check_transport(comms, 2, FCO_TRANSPORT_CPU);
  for (int r = 0; r < 2; r++) ASSERT_OK(fco_comm_destroy(comms[r]));

  t_context("FCO_TRANSPORT=cpu, cfg.transport AUTO, fco_comm_init");
  fco_unique_id_t id;
  fco_comm_t c = NULL;
  ASSERT_OK(fco_get_unique_id(&id));
  ASSERT_OK(fco_config_init(&cfg));
  ASSERT_OK(fco_comm_init(&c, 1, 0, &id, &cfg));
  check_transport(&c, 1, FCO_TRANSPORT_CPU);
  ASSERT_OK(fco_comm_destroy(c));

  t_context("FCO_TRANSPORT=bogus, cfg.transport = cpu: cfg wins");
  setenv("FCO_TRANSPORT", "bogus", 1);
  cfg.transport = FCO_TRANSPORT_CPU;
  ASSERT_OK(fco_comm_init_all(comms, 2, NULL, &cfg));
  check_transport(comms, 2, FCO_TRANSPORT_CPU);
  for (int r = 0; r < 2; r++) ASSERT_OK(fco_comm_destroy(comms[r]));

  /* FCO_TRANSPORT=local is honoured too: where no GPU can run it, init fails (it never falls
   * back to cpu silently). */
  t_context("FCO_TRANSPORT=local, cfg NULL");
  setenv("FCO_TRANSPORT", "local", 1);
  comms[0] = NULL;
  fco_result_t r = fco_comm_init_all(comms, 1, NULL, NULL);
  if (t_max_ranks(FCO_TRANSPORT_LOCAL) > 0) {
    ASSERT_OK(r);
    check_transport(comms, 1, FCO_TRANSPORT_LOCAL);
    ASSERT_OK(fco_comm_destroy(comms[0]));
  } else {
    ASSERT_NE(r, FCO_OK);
    ASSERT_NULL(comms[0]);
#ifndef FCO_HAVE_CUDA
    /* a CPU-only build says so (not a bad argument: "local" is a transport, just not here) */
    ASSERT_EQ(r, FCO_ERR_UNSUPPORTED);
    ASSERT_MSG(NULL, "CUDA");
    ASSERT_MSG(NULL, "local");
#endif
    printf("FCO_TRANSPORT=local without a usable GPU: %s: %s\n", fco_result_string(r),
           fco_last_error(NULL));
  }

  /* FCO_TRANSPORT=auto (any case) is as if unset, and names match without case: "CPU" is cpu. */
  fco_transport_t unset_t = FCO_TRANSPORT_AUTO;
  unsetenv("FCO_TRANSPORT");
  ASSERT_OK(fco_comm_init_all(comms, 1, NULL, NULL));
  ASSERT_OK(fco_comm_transport(comms[0], &unset_t));
  ASSERT_OK(fco_comm_destroy(comms[0]));
  ASSERT_NE(unset_t, FCO_TRANSPORT_AUTO);
  static const char* const as_unset[] = {"auto", "AUTO", "Auto"};
  for (size_t i = 0; i < sizeof as_unset / sizeof as_unset[0]; i++) {
    t_context("FCO_TRANSPORT=%s, cfg NULL: as unset (%s)", as_unset[i],
              fco_transport_name(unset_t));
    setenv("FCO_TRANSPORT", as_unset[i], 1);
    ASSERT_OK(fco_comm_init_all(comms, 1, NULL, NULL));
    check_transport(comms, 1, unset_t);
    ASSERT_OK(fco_comm_destroy(comms[0]));
  }
  t_context("FCO_TRANSPORT=CPU, cfg NULL");
  setenv("FCO_TRANSPORT", "CPU", 1);
  ASSERT_OK(fco_comm_init_all(comms, 2, NULL, NULL));
  check_transport(comms, 2, FCO_TRANSPORT_CPU);
  for (int i = 0; i < 2; i++) ASSERT_OK(fco_comm_destroy(comms[i]));

  if (t_is_gpu(g_t)) {
    int n = t_max_ranks(g_t) < 2 ? 1 : 2;
    t_context("FCO_TRANSPORT=%s, cfg NULL", fco_transport_name(g_t));
    setenv("FCO_TRANSPORT", fco_transport_name(g_t), 1);
    ASSERT_OK(fco_comm_init_all(comms, n, NULL, NULL));
    check_transport(comms, n, g_t);
    for (int r = 0; r < n; r++) ASSERT_OK(fco_comm_destroy(comms[r]));
  }
  restore_transport_env();
  t_context("%s", "");
}

/* Rank 1 of a cpu world, joining from a thread with a bound of its own (10 s): *go tells the
 * main thread that it is about to join. */
typedef struct {
  fco_unique_id_t id;
  fco_comm_t comm;
  fco_result_t r;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go;
} rank1_t;

static void* join_rank1(void* p) {
  rank1_t* j = (rank1_t*)p;
  fco_config_t cfg;
  fco_config_init(&cfg);
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = 10000;
  pthread_mutex_lock(&j->mu);
  j->go = 1;
  pthread_cond_signal(&j->cv);
  pthread_mutex_unlock(&j->mu);
  j->r = fco_comm_init(&j->comm, 2, 1, &j->id, &cfg);
  return NULL;
}

/* A 2-rank cpu world whose rank 0 has cfg (the bound under test, also its join's) and rank 1
 * a generous one. Rank 1 joins first, so rank 0 finds it there: the short bound is left to the
 * call meant to time out (both ranks joining with 250 ms from fco_comm_init_all failed on a
 * loaded 2-core machine: "only 1 of 2 ranks joined within 250 ms"). Should rank 0 still miss
 * rank 1 (a join it gave up on: FCO_ERR_TIMEOUT "joined within"), a fresh id, at most 3 tries. */
static void cpu_world_late_rank0(t_world_t* w, const fco_config_t* cfg) {
  for (int attempt = 1;; attempt++) {
    rank1_t j;
    pthread_t th;
    fco_comm_t c0 = NULL;
    memset(&j, 0, sizeof j);
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    ASSERT_OK(fco_get_unique_id(&j.id));
    ASSERT_EQ(pthread_create(&th, NULL, join_rank1, &j), 0);
    pthread_mutex_lock(&j.mu);
    while (!j.go) pthread_cond_wait(&j.cv, &j.mu);
    pthread_mutex_unlock(&j.mu);
    fco_result_t r0 = fco_comm_init(&c0, 2, 0, &j.id, cfg);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", fco_last_error(NULL)); /* this thread's */
    ASSERT_EQ(pthread_join(th, NULL), 0);
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    if (r0 == FCO_OK) {
      ASSERT_OK(j.r);
      memset(w, 0, sizeof *w);
      w->n = 2;
      w->transport = FCO_TRANSPORT_CPU;
      w->comms[0] = c0;
      w->comms[1] = j.comm;
      return;
    }
    if (j.comm) ASSERT_OK(fco_comm_destroy(j.comm));
    if (r0 != FCO_ERR_TIMEOUT || !t_contains(msg, "joined within") || attempt == 3)
      t_fail(__FILE__, __LINE__, "rank 0's fco_comm_init (try %d): %s: %s", attempt,
             fco_result_string(r0), msg);
    printf("rank 0 missed rank 1's join (try %d, a loaded machine): again\n", attempt);
  }
}

/* The env bound applies when cfg.timeout_ms is 0; cfg.timeout_ms > 0 overrides it. With the
 * default (30 s) or the other value (10 min) the call would not come back within the bound. */
static void timeout_env(void) {
  if (t_max_ranks(g_t) < 2) {
    printf("FCO_TIMEOUT_MS part skipped: transport %s has fewer than 2 ranks here\n",
           fco_transport_name(g_t));
    return;
  }
  for (int from_cfg = 0; from_cfg < 2; from_cfg++) {
    fco_config_t cfg;
    t_world_t w;
    double ms = 0;
    ASSERT_OK(fco_config_init(&cfg));
    setenv("FCO_TIMEOUT_MS", from_cfg ? "600000" : "250", 1);
    if (from_cfg) cfg.timeout_ms = 250;
    t_context("timeout from %s", from_cfg ? "cfg.timeout_ms (env 600000)" : "FCO_TIMEOUT_MS");
    if (g_t == FCO_TRANSPORT_CPU) {
      cfg.transport = FCO_TRANSPORT_CPU;
      cpu_world_late_rank0(&w, &cfg);
    } else {
      ASSERT_OK(t_world_init(&w, g_t, 2, &cfg));
    }
    unsetenv("FCO_TIMEOUT_MS");
    ASSERT_RES(t_lone_rank0_allreduce(&w, 1, 1000, &ms), FCO_ERR_TIMEOUT);
    printf("timeout from %s: FCO_ERR_TIMEOUT after %.0f ms\n",
           from_cfg ? "cfg.timeout_ms" : "FCO_TIMEOUT_MS", ms);
    if (g_t == FCO_TRANSPORT_CPU) /* the bound it waited for: rank 0's, not rank 1's */
      ASSERT_STR_HAS(fco_last_error(w.comms[0]), "within 250 ms");
    ASSERT_LT(ms, 20 * 250);
    t_world_destroy(&w, 0);
  }
  t_context("%s", "");
}

/* FCO_TIMEOUT_MS that is not a positive number ("0", "-5") is the default, 30000 ms (fco.h),
 * as a rank reports when a peer's timeout aborts its join: rank 1 (cfg 0: the env) and rank 0
 * (cfg.timeout_ms = 500) of 3 join from two threads; rank 0 gives up after 500 ms, rank 1,
 * still within its bound, fails with it, naming its own bound. */
typedef struct {
  fco_unique_id_t id;
  int rank, timeout_ms;
  fco_result_t r;
  char msg[512];
} joiner_t;

static void* join_alone(void* p) {
  joiner_t* j = (joiner_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  fco_config_init(&cfg);
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = j->timeout_ms;
  j->r = fco_comm_init(&c, 3, j->rank, &j->id, &cfg);
  snprintf(j->msg, sizeof j->msg, "%s", fco_last_error(NULL)); /* this thread's */
  if (c) fco_comm_destroy(c);
  return NULL;
}

static void timeout_env_default(void) {
  static const char* const kNotPositive[] = {"0", "-5"};
  for (int i = 0; i < 2; i++) {
    joiner_t j[2];
    pthread_t th[2];
    memset(j, 0, sizeof j);
    t_context("FCO_TIMEOUT_MS=%s: the default bound", kNotPositive[i]);
    setenv("FCO_TIMEOUT_MS", kNotPositive[i], 1);
    ASSERT_OK(fco_get_unique_id(&j[0].id));
    j[1].id = j[0].id;
    j[0].timeout_ms = 500;
    j[1].rank = 1;
    for (int k = 1; k >= 0; k--) ASSERT_EQ(pthread_create(&th[k], NULL, join_alone, &j[k]), 0);
    for (int k = 0; k < 2; k++) ASSERT_EQ(pthread_join(th[k], NULL), 0);
    unsetenv("FCO_TIMEOUT_MS");
    ASSERT_RES(j[0].r, FCO_ERR_TIMEOUT);
    ASSERT_RES(j[1].r, FCO_ERR_TIMEOUT);
    if (!t_contains(j[1].msg, "(timeout 30000 ms)"))
      t_fail(__FILE__, __LINE__, "rank 1's message does not give the default bound: \"%s\"",
             j[1].msg);
  }
  printf("FCO_TIMEOUT_MS 0 / -5: the default bound\n");
  t_context("%s", "");
}

static void workspace_cap(void) {
  const int64_t cap = 64 << 10;
  int n = t_max_ranks(g_t) < 2 ? 1 : 2;
  fco_config_t cfg;
  t_world_t w;
  t_ar_bufs_t b;
  size_t small = 1000, big = 100000, need = 0, held = 0;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.max_workspace_bytes = cap;
  ASSERT_OK(t_world_init(&w, g_t, n, &cfg));
  t_ar_alloc(&w, &b, big);
  ASSERT_OK(fco_allreduce_workspace(w.comms[0], small, FCO_F32, 1, &need));
  ASSERT_LE(need, cap);
  ASSERT_OK(fco_allreduce_workspace(w.comms[0], big, FCO_F32, 1, &need));
  ASSERT_GT(need, cap);

  for (int round = 0; round < 2; round++) {
    uint64_t seed = t_next_seed();
    t_context("within the cap, round %d", round);
    t_ar_prepare(&w, &b, small, FCO_F32, round, seed);
    ASSERT_OK(t_ar_run(&w, &b, 1));
    t_sync(&w);
    ASSERT_EQ(t_ar_check(&w, &b, seed), 0);

    t_context("over the cap (%zu bytes needed, cap %lld), round %d", need, (long long)cap, round);
    t_ar_prepare(&w, &b, big, FCO_F32, 0, seed);
    ASSERT_RES(t_ar_run(&w, &b, 1), FCO_ERR_OUT_OF_MEMORY);
    for (int r = 0; r < n; r++) { /* every rank of the refused group, not the first only */
      ASSERT_MSG(w.comms[r], "max_workspace_bytes");
      ASSERT_STR_EQ(fco_last_plan(w.comms[r]), ""); /* none keeps the good call's plan */
    }
    t_sync(&w);
    ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
    for (int r = 0; r < n; r++) {
      ASSERT_OK(fco_comm_workspace_bytes(w.comms[r], &held));
      ASSERT_LE(held, cap);
    }
  }
  ASSERT_RES(fco_comm_reserve(w.comms[0], (size_t)cap + 1), FCO_ERR_OUT_OF_MEMORY);
  ASSERT_MSG(w.comms[0], "max_workspace_bytes");
  for (int r = 0; r < n; r++) ASSERT_OK(fco_comm_reserve(w.comms[r], (size_t)cap));
  ASSERT_OK(fco_comm_workspace_bytes(w.comms[0], &held));
  ASSERT_EQ(held, cap);
  ASSERT_OK(fco_comm_get_async_error(w.comms[0])); /* not sticky: a plain argument failure */
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);
  /* The cap's edge on the op path (src/core/group.c): a cap one byte under the call's need
   * refuses it, nothing written; a cap of exactly the need runs it. */
  for (int edge = 0; edge < 2; edge++) {
    cfg.max_workspace_bytes = (int64_t)need - 1 + edge;
    t_context("cap %lld for a call needing %zu bytes", (long long)cfg.max_workspace_bytes, need);
    ASSERT_OK(t_world_init(&w, g_t, n, &cfg));
    t_ar_alloc(&w, &b, big);
    uint64_t seed = t_next_seed();
    t_ar_prepare(&w, &b, big, FCO_F32, 0, seed);
    if (edge) {
      ASSERT_OK(t_ar_run(&w, &b, 1));
      t_sync(&w);
      ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
    } else {
      ASSERT_RES(t_ar_run(&w, &b, 1), FCO_ERR_OUT_OF_MEMORY);
      ASSERT_MSG(w.comms[0], "max_workspace_bytes");
      t_sync(&w);
      ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
    }
    t_ar_free(&w, &b);
    t_world_destroy(&w, 0);
  }
  t_context("%s", "");
}

/* t_knob_reset restores what the environment held before the first t_knob_* of that name. */
static void knob_helper(void) {
  const char *a = "FCO_TEST_KNOB_PROBE_A", *b = "FCO_TEST_KNOB_PROBE_B";
  setenv(a, "caller", 1); /* as `FCO_X=caller tests/run.sh` would */
  unsetenv(b);
  t_knob_set(a, "part");
  ASSERT_STR_EQ(getenv(a), "part");
  t_knob_set(a, NULL);
  ASSERT_NULL(getenv(a));
  t_knob_reset(a);
  ASSERT_STR_EQ(getenv(a), "caller");
  setenv(a, "changed outside the helper", 1); /* the first touch recorded the caller's value */
  t_knob_reset(a);
  ASSERT_STR_EQ(getenv(a), "caller");
  t_knob_set(b, "1");
  ASSERT_STR_EQ(getenv(b), "1");
  t_knob_reset(b);
  ASSERT_NULL(getenv(b));
  unsetenv(a);
  printf("knob helper: reset restores the caller's value / unset\n");
}

/* Runs fn with stderr going to a temporary file; returns what it wrote (malloc'd). */
/* What was written to tmp (from its start to its end), as a string; tmp closed. */
static char* slurp(FILE* tmp) {
  ASSERT_GE(fseek(tmp, 0, SEEK_END), 0); /* a child may have written through a shared offset */
  const long n = ftell(tmp);
  ASSERT_GE(n, 0);
  char* out = calloc((size_t)n + 1, 1);
  ASSERT_NOT_NULL(out);
  rewind(tmp);
  ASSERT_EQ(fread(out, 1, (size_t)n, tmp), (size_t)n);
  fclose(tmp);
  return out;
}

static char* stderr_of(void (*fn)(void)) {
  fflush(stderr);
  FILE* tmp = tmpfile();
  ASSERT_NOT_NULL(tmp);
  int saved = dup(2);
  ASSERT_GE(saved, 0);
  ASSERT_GE(dup2(fileno(tmp), 2), 0);
  fn();
  fflush(stderr);
  ASSERT_GE(dup2(saved, 2), 0);
  close(saved);
  return slurp(tmp);
}

static const char* const kProbe = "FCO_TEST_ENV_INT_PROBE";
static long long g_got;
static void read_probe(void) { g_got = fco_env_int(kProbe, -7); }
static void init_with_bad_timeout(void) {
  fco_comm_t comms[2];
  int n = t_max_ranks(g_t) < 2 ? 1 : 2;
  ASSERT_OK(fco_comm_init_all(comms, n, NULL, NULL));
  for (int r = 0; r < n; r++) ASSERT_OK(fco_comm_destroy(comms[r]));
}

static void env_ints(void) {
  static const struct {
    const char* v;
    long long want;
  } good[] = {{"12", 12},          {"-1", -1},           {"0x40", 64},        {"4k", 4096},
              {"4K", 4096},        {"4M", 4 << 20},      {"4MB", 4 << 20},    {"4MiB", 4 << 20},
              {"1G", 1LL << 30},   {"1gb", 1LL << 30},   {" 250 ", 250},      {"250\n", 250},
              {"010", 10},         {"-4k", -4096},       {"0X1f", 31},
              {"8589934591G", 8589934591LL << 30},
              /* hex after blanks or a sign; lower-case m; kib; a trailing tab */
              {" 0x10", 16},       {"\t0x10", 16},      {"-0x10", -16},      {"+0x10", 16},
              {"4m", 4 << 20},     {"2kib", 2048},       {"2KiB", 2048},      {"3\t", 3},
              /* a newline before hex; in range with a suffix down to LLONG_MIN, as without */
              {"\n0x10", 16},      {"-8589934591G", -(8589934591LL << 30)},
              {"-8589934592G", LLONG_MIN}, {"-9223372036854775808", LLONG_MIN}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    t_context("%s=\"%s\"", kProbe, good[i].v);
    setenv(kProbe, good[i].v, 1);
    char* err = stderr_of(read_probe);
    ASSERT_EQ(g_got, good[i].want);
    ASSERT_STR_EQ(err, ""); /* a valid value says nothing */
    free(err);
  }
  t_context("%s unset / empty", kProbe);
  unsetenv(kProbe);
  ASSERT_EQ(fco_env_int(kProbe, -7), -7);
  setenv(kProbe, "", 1);
  ASSERT_EQ(fco_env_int(kProbe, -7), -7);
  /* not integers, or out of long long's range (once wrapped or clamped silently) */
  static const char* const bad[] = {"abc",  "30s", "4x", "1.5", "4MBs", "on",
                                    "99999999999999999999", "8589934592G", "-8589934593G", "0x",
                                    /* no digits (strtoll reads none: not 0); B only after a
                                     * suffix; iB with a lower-case i */
                                    " ", "k", "+", "4B", "2KIB"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    t_context("%s=\"%s\"", kProbe, bad[i]);
    setenv(kProbe, bad[i], 1);
    char* err = stderr_of(read_probe);
    ASSERT_EQ(g_got, -7); /* ignored: the default */
    /* said once per knob for the process: only the first bad value of this name prints */
    if (i == 0) {
      ASSERT_NOT_NULL(strstr(err, kProbe));
      ASSERT_NOT_NULL(strstr(err, "is not an integer"));
      ASSERT_NOT_NULL(strstr(err, "\"abc\""));
    } else {
      ASSERT_STR_EQ(err, "");
    }
    free(err);
  }
  /* errno left at ERANGE by the caller (or an earlier out-of-range value) does not refuse a
   * valid one */
  t_context("%s=\"12\" with errno ERANGE before", kProbe);
  setenv(kProbe, "12", 1);
  errno = ERANGE;
  ASSERT_EQ(fco_env_int(kProbe, -7), 12);
  unsetenv(kProbe);
  /* Through the library: FCO_TIMEOUT_MS read at init; the init works (the default bound) and
   * the message names the knob, once for two inits. */
  t_context("FCO_TIMEOUT_MS=\"30s\" at fco_comm_init_all");
  setenv("FCO_TIMEOUT_MS", "30s", 1);
  char* err = stderr_of(init_with_bad_timeout);
  ASSERT_NOT_NULL(strstr(err, "FCO_TIMEOUT_MS=\"30s\" is not an integer"));
  free(err);
  err = stderr_of(init_with_bad_timeout);
  ASSERT_NULL(strstr(err, "FCO_TIMEOUT_MS"));
  free(err);
  unsetenv("FCO_TIMEOUT_MS");
  printf("integer knobs: suffixes parsed, bad values ignored and reported once\n");
  t_context("%s", "");
}

/* cfg.debug > 0 logs to stderr, each line "fco[rank/nranks] ...": the init and every error;
 * cfg.debug 0 (the default, FCO_DEBUG unset) leaves stderr alone. */
static fco_config_t g_dbg_cfg;
static void one_rank_with_an_error(void) {
  fco_unique_id_t id;
  fco_comm_t c = NULL;
  ASSERT_OK(fco_get_unique_id(&id));
  ASSERT_OK(fco_comm_init(&c, 1, 0, &id, &g_dbg_cfg));
  ASSERT_RES(fco_comm_rank(c, NULL), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_OK(fco_comm_destroy(c));
}

static void debug_log(void) {
  if (fco_env_flag("FCO_DEBUG", 0)) {
    printf("cfg.debug part skipped: FCO_DEBUG=1 logs whatever cfg.debug says\n");
    return;
  }
  ASSERT_OK(fco_config_init(&g_dbg_cfg));
  g_dbg_cfg.transport = FCO_TRANSPORT_CPU;
  t_context("cfg.debug 0");
  char* err = stderr_of(one_rank_with_an_error);
  ASSERT_STR_EQ(err, "");
  free(err);
  t_context("cfg.debug 1");
  g_dbg_cfg.debug = 1;
  err = stderr_of(one_rank_with_an_error);
  ASSERT_NOT_NULL(strstr(err, "fco[0/1] init: transport cpu"));
  ASSERT_NOT_NULL(strstr(err, "fco[0/1] error"));
  ASSERT_NOT_NULL(strstr(err, "rank is NULL"));
  free(err);
  printf("cfg.debug: silent at 0, logs init and errors at 1\n");
  t_context("%s", "");
}

/* FCO_DEBUG=1 logs every error, also those of calls without a communicator ("fco error ..."), and
 * a communicator's lines carry its rank ("fco[0/1] ..."). The library reads FCO_DEBUG once a
 * process, so this runs in a fresh one: this program again (/proc/self/exe --debug-child) with
 * FCO_DEBUG=1, its stderr into a file read here. */
static int debug_child(void) {
  fco_comm_t c = NULL;
  fco_config_t cfg;
  fco_unique_id_t id;
  int r = 0;
  if (fco_comm_rank(NULL, &r) != FCO_ERR_INVALID_ARGUMENT) return 2;
  if (fco_config_init(&cfg) != FCO_OK || fco_get_unique_id(&id) != FCO_OK) return 3;
  cfg.transport = FCO_TRANSPORT_CPU; /* cfg.debug 0: FCO_DEBUG alone turns the log on */
  if (fco_comm_init(&c, 1, 0, &id, &cfg) != FCO_OK) return 4;
  if (fco_comm_rank(c, NULL) != FCO_ERR_INVALID_ARGUMENT) return 5;
  return fco_comm_destroy(c) == FCO_OK ? 0 : 6;
}

/* This program again as `mode` (with knob=1 where knob is not NULL): its stderr; it must exit 0. */
static char* child_stderr(const char* mode, const char* knob) {
  FILE* tmp = tmpfile();
  ASSERT_NOT_NULL(tmp);
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (knob) setenv(knob, "1", 1);
    if (dup2(fileno(tmp), 2) < 0) _exit(10);
    execl("/proc/self/exe", "test_config_env", mode, (char*)NULL);
    _exit(11);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0);
  return slurp(tmp);
}

static void debug_env(void) {
  t_context("FCO_DEBUG=1 in a fresh process");
  char* err = child_stderr("--debug-child", "FCO_DEBUG");
  /* the comm-less error's line starts with "fco error", at the start of stderr or of a line */
  const char* line = strstr(err, "fco error");
  if (!line || (line != err && line[-1] != '\n') || !strstr(line, "comm is NULL"))
    t_fail(__FILE__, __LINE__, "no \"fco error ... comm is NULL\" line in: \"%s\"", err);
  ASSERT_NOT_NULL(strstr(err, "fco[0/1] init: transport cpu"));
  ASSERT_NOT_NULL(strstr(err, "fco[0/1] error"));
  free(err);
  printf("FCO_DEBUG=1: comm-less and rank lines logged\n");
  t_context("%s", "");
}

/* The once-per-knob record (env_bad): a name longer than the record keeps (47 characters) is
 * still said once; names alike in their first 24 characters are two knobs, each said; and a
 * fresh process says each of 32 bad knobs once (--said-child, read by env_said). */
static const char* g_name;
static void read_named(void) { g_got = fco_env_int(g_name, -7); }
static char* said_of(const char* name) {
  g_name = name;
  setenv(name, "x", 1);
  char* err = stderr_of(read_named);
  unsetenv(name);
  ASSERT_EQ(g_got, -7);
  return err;
}
static int said_child(void) {
  char name[32];
  for (int i = 0; i < 32; i++)
    for (int twice = 0; twice < 2; twice++) {
      snprintf(name, sizeof name, "FCO_TEST_ENV_SAID_%02d", i);
      setenv(name, "x", 1);
      if (fco_env_int(name, -7) != -7) return 2;
    }
  return 0;
}
static void env_said(void) {
  static const char* const kLong = "FCO_TEST_ENV_SAID_PROBE_WITH_A_NAME_LONGER_THAN_THE_RECORD";
  t_context("%s twice", kLong);
  char* err = said_of(kLong);
  ASSERT_STR_HAS(err, "FCO_TEST_ENV_SAID_PROBE_WITH_A_NAME_LONGER_THAN_THE_RECORD=\"x\" is not");
  free(err);
  err = said_of(kLong);
  ASSERT_STR_EQ(err, "");
  free(err);
  static const char* const kAlike[] = {"FCO_TEST_ENV_SAID_PROBE_A", "FCO_TEST_ENV_SAID_PROBE_B"};
  for (int i = 0; i < 2; i++) {
    t_context("%s", kAlike[i]);
    err = said_of(kAlike[i]);
    ASSERT_STR_HAS(err, kAlike[i]);
    ASSERT_STR_HAS(err, "=\"x\" is not an integer");
    free(err);
  }
  t_context("32 bad knobs in a fresh process");
  err = child_stderr("--said-child", NULL);
  int n = 0;
  for (const char* p = err; (p = strstr(p, "is not an integer")) != NULL; p++) n++;
  if (n != 32) t_fail(__FILE__, __LINE__, "%d messages for 32 knobs read twice: \"%s\"", n, err);
  free(err);
  printf("said once: long names, names alike, 32 knobs\n");
  t_context("%s", "");
}

static const char* const kChoiceProbe = "FCO_TEST_ENV_CHOICE_PROBE";
static const char* const kChoices[] = {"tma", "tma2", "wgmma", NULL};
static int g_choice;
static void read_choice(void) { g_choice = fco_env_choice(kChoiceProbe, kChoices, -3); }

static void env_choices(void) {
  static const struct {
    const char* v;
    int want;
  } good[] = {{"tma", 0},   {"tma2", 1},  {"wgmma", 2},
               {"TMA2", 1},  {"WgMMA", 2}, {"tma \n", 0}, {"tma2\t", 1}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    t_context("%s=\"%s\"", kChoiceProbe, good[i].v);
    setenv(kChoiceProbe, good[i].v, 1);
    char* err = stderr_of(read_choice);
    ASSERT_EQ(g_choice, good[i].want);
    ASSERT_STR_EQ(err, "");
    free(err);
  }
  t_context("%s unset / empty", kChoiceProbe);
  unsetenv(kChoiceProbe);
  ASSERT_EQ(fco_env_choice(kChoiceProbe, kChoices, -3), -3);
  setenv(kChoiceProbe, "", 1);
  ASSERT_EQ(fco_env_choice(kChoiceProbe, kChoices, -3), -3);
  static const char* const bad[] = {"tma3", "tm", "tma2x", " tma", "1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    t_context("%s=\"%s\"", kChoiceProbe, bad[i]);
    setenv(kChoiceProbe, bad[i], 1);
    char* err = stderr_of(read_choice);
    ASSERT_EQ(g_choice, -3); /* ignored: the default */
    if (i == 0) {
      ASSERT_NOT_NULL(strstr(err, "FCO_TEST_ENV_CHOICE_PROBE=\"tma3\" is not one of tma, tma2, "
                                  "wgmma: ignored, as if unset"));
    } else {
      ASSERT_STR_EQ(err, ""); /* once per knob */
    }
    free(err);
  }
  unsetenv(kChoiceProbe);
  printf("string knobs: names matched without case, others ignored and reported once\n");
  t_context("%s", "");
}

static const char* const kFlagProbe = "FCO_TEST_ENV_FLAG_PROBE";
static int g_flag;
static void read_flag_on(void) { g_flag = fco_env_flag(kFlagProbe, 1); }

/* On/off knobs (FCO_GEMV_PDL, FCO_GA_DIRECT, FCO_EA_LEAN, ...: fco_env_flag): 1 on, 0 off;
 * anything else ignored (the default) and said once. Until session 35 "-1" turned some of them
 * off and others on. */
static void env_flags(void) {
  static const struct {
    const char* v;
    int dflt, want;
  } good[] = {{"1", 0, 1}, {"0", 1, 0}, {"1 ", 0, 1}, {"0\n", 1, 0}, {"1\t", 0, 1}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    t_context("%s=\"%s\"", kFlagProbe, good[i].v);
    setenv(kFlagProbe, good[i].v, 1);
    ASSERT_EQ(fco_env_flag(kFlagProbe, good[i].dflt), good[i].want);
  }
  t_context("%s unset / empty", kFlagProbe);
  unsetenv(kFlagProbe);
  ASSERT_EQ(fco_env_flag(kFlagProbe, 1), 1);
  ASSERT_EQ(fco_env_flag(kFlagProbe, 0), 0);
  setenv(kFlagProbe, "", 1);
  ASSERT_EQ(fco_env_flag(kFlagProbe, 0), 0);
  static const char* const bad[] = {"-1", "2", "yes", "01", " 0", "on"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    t_context("%s=\"%s\"", kFlagProbe, bad[i]);
    setenv(kFlagProbe, bad[i], 1);
    char* err = stderr_of(read_flag_on);
    ASSERT_EQ(g_flag, 1); /* ignored: the default */
    ASSERT_EQ(fco_env_flag(kFlagProbe, 0), 0);
    if (i == 0) {
      ASSERT_NOT_NULL(strstr(err, "FCO_TEST_ENV_FLAG_PROBE=\"-1\" is not 0 (off) or 1 (on): "
                                  "ignored, as if unset"));
    } else {
      ASSERT_STR_EQ(err, ""); /* once per knob */
    }
    free(err);
  }
  unsetenv(kFlagProbe);
  printf("on/off knobs: 0 and 1, others ignored and reported once\n");
  t_context("%s", "");
}

/* FCO_TEST_MAX_RANKS (tests/common t_test_rank_cap, the rank loops' largest world): 1..8, blanks
 * around it allowed, 4 when unset or empty; anything else is said once on stderr, naming the value
 * and 1..8, and gives 4 (atoi once read "abc" as 1 rank and "3x" as 3, silently). */
static int g_cap;
static void read_cap(void) { g_cap = t_test_rank_cap(); }
static void rank_cap_knob(void) {
  static const char* const kCap = "FCO_TEST_MAX_RANKS";
  static const struct {
    const char* v;
    int want;
  } good[] = {{"1", 1}, {"8", 8}, {" 3 ", 3}, {"2\n", 2}, {"", 4}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    t_context("%s=\"%s\"", kCap, good[i].v);
    t_knob_set(kCap, good[i].v);
    char* err = stderr_of(read_cap);
    ASSERT_EQ(g_cap, good[i].want);
    ASSERT_STR_EQ(err, "");
    free(err);
  }
  t_knob_set(kCap, NULL);
  ASSERT_EQ(t_test_rank_cap(), 4);
  static const char* const bad[] = {"abc", "0", "9", "3x", "-1", "4.5", " "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    t_context("%s=\"%s\"", kCap, bad[i]);
    t_knob_set(kCap, bad[i]);
    char* err = stderr_of(read_cap);
    ASSERT_EQ(g_cap, 4);
    if (i == 0) /* said once per process: the first bad value only (nothing read it before) */
      ASSERT_NOT_NULL(strstr(err, "FCO_TEST_MAX_RANKS=\"abc\" is not an integer 1..8"));
    else
      ASSERT_STR_EQ(err, "");
    free(err);
  }
  t_knob_reset(kCap);
  t_context("%s", "");
  printf("FCO_TEST_MAX_RANKS: 1..8, else said once and 4\n");
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--debug-child") == 0) return debug_child();
  if (argc > 1 && strcmp(argv[1], "--said-child") == 0) return said_child();
  t_seed_init();
  knob_helper();
  rank_cap_knob();
  g_t = t_transport();
  t_require_ranks(g_t, 1);
  const char* e = getenv("FCO_TRANSPORT");
  g_env_saved = e ? strdup(e) : NULL;
  unsetenv("FCO_TIMEOUT_MS");
  env_ints();
  env_said();
  env_choices();
  env_flags();
  debug_log();
  debug_env();
  transport_env();
  timeout_env();
  timeout_env_default();
  workspace_cap();
  free(g_env_saved);
  printf("PASS\n");
  return 0;
}
