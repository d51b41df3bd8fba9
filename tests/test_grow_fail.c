/*
 * test_grow_fail.c — cpu transport: a workspace growth that fails on one rank fails on every
 * rank with that rank's code, each peer's message naming the rank and the code (before, the peers
 * reported FCO_ERR_SYSTEM whatever the failing rank's code was, e.g. FCO_ERR_OUT_OF_MEMORY for a
 * full /dev/shm). No rank's workspace changes, nothing is sticky, and the next growth works.
 * The failure comes from the cpu transport's test hook FCO_FAULT_GROW_FAIL=r (rank r fails to
 * map the new segment as if /dev/shm were full: FCO_ERR_OUT_OF_MEMORY).
 *   worlds     2 and 3 ranks (threads), rank f = 1..P-1 failing: fco_comm_reserve through rank 0
 *              returns rank 0's result (the first failure in rank order), which is what rank 0
 *              saw of rank f's; then a growth inside an operator call (a group)
 *   processes  2 processes, rank 1 failing: each process's own result
 *   stall      2 processes, rank 1 stalling past the timeout before its ack (FCO_FAULT_GROW_STALL):
 *              rank 0 returns FCO_ERR_TIMEOUT naming rank 1 ("did not map"), sticky, and posts
 *              its gave-up bit, so rank 1's next call fails at once with rank 0's code, saying
 *              why ("to map the new workspace") — a rank 0 that timed out without posting it
 *              left rank 1 waiting for rank 0's record until its own timeout (mutation audit)
 *   make test   or   build/tests/test_grow_fail   (cpu only; other transports skip)
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define BYTES ((size_t)1 << 20)

static void expect_msg(const char* msg, const char* part) {
  if (!t_contains(msg, part)) t_fail(__FILE__, __LINE__, "\"%s\" not in \"%s\"", part, msg);
}

/* Every rank's message after rank f's growth failed: f its own, the others naming f's code. */
static void check_ranks(const t_world_t* w, int f, size_t held) {
  char want[64];
  snprintf(want, sizeof want, "failed on rank %d: %s", f,
           fco_result_string(FCO_ERR_OUT_OF_MEMORY));
  for (int r = 0; r < w->n; r++) {
    const char* msg = fco_last_error(w->comms[r]);
    printf("  rank %d: %s\n", r, msg);
    expect_msg(msg, r == f ? "FCO_FAULT_GROW_FAIL" : want);
    size_t now = 1;
    ASSERT_OK(fco_comm_workspace_bytes(w->comms[r], &now));
    ASSERT_EQ(now, held);
    ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  }
}

static void world(int P, int f) {
  t_world_t w;
  t_ar_bufs_t b;
  char fs[16];
  size_t held = 1;
  t_context("%d ranks, rank %d's growth fails", P, f);
  ASSERT_OK(t_world_init(&w, FCO_TRANSPORT_CPU, P, NULL));
  snprintf(fs, sizeof fs, "%d", f);

  t_knob_set("FCO_FAULT_GROW_FAIL", fs);
  ASSERT_RES(fco_comm_reserve(w.comms[0], BYTES), FCO_ERR_OUT_OF_MEMORY);
  t_knob_reset("FCO_FAULT_GROW_FAIL");
  printf("%d ranks, rank %d fails, fco_comm_reserve:\n", P, f);
  check_ranks(&w, f, 0);

  /* a growth inside an operator call: the group's result and every rank's message */
  t_ar_alloc(&w, &b, 4096);
  uint64_t seed = t_next_seed();
  t_ar_prepare(&w, &b, 4096, FCO_F32, 0, seed);
  t_knob_set("FCO_FAULT_GROW_FAIL", fs);
  ASSERT_RES(t_ar_run(&w, &b, 1), FCO_ERR_OUT_OF_MEMORY);
  t_knob_reset("FCO_FAULT_GROW_FAIL");
  ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
  for (int r = 0; r < P; r++) {
    ASSERT_OK(fco_comm_workspace_bytes(w.comms[r], &held));
    ASSERT_EQ(held, 0);
    ASSERT_OK(fco_comm_get_async_error(w.comms[r]));
  }
  printf("%d ranks, rank %d fails, fco_allreduce: %s\n", P, f, fco_last_error(w.comms[0]));
  char want[64];
  snprintf(want, sizeof want, "failed on rank %d: %s", f,
           fco_result_string(FCO_ERR_OUT_OF_MEMORY));
  expect_msg(fco_last_error(w.comms[0]), want);

  /* not sticky: the next growth (the same call) works */
  ASSERT_OK(t_ar_run(&w, &b, 1));
  ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
  ASSERT_OK(fco_comm_reserve(w.comms[0], BYTES));
  ASSERT_OK(fco_comm_workspace_bytes(w.comms[P - 1], &held));
  ASSERT_GE(held, BYTES);
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);
}

