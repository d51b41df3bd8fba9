/*
 * test_lifecycle.c — communicators come and go cleanly: config defaults, worlds of 1–4 ranks
 * created and destroyed many times (in both orders, some used in between), queries, NULL
 * destroy, a world with one rank destroyed (no growth: FCO_ERR_INVALID_USAGE), fco_comm_init
 * with one rank, the largest cpu worlds (63 and 64 ranks), ranks as forked processes joining
 * one id (cpu transport), and the workspace growing on demand and by reservation (cpu: a size
 * that overflows with rounding or with P is FCO_ERR_OUT_OF_MEMORY; a growth that rank 0 cannot
 * back in /dev/shm fails on every rank and changes no rank's workspace).
 *   make test   or   build/tests/test_lifecycle   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "test.h"

static void config_defaults(void) {
  fco_config_t cfg;
  memset(&cfg, 0xAB, sizeof cfg);
  ASSERT_OK(fco_config_init(&cfg));
  ASSERT_EQ(cfg.size, sizeof cfg);
  ASSERT_EQ(cfg.transport, FCO_TRANSPORT_AUTO);
  ASSERT_LE(cfg.timeout_ms, 0);
  ASSERT_LT(cfg.device, 0);
  ASSERT_LE(cfg.max_workspace_bytes, 0);
  ASSERT_LE(cfg.debug, 0);
  for (int i = 0; i < 7; i++) ASSERT_EQ(cfg.reserved[i], 0);
}

static void check_world(const t_world_t* w) {
  for (int r = 0; r < w->n; r++) {
    int rank = -1, size = -1;
    fco_transport_t t = FCO_TRANSPORT_AUTO;
    ASSERT_OK(fco_comm_rank(w->comms[r], &rank));
    ASSERT_OK(fco_comm_size(w->comms[r], &size));
    ASSERT_OK(fco_comm_transport(w->comms[r], &t));
    ASSERT_EQ(rank, r);
    ASSERT_EQ(size, w->n);
    ASSERT_EQ(t, w->transport);
    ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_STR_EQ(fco_last_error(w->comms[r]), "");
    for (int q = 0; q < r; q++) ASSERT_TRUE(w->comms[q] != w->comms[r]);
  }
}

/* Small allreduce, checked: a reused world (and its shared memory names) works. */
static void use_world(const t_world_t* w) {
  t_ar_bufs_t b;
  uint64_t seed = t_next_seed();
  t_ar_alloc(w, &b, 300);
  t_ar_prepare(w, &b, 300, FCO_BF16, 0, seed);
  ASSERT_OK(t_ar_run(w, &b, FCO_IMPL_AUTO));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  t_ar_free(w, &b);
}

static void create_destroy_many(fco_transport_t t) {
  int max = t_max_ranks(t) < 4 ? t_max_ranks(t) : 4;
  int iters = t == FCO_TRANSPORT_NCCL ? 12 : 50; /* NCCL init is slow */
  for (int it = 0; it < iters; it++) {
    int n = 1 + it % max;
    t_world_t w;
    t_context("create/destroy iteration %d, %d ranks", it, n);
    ASSERT_OK(t_world_init(&w, t, n, NULL));
    check_world(&w);
    if (it % 5 == 0) use_world(&w);
    t_world_destroy(&w, it % 2); /* either order: the last destroy frees the world */
  }
  /* Two worlds alive at once are independent. */
  t_world_t a, b;
  int n = max < 2 ? max : 2;
  t_context("two worlds at once");
  ASSERT_OK(t_world_init(&a, t, n, NULL));
  ASSERT_OK(t_world_init(&b, t, n, NULL));
  use_world(&b);
  t_world_destroy(&b, 0);
  use_world(&a);
  t_world_destroy(&a, 1);
  t_context("%s", "");
}

/* cpu: the largest worlds, 63 ranks and the maximum 64 (fco.h; every rank's join bit of a 64-bit
 * word set), one thread a rank: created, used, destroyed; 65 refused (test_bad_args). */
static void largest_worlds(void) {
  for (int n = T_MAX_RANKS - 1; n <= T_MAX_RANKS; n++) {
    t_world_t w;
    t_context("a cpu world of %d ranks", n);
    ASSERT_OK(t_world_init(&w, FCO_TRANSPORT_CPU, n, NULL));
    check_world(&w);
    use_world(&w);
    t_world_destroy(&w, n % 2);
  }
  t_context("%s", "");
}

/* A world whose rank 1 was destroyed: the workspace cannot grow (every rank takes part),
 * FCO_ERR_INVALID_USAGE naming rank 1, on the reservation and on an op that needs more; a
 * reservation within what is held still succeeds. The other ranks are destroyed as usual.
 * (cpu and local: one process; nccl ranks' teardown is NCCL's, not tested here.) */
