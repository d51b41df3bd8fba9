/*
 * test_peer_destroyed.c — cpu transport: a rank destroyed (fco_comm_destroy) while its peers
 * still expect it marks itself gone in its record word, so a peer's next call, or one already
 * waiting for it, fails at once: FCO_ERR_INVALID_USAGE (as a fco_comm_init_all group refuses calls
 * once a rank was destroyed), sticky, its message naming the destroyed rank and its last call.
 * Before, the peer waited the whole timeout and blamed the rank's silence ("did not make the
 * matching call", FCO_ERR_TIMEOUT). The normal shutdown, where every rank destroys after its last
 * call (some ranks possibly still inside that call), stays silent and correct.
 *   processes  2 and 3 processes with a 20 s timeout: rank 1 destroys its communicator (before
 *              any call, or after a good one) and exits; the others then call (a pipe tells them
 *              rank 1 is gone), or call at once (they may be waiting when rank 1 goes), or wait
 *              inside the operator (rank 1 agreed to the call and skipped it: the test hook
 *              FCO_FAULT_SKIP_RANK): each fails naming rank 1 (a third rank may learn it from
 *              rank 0, which names rank 1 too)
 *   threads    a 2-rank fco_comm_init_all world, a thread per rank: rank 1 destroys after a good
 *              call while rank 0 makes another; rank 0 fails with FCO_ERR_INVALID_USAGE naming
 *              rank 1, from the group's host check or from the transport (whichever comes first)
 *   shutdown   a thread or process per rank: calls, each rank destroying right after its last
 *              one: every call and every destroy succeeds, the results are exact
 * No timed assertions: results and messages are checked, not how long they took.
 *   make test   or   build/tests/test_peer_destroyed   (cpu only; other transports skip)
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define COUNT 3000
#define LONG_TIMEOUT_MS 20000 /* the old code waited this long, then failed the test */

static void expect_msg(const char* msg, const char* part) {
  if (!t_contains(msg, part)) t_fail(__FILE__, __LINE__, "\"%s\" not in \"%s\"", part, msg);
}

static void fill(float* in, int rank) {
  for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + 1) + (float)(i % 7);
}

/* out of an allreduce over P ranks filled by fill() */
static void check_sum(const float* out, int P) {
  for (int i = 0; i < COUNT; i++)
    if (out[i] != (float)(P * (P + 1) / 2 + P * (i % 7)))
      t_fail(__FILE__, __LINE__, "out[%d] = %g, want %d", i, out[i], P * (P + 1) / 2 + P * (i % 7));
}

/* ---- ranks as processes: rank 1 destroyed, the others call --------------------------------- */
/* How the others meet rank 1's destroy: they call once it is gone (a pipe tells them), they call
 * at once (they may be waiting in the record exchange when it goes), or rank 1 agrees to the call,
 * skips it (the test hook FCO_FAULT_SKIP_RANK=1) and is destroyed while they wait inside the
 * operator for its signal. */
enum { kGated, kAtOnce, kSkip };
static const char* const kModeName[] = {"gated", "at once", "skipped"};

typedef struct {
  fco_unique_id_t id;
  int P, warm, mode;
  int pipe[2]; /* kGated: rank 1 writes P - 1 bytes once destroyed; the others read one first */
} proc_arg_t;

