/*
 * test_gave_up.c — cpu transport: a rank that gave up on a call (it timed out waiting for a peer)
 * says so in its record word, and a peer that comes to that call late fails at once:
 * FCO_ERR_TIMEOUT, sticky, its message naming the rank that gave up, the call, and why (it waited
 * for this rank). Before, the late peer passed the record exchange (the record was there), then
 * waited a second FCO_TIMEOUT_MS in the workspace growth's acks or in the operator and blamed the
 * rank that had left for its silence.
 *   late_rank  2 ranks (threads), each call issued alone, outside a group, so it starts after the
 *              one before returned: rank 0 times out waiting for rank 1, then rank 1 calls — its
 *              first call (the workspace growth) or a later one (the operator's record)
 *   cascade    3 ranks: rank 2 times out waiting for ranks 0 and 1; rank 1 then finds rank 2
 *              gone (while rank 0 is still missing) and gives up in turn; rank 0 then finds rank 1
 *              gone, and its message says that rank 2 gave up first
 *   processes  3 processes, rank 0 with a short timeout, rank 1 with a long one: rank 0 gives up
 *              waiting for rank 2, which calls only once rank 0's call returned (a pipe tells it)
 *              — rank 1, waiting in the record exchange, the growth's acks or the operator (it
 *              may have passed the record exchange before rank 0 gave up), fails at once naming
 *              rank 0 (before: after its own 20 s, naming rank 0's silence)
 * No timed assertions: each late call's result and message are checked, not how long it took.
 *   make test   or   build/tests/test_gave_up   (cpu only; other transports skip)
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pthread.h>

#include "ga_fixture.h"
#include "test.h"

#define TIMEOUT_MS 300
#define COUNT 3000

static void expect_msg(const char* msg, const char* part) {
  if (!t_contains(msg, part)) t_fail(__FILE__, __LINE__, "\"%s\" not in \"%s\"", part, msg);
}

/* rank 0 alone, then rank 1 alone; warm: after a good call, so the late call is the operator's
 * record (call 3), else the workspace growth's (call 1) */
static void late_rank(int impl, int warm) {
  fco_config_t cfg;
  t_world_t w;
  t_ar_bufs_t b;
  char want[64];
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = TIMEOUT_MS;
  t_context("2 ranks, impl %d, %s", impl, warm ? "after a good call" : "first call");
  ASSERT_OK(t_world_init(&w, FCO_TRANSPORT_CPU, 2, &cfg));
  t_ar_alloc(&w, &b, COUNT);
  uint64_t seed = t_next_seed();
  if (warm) { /* calls 1 (the growth) and 2 */
    t_ar_prepare(&w, &b, COUNT, FCO_F32, 0, seed);
    ASSERT_OK(t_ar_run(&w, &b, impl));
    ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
  }
  t_ar_prepare(&w, &b, COUNT, FCO_F32, 0, seed);
  ASSERT_RES(t_ar_run_rank(&w, &b, 0, impl, NULL), FCO_ERR_TIMEOUT);
  const char* msg0 = fco_last_error(w.comms[0]);
  printf("impl %d%s: rank 0: %s\n", impl, warm ? " (warm)" : "", msg0);
  expect_msg(msg0, "did not make the matching call");
  ASSERT_MSG(w.comms[0], "rank 1");

  ASSERT_RES(t_ar_run_rank(&w, &b, 1, impl, NULL), FCO_ERR_TIMEOUT);
  const char* msg1 = fco_last_error(w.comms[1]);
  printf("impl %d%s: rank 1, late: %s\n", impl, warm ? " (warm)" : "", msg1);
  snprintf(want, sizeof want, "%s (call %d): rank 0 gave up on this call",
           warm ? "fco_allreduce" : "workspace growth", warm ? 3 : 1);
  expect_msg(msg1, want);
  expect_msg(msg1, "matching call of rank 1 (this rank) until its timeout");
  /* sticky on the late rank too, and its refusals repeat why */
  ASSERT_RES(fco_comm_get_async_error(w.comms[1]), FCO_ERR_TIMEOUT);
  ASSERT_RES(t_ar_run_rank(&w, &b, 1, impl, NULL), FCO_ERR_TIMEOUT);
  expect_msg(fco_last_error(w.comms[1]), "fco_allreduce: refused");
  expect_msg(fco_last_error(w.comms[1]), "rank 0 gave up");
  ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);
}