static void destroyed_rank(fco_transport_t t) {
  const int n = t_max_ranks(t) < 3 ? t_max_ranks(t) : 3;
  if (n < 2 || t == FCO_TRANSPORT_NCCL) return;
  t_world_t w;
  size_t held = 0;
  t_context("a world of %d ranks, rank 1 destroyed", n);
  ASSERT_OK(t_world_init(&w, t, n, NULL));
  ASSERT_OK(fco_comm_destroy(w.comms[1]));
  ASSERT_RES(fco_comm_reserve(w.comms[0], 1 << 20), FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(w.comms[0], "rank 1 was destroyed");
  ASSERT_OK(fco_comm_workspace_bytes(w.comms[0], &held));
  ASSERT_EQ(held, 0);
  ASSERT_OK(fco_comm_reserve(w.comms[0], 0));
  for (int r = 0; r < n; r++)
    if (r != 1) ASSERT_OK(fco_comm_destroy(w.comms[r]));
  t_context("%s", "");
}

static void init_one_rank(fco_transport_t t) {
  /* the id's bytes need no alignment: made and read at an odd address, as in a received buffer
   * (the library once read it through a cast pointer: a misaligned access, CI's UBSan build) */
  _Alignas(8) char buf[sizeof(fco_unique_id_t) + 1];
  fco_unique_id_t* id = (fco_unique_id_t*)(buf + 1);
  fco_config_t cfg;
  fco_comm_t c = NULL;
  int rank = -1, size = -1;
  ASSERT_OK(fco_get_unique_id(id));
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = t;
  if (t_is_gpu(t)) cfg.device = 0;
  ASSERT_OK(fco_comm_init(&c, 1, 0, id, &cfg));
  ASSERT_NOT_NULL(c);
  ASSERT_OK(fco_comm_rank(c, &rank));
  ASSERT_OK(fco_comm_size(c, &size));
  ASSERT_EQ(rank, 0);
  ASSERT_EQ(size, 1);
  t_world_t w = {.n = 1, .transport = t, .comms = {c}};
  use_world(&w);
  ASSERT_OK(fco_comm_destroy(c));
}

/* ---- ranks as processes (cpu transport) ------------------------------------------------------- */
typedef struct {
  int n;
  fco_unique_id_t id;
  uint64_t seed;
} proc_arg_t;

static int proc_rank(int rank, void* p) {
  proc_arg_t* a = (proc_arg_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = 20000;
  t_context("process rank %d of %d", rank, a->n);
  ASSERT_OK(fco_comm_init(&c, a->n, rank, &a->id, &cfg));
  int got = -1;
  ASSERT_OK(fco_comm_rank(c, &got));
  ASSERT_EQ(got, rank);
  ASSERT_OK(fco_comm_size(c, &got));
  ASSERT_EQ(got, a->n);
  size_t count = 1001, bytes = count * 2;
  uint16_t* in = (uint16_t*)malloc(bytes + T_GUARD);
  uint16_t* out = (uint16_t*)malloc(bytes + T_GUARD);
  ASSERT_TRUE(in && out);
  for (int round = 0; round < 3; round++) { /* the second round reuses the grown workspace */
    uint64_t seed = t_mix(a->seed + (uint64_t)round);
    t_fill_input(FCO_BF16, in, count, seed, rank, a->n);
    memset((char*)in + bytes, T_IN_GUARD_BYTE, T_GUARD);
    memset(out, T_POISON, bytes);
    memset((char*)out + bytes, T_GUARD_BYTE, T_GUARD);
    ASSERT_OK(fco_allreduce(c, in, out, count, FCO_BF16, round % 2, NULL));
    for (size_t i = 0; i < count; i++)
      if (t_get_elem(FCO_BF16, out, i) != (float)t_sum(seed, i, a->n))
        t_fail(__FILE__, __LINE__, "rank %d round %d out[%zu] = %g, want %d", rank, round, i,
               (double)t_get_elem(FCO_BF16, out, i), t_sum(seed, i, a->n));
    for (size_t i = bytes; i < bytes + T_GUARD; i++)
      ASSERT_EQ(((unsigned char*)out)[i], T_GUARD_BYTE);
  }
  ASSERT_OK(fco_comm_destroy(c));
  free(in);
  free(out);
  return 0;
}

static void processes(void) {
  /* A cpu-transport id must not depend on a GPU being visible. */
  const char* old = getenv("FCO_TRANSPORT");
  char* saved = old ? strdup(old) : NULL;
  setenv("FCO_TRANSPORT", "cpu", 1);
  for (int n = 2; n <= 3; n++) {
    proc_arg_t a;
    int st[3];
    a.n = n;
    a.seed = t_next_seed();
    ASSERT_OK(fco_get_unique_id(&a.id));
    t_fork_run(n, proc_rank, &a, 60, st);
    for (int i = 0; i < n; i++) {
      t_context("%d processes", n);
      ASSERT_EQ(st[i], 0);
    }
  }
  if (saved) setenv("FCO_TRANSPORT", saved, 1);
  else unsetenv("FCO_TRANSPORT");
  free(saved);
}

/* ---- workspace ------------------------------------------------------------------------------- */
static void workspace(fco_transport_t t) {
  int n = t_max_ranks(t) < 2 ? 1 : 2;
  t_world_t w;
  t_ar_bufs_t b;
  size_t small = 100, big = 300000, before = 0, after = 0, need_small = 0, need_big = 0;
  t_context("workspace, %d ranks", n);
  ASSERT_OK(t_world_init(&w, t, n, NULL));
  t_ar_alloc(&w, &b, big);
  ASSERT_OK(fco_allreduce_workspace(w.comms[0], small, FCO_F32, 1, &need_small));
  ASSERT_OK(fco_allreduce_workspace(w.comms[0], big, FCO_F32, 1, &need_big));
  ASSERT_GE(need_small, small * 4);
  ASSERT_GT(need_big, need_small);
  uint64_t seed = t_next_seed();
  t_ar_prepare(&w, &b, small, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(&w, &b, 1));
  t_sync(&w);
  ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
  ASSERT_OK(fco_comm_workspace_bytes(w.comms[0], &before));
  ASSERT_GE(before, need_small);
  ASSERT_LT(before, need_big); /* sized to what was asked, not a huge pool */
  seed = t_next_seed();
  t_ar_prepare(&w, &b, big, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(&w, &b, 1));
  t_sync(&w);
  ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
  for (int r = 0; r < n; r++) {
    ASSERT_OK(fco_comm_workspace_bytes(w.comms[r], &after));
    ASSERT_GE(after, need_big);
  }
  /* Reserve: grows to at least the bytes asked (collective: every rank), never shrinks. */
  size_t want = after + 1000000;
  for (int r = 0; r < n; r++) ASSERT_OK(fco_comm_reserve(w.comms[r], want));
  for (int r = 0; r < n; r++) {
    ASSERT_OK(fco_comm_workspace_bytes(w.comms[r], &after));
    ASSERT_GE(after, want);
  }
  for (int r = 0; r < n; r++) ASSERT_OK(fco_comm_reserve(w.comms[r], 16));
  ASSERT_OK(fco_comm_workspace_bytes(w.comms[0], &before));
  ASSERT_EQ(before, after);
  /* cpu: sizes whose pages (rounded up: SIZE_MAX - 100) or whose P ranks' parts (2^63 + 1 a rank,
   * 2 ranks) overflow size_t: FCO_ERR_OUT_OF_MEMORY, nothing grows, not sticky */
  if (t == FCO_TRANSPORT_CPU) {
    const size_t huge[2] = {SIZE_MAX - 100, ((size_t)1 << 63) + 1};
    for (int i = 0; i < (n > 1 ? 2 : 1); i++) {
      t_context("workspace, %d ranks, fco_comm_reserve(%zu)", n, huge[i]);
      ASSERT_RES(fco_comm_reserve(w.comms[0], huge[i]), FCO_ERR_OUT_OF_MEMORY);
      ASSERT_MSG(w.comms[0], "overflows");
      ASSERT_OK(fco_comm_workspace_bytes(w.comms[0], &before));
      ASSERT_EQ(before, after);
      ASSERT_OK(fco_comm_get_async_error(w.comms[0]));
    }
    /* A growth that one rank cannot map: rank 0 reserves the new segment's pages (fallocate)
     * and /dev/shm is smaller than P parts of a bit over 1/P of it, so rank 0 fails at once
     * (ENOSPC: FCO_ERR_OUT_OF_MEMORY naming /dev/shm) while rank 1 maps its part (sparse) —
     * rank 1 must see rank 0's failure and drop its mapping: the call fails, rank 1's message
     * names rank 0, and no rank's workspace changes (they would disagree on its size). */
    struct statvfs fs;
    const size_t shm = statvfs("/dev/shm", &fs) == 0 ? (size_t)fs.f_blocks * fs.f_frsize : 0;
    if (n > 1 && shm > 0) {
      const size_t part = shm / (size_t)n + ((size_t)1 << 20);
      t_context("workspace, %d ranks, fco_comm_reserve(%zu): /dev/shm holds %zu", n, part, shm);
      ASSERT_RES(fco_comm_reserve(w.comms[0], part), FCO_ERR_OUT_OF_MEMORY);
      ASSERT_MSG(w.comms[0], "/dev/shm");
      ASSERT_MSG(w.comms[1], "failed on rank 0");
      for (int r = 0; r < n; r++) {
        ASSERT_OK(fco_comm_workspace_bytes(w.comms[r], &before));
        ASSERT_EQ(before, after);
        ASSERT_OK(fco_comm_get_async_error(w.comms[r]));
      }
    } else {
      printf("growth failing on one rank: skipped (%d rank(s), /dev/shm size %zu)\n", n, shm);
    }
    t_context("workspace, %d ranks", n);
  }
  /* And the grown workspace still gives right answers for a small call. */
  seed = t_next_seed();
  t_ar_prepare(&w, &b, small, FCO_F32, 1, seed);
  ASSERT_OK(t_ar_run(&w, &b, 1));
  t_sync(&w);
  ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  config_defaults();
  ASSERT_OK(fco_comm_destroy(NULL));
  create_destroy_many(t);
  destroyed_rank(t);
  init_one_rank(t);
  workspace(t);
  if (t == FCO_TRANSPORT_CPU) largest_worlds();
  if (t == FCO_TRANSPORT_CPU) processes();
  else printf("multi-process part skipped: it runs on the cpu transport only\n");
  printf("PASS\n");
  return 0;
}