static int proc_rank(int rank, void* p) {
  proc_arg_t* a = (proc_arg_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  float in[COUNT], out[COUNT];
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  cfg.timeout_ms = LONG_TIMEOUT_MS;
  t_context("process rank %d of %d, rank 1 destroyed %s, %s", rank, a->P,
            a->warm ? "after a good call" : "before any call", kModeName[a->mode]);
  ASSERT_OK(fco_comm_init(&c, a->P, rank, &a->id, &cfg));
  fill(in, rank);
  if (a->warm) { /* calls 1 (the growth) and 2 */
    ASSERT_OK(fco_allreduce(c, in, out, COUNT, FCO_F32, 1, NULL));
    check_sum(out, a->P);
  }
  char byte = 1;
  if (rank == 1) {
    if (a->mode == kSkip) { /* call 3: agreed to, then skipped (this process's env only) */
      setenv("FCO_FAULT_SKIP_RANK", "1", 1);
      ASSERT_OK(fco_allreduce(c, in, out, COUNT, FCO_F32, 1, NULL));
    }
    ASSERT_OK(fco_comm_destroy(c));
    for (int i = 0; a->mode == kGated && i < a->P - 1; i++)
      ASSERT_EQ(write(a->pipe[1], &byte, 1), 1);
    return 0;
  }
  if (a->mode == kGated) ASSERT_EQ(read(a->pipe[0], &byte, 1), 1);
  const fco_result_t r = fco_allreduce(c, in, out, COUNT, FCO_F32, 1, NULL);
  const char* msg = fco_last_error(c);
  printf("processes P=%d%s, %s: rank %d: %s: %s\n", a->P, a->warm ? " (warm)" : "",
         kModeName[a->mode], rank, fco_result_string(r), msg);
  ASSERT_RES(r, FCO_ERR_INVALID_USAGE);
  /* the call: the growth (call 1) before any good call, else the operator's record (call 3) */
  expect_msg(msg, a->warm ? "fco_allreduce (call 3)" : "workspace growth (call 1)");
  expect_msg(msg, "rank 1 was destroyed (fco_comm_destroy) ");
  expect_msg(msg, a->mode == kSkip ? "after its call 3"
                  : a->warm        ? "after its call 2"
                                   : "before its first call");
  /* sticky, and the refusals repeat why */
  ASSERT_RES(fco_comm_get_async_error(c), FCO_ERR_INVALID_USAGE);
  ASSERT_RES(fco_allreduce(c, in, out, COUNT, FCO_F32, 1, NULL), FCO_ERR_INVALID_USAGE);
  expect_msg(fco_last_error(c), "fco_allreduce: refused");
  expect_msg(fco_last_error(c), "rank 1 was destroyed");
  ASSERT_OK(fco_comm_destroy(c));
  return 0;
}

static void processes(int P, int warm, int mode) {
  proc_arg_t a;
  int st[3];
  a.P = P;
  a.warm = warm;
  a.mode = mode;
  ASSERT_EQ(pipe(a.pipe), 0);
  ASSERT_OK(fco_get_unique_id(&a.id));
  t_fork_run(P, proc_rank, &a, 60, st);
  close(a.pipe[0]);
  close(a.pipe[1]);
  for (int i = 0; i < P; i++) {
    t_context("processes P=%d, %s, %s, rank %d", P, warm ? "warm" : "cold", kModeName[mode], i);
    ASSERT_EQ(st[i], 0);
  }
}

/* ---- a world, a thread per rank ---------------------------------------------------------- */
typedef struct {
  t_world_t* w;
  int rank, calls, destroy_after; /* destroy_after: destroy the comm after its calls */
  float in[COUNT], out[COUNT];
  fco_result_t last;               /* the last call's result */
} rank_job_t;

static void* rank_thread(void* p) {
  rank_job_t* j = (rank_job_t*)p;
  j->last = FCO_OK;
  fill(j->in, j->rank);
  for (int i = 0; i < j->calls && j->last == FCO_OK; i++) {
    j->last = fco_allreduce(j->w->comms[j->rank], j->in, j->out, COUNT, FCO_F32, i & 1, NULL);
    if (j->last == FCO_OK) check_sum(j->out, j->w->n);
  }
  if (j->destroy_after) {
    ASSERT_OK(fco_comm_destroy(j->w->comms[j->rank]));
    j->w->comms[j->rank] = NULL; /* this thread's slot only */
  }
  return NULL;
}

static void run_threads(t_world_t* w, rank_job_t* jobs) {
  pthread_t th[T_MAX_RANKS];
  for (int r = 0; r < w->n; r++) ASSERT_EQ(pthread_create(&th[r], NULL, rank_thread, &jobs[r]), 0);
  for (int r = 0; r < w->n; r++) ASSERT_EQ(pthread_join(th[r], NULL), 0);
}

static void threads(void) {
  fco_config_t cfg;
  t_world_t w;
  static rank_job_t jobs[2];
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = LONG_TIMEOUT_MS;
  t_context("%s", "threads: rank 1 destroyed while rank 0 calls");
  ASSERT_OK(t_world_init(&w, FCO_TRANSPORT_CPU, 2, &cfg));
  for (int r = 0; r < 2; r++) jobs[r] = (rank_job_t){.w = &w, .rank = r, .calls = 1};
  run_threads(&w, jobs); /* calls 1 and 2, both ranks */
  for (int r = 0; r < 2; r++) ASSERT_OK(jobs[r].last);
  jobs[0].calls = 1;
  jobs[1].calls = 0;
  jobs[1].destroy_after = 1;
  run_threads(&w, jobs);
  const char* msg = fco_last_error(w.comms[0]);
  printf("threads: rank 0: %s: %s\n", fco_result_string(jobs[0].last), msg);
  ASSERT_RES(jobs[0].last, FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(w.comms[0], "rank 1");
  ASSERT_MSG(w.comms[0], "destroyed");
  t_world_destroy(&w, 0); /* rank 0; rank 1's NULL is accepted */
}

/* Every rank calls `calls` times, then destroys at once: a peer may still be inside the last
 * call (waiting for the destroyed rank's signal, or reading its part of the workspace). */
static void shutdown_threads(int P, int calls) {
  t_world_t w;
  static rank_job_t jobs[T_MAX_RANKS];
  t_context("shutdown: %d ranks as threads, %d calls each", P, calls);
  ASSERT_OK(t_world_init(&w, FCO_TRANSPORT_CPU, P, NULL));
  for (int r = 0; r < P; r++)
    jobs[r] = (rank_job_t){.w = &w, .rank = r, .calls = calls, .destroy_after = 1};
  run_threads(&w, jobs);
  for (int r = 0; r < P; r++) {
    ASSERT_OK(jobs[r].last);
    ASSERT_NULL(w.comms[r]);
  }
}

static int shutdown_rank(int rank, void* p) {
  const proc_arg_t* a = (const proc_arg_t*)p;
  fco_config_t cfg;
  fco_comm_t c = NULL;
  float in[COUNT], out[COUNT];
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  t_context("shutdown: process rank %d of %d", rank, a->P);
  ASSERT_OK(fco_comm_init(&c, a->P, rank, &a->id, &cfg));
  fill(in, rank);
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(fco_allreduce(c, in, out, COUNT, FCO_F32, i & 1, NULL));
    check_sum(out, a->P);
  }
  ASSERT_OK(fco_comm_get_async_error(c));
  ASSERT_OK(fco_comm_destroy(c));
  return 0;
}

static void shutdown_processes(int P) {
  proc_arg_t a;
  int st[3];
  a.P = P;
  ASSERT_OK(fco_get_unique_id(&a.id));
  t_fork_run(P, shutdown_rank, &a, 60, st);
  for (int i = 0; i < P; i++) {
    t_context("shutdown: %d processes, rank %d", P, i);
    ASSERT_EQ(st[i], 0);
  }
}

int main(void) {
  t_seed_init();
  const fco_transport_t t = t_transport();
  if (t != FCO_TRANSPORT_CPU)
    t_skip("the cpu transport's record words (transport %s)", fco_transport_name(t));
  for (int P = 2; P <= 3; P++)
    for (int warm = 0; warm < 2; warm++)
      for (int mode = kGated; mode <= kSkip; mode++)
        if (mode != kSkip || warm) processes(P, warm, mode); /* kSkip: the operator's waits */
  threads();
  const int rounds = t_quick() ? 5 : 40;
  for (int i = 0; i < rounds; i++) shutdown_threads(2 + i % 3, 1 + i % 4);
  for (int P = 2; P <= 3; P++) shutdown_processes(P);
  printf("PASS\n");
  return 0;
}