static void cascade(void) {
  fco_config_t cfg;
  t_world_t w;
  t_ar_bufs_t b;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = TIMEOUT_MS;
  t_context("3 ranks, rank 2 gives up first");
  ASSERT_OK(t_world_init(&w, FCO_TRANSPORT_CPU, 3, &cfg));
  t_ar_alloc(&w, &b, COUNT);
  const uint64_t seed = t_next_seed();
  t_ar_prepare(&w, &b, COUNT, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(&w, &b, 1)); /* calls 1 and 2 */
  ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
  t_ar_prepare(&w, &b, COUNT, FCO_F32, 0, seed);
  ASSERT_RES(t_ar_run_rank(&w, &b, 2, 1, NULL), FCO_ERR_TIMEOUT);
  printf("cascade: rank 2: %s\n", fco_last_error(w.comms[2]));
  expect_msg(fco_last_error(w.comms[2]), "rank 0 did not make the matching call");
  /* rank 1: rank 0 has not called either; rank 2's mark ends the wait */
  ASSERT_RES(t_ar_run_rank(&w, &b, 1, 1, NULL), FCO_ERR_TIMEOUT);
  const char* msg1 = fco_last_error(w.comms[1]);
  printf("cascade: rank 1: %s\n", msg1);
  expect_msg(msg1, "fco_allreduce (call 3): rank 2 gave up on this call");
  expect_msg(msg1, "matching call of rank 0 until its timeout");
  ASSERT_RES(t_ar_run_rank(&w, &b, 0, 1, NULL), FCO_ERR_TIMEOUT);
  const char* msg0 = fco_last_error(w.comms[0]);
  printf("cascade: rank 0: %s\n", msg0);
  expect_msg(msg0, "fco_allreduce (call 3): rank 1 gave up on this call");
  expect_msg(msg0, "because rank 2 had given up");
  for (int r = 0; r < 3; r++) ASSERT_RES(fco_comm_get_async_error(w.comms[r]), FCO_ERR_TIMEOUT);
  ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
  t_ar_free(&w, &b);
  t_world_destroy(&w, 1);
}

typedef struct {
  const t_world_t* w;
  const t_ar_bufs_t* b;
  fco_result_t res;
} late_job_t;

static void* rank1_call(void* arg) {
  late_job_t* j = (late_job_t*)arg;
  j->res = t_ar_run_rank(j->w, j->b, 1, 1, NULL);
  return NULL;
}

static void bad_data(void) {
  fco_config_t cfg;
  t_world_t w;
  t_ar_bufs_t b;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = 5000; /* rank 1 waits 300 ms for rank 0's record, well within it */
  t_context("2 ranks: a call refused for its data, then rank 0 late");
  ASSERT_OK(t_world_init(&w, FCO_TRANSPORT_CPU, 2, &cfg));
  ga_case_t c;
  ga_bufs_t gb;
  ga_make_case(&c, 2, 20, 12, 0, FCO_F32, t_next_seed(), 0, 10);
  c.counts[1][0] = -3;
  ga_upload(&w, &c, &gb);
  ASSERT_RES(ga_issue(&w, &c, &gb, 1, 0, NULL), FCO_ERR_INVALID_ARGUMENT);
  for (int r = 0; r < 2; r++) {
    ASSERT_MSG(w.comms[r], "counts are invalid");
    ASSERT_OK(fco_comm_get_async_error(w.comms[r]));
  }
  ga_free_bufs(&w, &c, &gb);
  ga_free_case(&c);
  t_ar_alloc(&w, &b, COUNT);
  const uint64_t seed = t_next_seed();
  t_ar_prepare(&w, &b, COUNT, FCO_F32, 0, seed);
  late_job_t j = {&w, &b, FCO_ERR_INTERNAL};
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, rank1_call, &j), 0);
  usleep(300 * 1000);
  const fco_result_t r0 = t_ar_run_rank(&w, &b, 0, 1, NULL);
  ASSERT_EQ(pthread_join(th, NULL), 0);
  printf("bad_data: then rank 0 late: rank 0 %s, rank 1 %s: %s\n", fco_result_string(r0),
         fco_result_string(j.res), fco_last_error(w.comms[1]));
  ASSERT_OK(r0);
  ASSERT_OK(j.res);
  ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);
}