/* ---- ranks as processes ------------------------------------------------------------------ */
static int proc_rank(int rank, void* p) {
  const fco_unique_id_t* id = (const fco_unique_id_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  size_t held = 1;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = 20000;
  t_context("process rank %d of 2, rank 1's growth fails", rank);
  ASSERT_OK(fco_comm_init(&c, 2, rank, id, &cfg));
  setenv("FCO_FAULT_GROW_FAIL", "1", 1); /* in each process: rank 1 is the one it names */
  const fco_result_t r = fco_comm_reserve(c, BYTES);
  unsetenv("FCO_FAULT_GROW_FAIL");
  printf("process rank %d: %s: %s\n", rank, fco_result_string(r), fco_last_error(c));
  ASSERT_RES(r, FCO_ERR_OUT_OF_MEMORY);
  expect_msg(fco_last_error(c), rank == 1 ? "FCO_FAULT_GROW_FAIL" : "failed on rank 1: out of "
                                                                    "memory");
  ASSERT_OK(fco_comm_workspace_bytes(c, &held));
  ASSERT_EQ(held, 0);
  ASSERT_OK(fco_comm_get_async_error(c));
  float in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = (float)(rank + 1);
  ASSERT_OK(fco_allreduce(c, in, out, 256, FCO_F32, 1, NULL));
  for (int i = 0; i < 256; i++) ASSERT_EQ(out[i], 3);
  ASSERT_OK(fco_comm_destroy(c));
  return 0;
}

/* Two processes running fn with one fresh unique id; each must end with 0. */
static void two_processes(int (*fn)(int, void*), const char* what) {
  fco_unique_id_t id;
  int st[2];
  ASSERT_OK(fco_get_unique_id(&id));
  t_fork_run(2, fn, &id, 60, st);
  for (int i = 0; i < 2; i++) {
    t_context("%s, rank %d", what, i);
    ASSERT_EQ(st[i], 0);
  }
}

/* ---- a rank stalling before its ack -------------------------------------------------------- */
enum { STALL_TIMEOUT_MS = 600 };

static int stall_rank(int rank, void* p) {
  const fco_unique_id_t* id = (const fco_unique_id_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = STALL_TIMEOUT_MS;
  t_context("process rank %d of 2, rank 1 stalls in the growth", rank);
  ASSERT_OK(fco_comm_init(&c, 2, rank, id, &cfg));
  setenv("FCO_FAULT_GROW_STALL", "1", 1); /* in each process: rank 1 is the one it names */
  const fco_result_t r = fco_comm_reserve(c, BYTES);
  unsetenv("FCO_FAULT_GROW_STALL");
  printf("stall: process rank %d: reserve %s: %s\n", rank, fco_result_string(r),
         r == FCO_OK ? "" : fco_last_error(c));
  if (rank == 0) {
    ASSERT_RES(r, FCO_ERR_TIMEOUT);
    expect_msg(fco_last_error(c), "rank 1 did not map");
    ASSERT_RES(fco_comm_get_async_error(c), FCO_ERR_TIMEOUT);
    /* alive, calling nothing, while rank 1 makes its next call: only the bit can end its wait
     * before its timeout */
    usleep(4 * STALL_TIMEOUT_MS * 1000);
  } else {
    float in[256], out[256];
    for (int i = 0; i < 256; i++) in[i] = 1.0f;
    const fco_result_t n = fco_allreduce(c, in, out, 256, FCO_F32, 1, NULL);
    printf("stall: process rank 1: next call %s: %s\n", fco_result_string(n),
           fco_last_error(c));
    ASSERT_RES(n, FCO_ERR_TIMEOUT);
    expect_msg(fco_last_error(c), "rank 0 gave up");
    expect_msg(fco_last_error(c), "to map the new workspace");
  }
  (void)fco_comm_destroy(c);
  return 0;
}

int main(void) {
  t_seed_init();
  const fco_transport_t t = t_transport();
  if (t != FCO_TRANSPORT_CPU)
    t_skip("the cpu transport's growth hook (transport %s)", fco_transport_name(t));
  for (int P = 2; P <= 3; P++)
    for (int f = 1; f < P; f++) world(P, f);
  two_processes(proc_rank, "processes");
  two_processes(stall_rank, "stall");
  printf("PASS\n");
  return 0;
}