/* ---- ranks as processes ------------------------------------------------------------------ */
typedef struct {
  fco_unique_id_t id;
  int warm;
  int pipe[2]; /* rank 0 writes a byte once its call returned; rank 2 reads it before calling */
} proc_arg_t;

static int proc_rank(int rank, void* p) {
  proc_arg_t* a = (proc_arg_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  float in[COUNT], out[COUNT];
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = rank == 0 ? TIMEOUT_MS : 20000;
  t_context("process rank %d of 3, %s", rank, a->warm ? "after a good call" : "first call");
  ASSERT_OK(fco_comm_init(&c, 3, rank, &a->id, &cfg));
  for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + 1);
  if (a->warm) {
    ASSERT_OK(fco_allreduce(c, in, out, COUNT, FCO_F32, 1, NULL));
    ASSERT_TRUE(out[0] == 6 && out[COUNT - 1] == 6);
  }
  char byte = 1;
  if (rank == 2) ASSERT_EQ(read(a->pipe[0], &byte, 1), 1);
  const fco_result_t r = fco_allreduce(c, in, out, COUNT, FCO_F32, 1, NULL);
  if (rank == 0) ASSERT_EQ(write(a->pipe[1], &byte, 1), 1);
  const char* msg = fco_last_error(c);
  printf("processes%s: rank %d: %s: %s\n", a->warm ? " (warm)" : "", rank, fco_result_string(r),
         msg);
  ASSERT_RES(r, FCO_ERR_TIMEOUT);
  if (rank == 0) {
    expect_msg(msg, "rank 2 did not make the matching call");
  } else {
    /* rank 1 may name rank 0 or rank 2 (which gave up once it found rank 0 gone): rank 0 either
     * way */
    expect_msg(msg, "gave up");
    ASSERT_MSG(c, "rank 0");
    if (rank == 2) expect_msg(msg, "rank 0 gave up on this call");
  }
  ASSERT_RES(fco_comm_get_async_error(c), FCO_ERR_TIMEOUT);
  ASSERT_OK(fco_comm_destroy(c));
  return 0;
}

static void processes(int warm) {
  proc_arg_t a;
  int st[3];
  a.warm = warm;
  ASSERT_EQ(pipe(a.pipe), 0);
  ASSERT_OK(fco_get_unique_id(&a.id));
  t_fork_run(3, proc_rank, &a, 60, st);
  close(a.pipe[0]);
  close(a.pipe[1]);
  for (int i = 0; i < 3; i++) {
    t_context("processes, %s, rank %d", warm ? "after a good call" : "first call", i);
    ASSERT_EQ(st[i], 0);
  }
}

int main(void) {
  t_seed_init();
  const fco_transport_t t = t_transport();
  if (t != FCO_TRANSPORT_CPU) t_skip("the cpu transport's record words (transport %s)",
                                     fco_transport_name(t));
  for (int impl = 0; impl < 2; impl++)
    for (int warm = 0; warm < 2; warm++) late_rank(impl, warm);
  cascade();
  bad_data();
  for (int warm = 0; warm < 2; warm++) processes(warm);
  printf("PASS\n");
  return 0;
}
