/*
 * test_streams.c — calls of two communicators on two streams of one device, from one thread, and
 * the cuBLAS paths in CUDA graphs (src/cuda/blas.cuh: one cuBLAS handle per device, one workspace
 * per (device, stream); gemm_alltoall impl 2's push stream per user stream).
 *   Two communicators of one rank each, on the same device, each issuing on its own stream with
 *   nothing ordering the two: their GEMMs may run at the same time, and must not share a cuBLAS
 *   workspace (until session 33 gemm_alltoall's did: one per thread). Shapes where cuBLAS may
 *   split K (GEMV M 4 × N 1000 × K 4608; GEMM rows × K 4096 × N 64..256), fresh inputs and
 *   poisoned outputs every round, every output checked against the float64 reference.
 *   On GPU transports also: gemm_alltoall impl 2 of the two communicators while the first one's
 *   stream is held by a host function — the second call must finish anyway (until session 33
 *   both queued their pushes on one side stream per thread, so it waited for the held one);
 *   impl 2 on 12 fresh streams at once (past the 8 push streams kept a thread: later streams take
 *   over the least recently used) and captured on one more, every output checked; then the held
 *   stream part again on two more fresh streams (each takes over its own push stream); 40
 *   threads in turn, each running impl 2 once and ending: the count of live push streams is back
 *   where it was after each (a thread that ends gives its push streams back);
 *   a call captured on a stream that never ran eagerly (it gets no workspace: fco_last_plan says
 *   "no cuBLAS workspace"; the replay must be right), the same stream after an eager call
 *   (captured with its own workspace), and that graph replayed right after 18 more streams made
 *   the device free its least recently used workspaces (a captured one is never freed);
 *   impl 2 failing after its fork (test hook FCO_FAULT_GA_PUSH=1) joins back: a capture of it
 *   still ends (and on local, two virtual ranks on two streams, only one captured, the launch
 *   failing: the other stream is still joined back); then another thread's global-mode capture
 *   held open while gemv impl 0 runs on 18 fresh streams and gemm impl 2 from a new thread
 *   (their lazy setup must neither fail nor break it).
 *   make test   or   build/tests/test_streams   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 runs 3 rounds instead of 8.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "ga_fixture.h"
#include "gemv_fixture.h"

#define NW 2 /* communicators */

typedef struct {
  t_world_t w[NW];
  void* st[NW]; /* a stream per communicator (NULL on cpu) */
  gemv_bufs_t gv[NW];
  int gemm_k;
} ctx_t;

static void* new_stream(fco_transport_t t) {
#ifdef FCO_HAVE_CUDA
  if (t != FCO_TRANSPORT_CPU) {
    cudaStream_t s;
    ASSERT_EQ(cudaSetDevice(t_rank_device(t, 0)), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
  }
#endif
  (void)t;
  return NULL;
}

static void free_stream(fco_transport_t t, void* s) {
#ifdef FCO_HAVE_CUDA
  if (t != FCO_TRANSPORT_CPU) ASSERT_EQ(cudaStreamDestroy((cudaStream_t)s), cudaSuccess);
#endif
  (void)t;
  (void)s;
}

static void sync_stream(fco_transport_t t, void* s) {
#ifdef FCO_HAVE_CUDA
  if (t != FCO_TRANSPORT_CPU) ASSERT_EQ(cudaStreamSynchronize((cudaStream_t)s), cudaSuccess);
#endif
  (void)t;
  (void)s;
}

/* One round: on each communicator a GEMV and a GEMM (impl 0) on its own stream, interleaved,
 * nothing ordering the two streams; then sync and check every output. */
static void concurrent_round(ctx_t* c, int round) {
  fco_transport_t t = c->w[0].transport;
  ga_case_t gc[NW];
  ga_bufs_t gb[NW];
  for (int k = 0; k < NW; k++) {
    t_context("round %d comm %d: prepare", round, k);
    gemv_prepare(&c->gv[k], 4, 1000, 4608, k ? FCO_F16 : FCO_BF16, 1, t_next_seed());
    ga_make_moving_case(&gc[k], 1, c->gemm_k, 64 + 96 * k, k, k ? FCO_F16 : FCO_BF16,
                        t_next_seed(), 1, 4);
    ga_upload(&c->w[k], &gc[k], &gb[k]);
  }
  for (int k = 0; k < NW; k++) {
    t_context("round %d comm %d: gemm_alltoall impl 0 (rows %lld, K %d, N %d)", round, k,
              (long long)gc[k].a_rows, gc[k].K, gc[k].N);
    ASSERT_OK(ga_issue(&c->w[k], &gc[k], &gb[k], 0, k, c->st[k]));
  }
  for (int k = 0; k < NW; k++) {
    t_context("round %d comm %d: gemv_allreduce impl 0", round, k);
    ASSERT_OK(gemv_issue(&c->w[k], &c->gv[k], 0, &c->st[k]));
  }
  for (int k = 0; k < NW; k++) {
    sync_stream(t, c->st[k]);
    ASSERT_OK(fco_comm_get_async_error(c->w[k].comms[0]));
    t_context("round %d comm %d: check the GEMV", round, k);
    ASSERT_EQ(gemv_check(&c->w[k], &c->gv[k]), (size_t)0);
    t_context("round %d comm %d: check the GEMM", round, k);
    ASSERT_EQ(ga_check(&c->w[k], &gc[k], &gb[k]), (size_t)0);
    ga_free_bufs(&c->w[k], &gc[k], &gb[k]);
    ga_free_case(&gc[k]);
  }
}

#ifdef FCO_HAVE_CUDA
/* The plan of the world's last call has (want) or lacks (!want) `what`. */
static void expect_plan(const t_world_t* w, const char* what, int want) {
  const char* plan = fco_last_plan(w->comms[0]);
  if ((strstr(plan, what) != NULL) != want)
    t_fail(__FILE__, __LINE__, "plan \"%s\" %s \"%s\"", plan, want ? "lacks" : "has", what);
}

/* gemm_alltoall impl `impl` (with the hints) of world w captured on stream s (out poisoned first),
 * replayed once, checked; the capture's plan has (want_no_ws 1) or lacks (0) "no cuBLAS
 * workspace", or either (-1). */
static void ga_graph_once(const t_world_t* w, const ga_case_t* gc, ga_bufs_t* gb, int impl,
                          void* s, int want_no_ws) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ga_poison(w, gc, gb);
  ASSERT_EQ(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r = ga_issue(w, gc, gb, impl, 1, s);
  ASSERT_EQ(cudaStreamEndCapture((cudaStream_t)s, &g), cudaSuccess);
  ASSERT_OK(r);
  if (want_no_ws >= 0) expect_plan(w, "no cuBLAS workspace", want_no_ws);
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(ge, (cudaStream_t)s), cudaSuccess);
  sync_stream(w->transport, s);
  ASSERT_OK(fco_comm_get_async_error(w->comms[0]));
  ASSERT_EQ(ga_check(w, gc, gb), (size_t)0);
  ASSERT_EQ(cudaGraphExecDestroy(ge), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
}

/* Capture gemv impl 0 of world 0 on stream s, replay twice (fresh inputs, poisoned y before
 * each), check; the capture's plan has "no cuBLAS workspace" iff no_ws. */
static void graph_on(ctx_t* c, void* s, int no_ws, const char* what) {
  const t_world_t* w = &c->w[0];
  gemv_bufs_t* b = &c->gv[0];
  t_context("CUDA graph on %s: capture", what);
  gemv_prepare(b, 4, 1000, 4608, FCO_BF16, 1, t_next_seed());
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r = gemv_issue(w, b, 0, &s);
  ASSERT_EQ(cudaStreamEndCapture((cudaStream_t)s, &g), cudaSuccess);
  ASSERT_OK(r);
  expect_plan(w, "no cuBLAS workspace", no_ws);
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int k = 0; k < 2; k++) {
    t_context("CUDA graph on %s: replay %d", what, k);
    gemv_prepare(b, 4, 1000, 4608, FCO_BF16, 1, t_next_seed());
    ASSERT_EQ(cudaGraphLaunch(ge, (cudaStream_t)s), cudaSuccess);
    sync_stream(w->transport, s);
    ASSERT_OK(fco_comm_get_async_error(w->comms[0]));
    ASSERT_EQ(gemv_check(w, b), (size_t)0);
  }
  /* The same graph after 18 more streams ran eagerly (the device then frees least recently used
   * workspaces, never a captured one). */
  if (!no_ws) {
    void* more[18];
    for (int k = 0; k < 18; k++) {
      more[k] = new_stream(w->transport);
      t_context("CUDA graph on %s: eager call on extra stream %d", what, k);
      gemv_prepare(b, 4, 1000, 4608, FCO_BF16, 1, t_next_seed());
      ASSERT_OK(gemv_issue(w, b, 0, &more[k]));
      sync_stream(w->transport, more[k]);
      ASSERT_EQ(gemv_check(w, b), (size_t)0);
    }
    t_context("CUDA graph on %s: replay after 18 more streams", what);
    gemv_prepare(b, 4, 1000, 4608, FCO_BF16, 1, t_next_seed());
    ASSERT_EQ(cudaGraphLaunch(ge, (cudaStream_t)s), cudaSuccess);
    sync_stream(w->transport, s);
    ASSERT_EQ(gemv_check(w, b), (size_t)0);
    for (int k = 0; k < 18; k++) free_stream(w->transport, more[k]);
  }
  ASSERT_EQ(cudaGraphExecDestroy(ge), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
}

/* Holds a stream until g_release is set (a host function: CUDA runs it in stream order). */
static int g_release;
static void CUDART_CB hold_stream(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&g_release, __ATOMIC_ACQUIRE)) usleep(200);
}

/* impl 2 (chunks) of both communicators on streams st[0], st[1], the first one's stream held:
 * the second call must finish while the first waits (each user stream has its own push stream),
 * then both right. */
static void chunks_independent(ctx_t* c, void* const st[NW], const char* what) {
  fco_transport_t t = c->w[0].transport;
  ga_case_t gc[NW];
  ga_bufs_t gb[NW];
  for (int k = 0; k < NW; k++) {
    ga_make_moving_case(&gc[k], 1, 64, 64 + 32 * k, 0, FCO_BF16, t_next_seed(), 1, 4);
    ga_upload(&c->w[k], &gc[k], &gb[k]);
  }
  for (int pass = 0; pass < 2; pass++) { /* 0: eager warm-up (push streams made), 1: held */
    for (int k = 0; k < NW; k++) ga_poison(&c->w[k], &gc[k], &gb[k]);
    if (pass == 1) {
      __atomic_store_n(&g_release, 0, __ATOMIC_RELEASE);
      ASSERT_EQ(cudaLaunchHostFunc((cudaStream_t)st[0], hold_stream, NULL), cudaSuccess);
    }
    for (int k = 0; k < NW; k++) {
      t_context("impl 2 on %s, pass %d: comm %d's call", what, pass, k);
      ASSERT_OK(ga_issue(&c->w[k], &gc[k], &gb[k], 2, 1, st[k]));
    }
    cudaError_t q = cudaSuccess;
    if (pass == 1) {
      const double t0 = t_now_ms();
      while ((q = cudaStreamQuery((cudaStream_t)st[1])) == cudaErrorNotReady &&
             t_now_ms() - t0 < 10000)
        usleep(1000);
      __atomic_store_n(&g_release, 1, __ATOMIC_RELEASE);
    }
    t_context("impl 2 on %s, pass %d: comm 1's call while comm 0's stream is held "
              "(plan \"%s\")", what, pass, fco_last_plan(c->w[1].comms[0]));
    ASSERT_EQ(q, cudaSuccess); /* cudaErrorNotReady: it waited for the held stream */
    for (int k = 0; k < NW; k++) {
      sync_stream(t, st[k]);
      ASSERT_OK(fco_comm_get_async_error(c->w[k].comms[0]));
      t_context("impl 2 on %s, pass %d: check comm %d", what, pass, k);
      ASSERT_EQ(ga_check(&c->w[k], &gc[k], &gb[k]), (size_t)0);
    }
  }
  for (int k = 0; k < NW; k++) {
    ga_free_bufs(&c->w[k], &gc[k], &gb[k]);
    ga_free_case(&gc[k]);
  }
}

/* impl 2 on more user streams than the library keeps push streams for (8 a thread and device:
 * later streams take over the least recently used one), NS calls issued back to back
 * on NS fresh streams with nothing ordering them, then every output checked; then impl 2 captured
 * on one more fresh stream (a stream first seen in a capture takes over an entry too), replayed
 * twice on fresh inputs and poisoned outputs. */
#define NS 12
static void chunks_many_streams(ctx_t* c) {
  const t_world_t* w = &c->w[0];
  void* s[NS + 1];
  ga_case_t gc[NS];
  ga_bufs_t gb[NS];
  for (int k = 0; k <= NS; k++) s[k] = new_stream(w->transport);
  for (int k = 0; k < NS; k++) {
    ga_make_moving_case(&gc[k], 1, 64 + 8 * k, 64 + 16 * (k % 3), k & 1,
                        k % 3 ? FCO_BF16 : FCO_F16, t_next_seed(), 1, 4);
    ga_upload(w, &gc[k], &gb[k]);
  }
  for (int k = 0; k < NS; k++) {
    t_context("impl 2 on fresh stream %d of %d", k, NS);
    ASSERT_OK(ga_issue(w, &gc[k], &gb[k], 2, 1, s[k]));
  }
  for (int k = 0; k < NS; k++) {
    sync_stream(w->transport, s[k]);
    ASSERT_OK(fco_comm_get_async_error(w->comms[0]));
    t_context("impl 2 on fresh stream %d of %d: check", k, NS);
    ASSERT_EQ(ga_check(w, &gc[k], &gb[k]), (size_t)0);
  }
  t_context("impl 2 captured on a fresh stream");
  ga_poison(w, &gc[0], &gb[0]);
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaStreamBeginCapture((cudaStream_t)s[NS], cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  fco_result_t r = ga_issue(w, &gc[0], &gb[0], 2, 1, s[NS]);
  ASSERT_EQ(cudaStreamEndCapture((cudaStream_t)s[NS], &g), cudaSuccess);
  ASSERT_OK(r);
  expect_plan(w, "impl 2", 1);
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int rep = 0; rep < 2; rep++) {
    t_context("impl 2 captured on a fresh stream: replay %d", rep);
    ga_refill_a(w, &gc[0], &gb[0], t_next_seed());
    ga_poison(w, &gc[0], &gb[0]);
    ASSERT_EQ(cudaGraphLaunch(ge, (cudaStream_t)s[NS]), cudaSuccess);
    sync_stream(w->transport, s[NS]);
    ASSERT_OK(fco_comm_get_async_error(w->comms[0]));
    ASSERT_EQ(ga_check(w, &gc[0], &gb[0]), (size_t)0);
  }
  ASSERT_EQ(cudaGraphExecDestroy(ge), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  for (int k = 0; k < NS; k++) {
    ga_free_bufs(w, &gc[k], &gb[k]);
    ga_free_case(&gc[k]);
  }
  for (int k = 0; k <= NS; k++) free_stream(w->transport, s[k]);
}

/* Live push streams of gemm_alltoall impl 2 (src/cuda/gemm_alltoall.cu; exported, not in fco.h). */
int fco_cuda_ga_push_streams_live(void);

/* One thread: impl 2 of world 0 on a stream of its own, checked; then the thread ends. */
typedef struct {
  const t_world_t* w;
  uint64_t seed;
} thread_arg_t;
static void* impl2_thread(void* p) {
  const thread_arg_t* a = (const thread_arg_t*)p;
  ASSERT_EQ(cudaSetDevice(t_rank_device(a->w->transport, 0)), cudaSuccess);
  void* s = new_stream(a->w->transport);
  ga_case_t gc;
  ga_bufs_t gb;
  ga_make_moving_case(&gc, 1, 64, 96, 0, FCO_BF16, a->seed, 1, 4);
  ga_upload(a->w, &gc, &gb);
  ASSERT_OK(ga_issue(a->w, &gc, &gb, 2, 1, s));
  sync_stream(a->w->transport, s);
  ASSERT_OK(fco_comm_get_async_error(a->w->comms[0]));
  ASSERT_EQ(ga_check(a->w, &gc, &gb), (size_t)0);
  ga_free_bufs(a->w, &gc, &gb);
  ga_free_case(&gc);
  free_stream(a->w->transport, s);
  return NULL;
}

/* NT threads one after another, each running impl 2 once and ending: every thread's push stream
 * is given back when it ends (until session 34 each stayed to the process's end: a thread per
 * request leaked a CUDA stream and 128 events each). */
#define NT 40
static void threads_give_back(ctx_t* c) {
  const int before = fco_cuda_ga_push_streams_live();
  for (int i = 0; i < NT; i++) {
    thread_arg_t a = {&c->w[0], t_next_seed()};
    pthread_t th;
    t_context("impl 2 from thread %d of %d", i, NT);
    ASSERT_EQ(pthread_create(&th, NULL, impl2_thread, &a), 0);
    ASSERT_EQ(pthread_join(th, NULL), 0);
    t_context("after thread %d of %d ended: live push streams %d, %d before the threads", i, NT,
              fco_cuda_ga_push_streams_live(), before);
    ASSERT_EQ(fco_cuda_ga_push_streams_live(), before);
  }
}

/* Rank r of w keeps the failure FCO_FAULT_GA_PUSH caused, its message saying why. */
static void expect_kept(const t_world_t* w, int r) {
  ASSERT_EQ(fco_comm_get_async_error(w->comms[r]), FCO_ERR_CUDA);
  const char* msg = fco_last_error(w->comms[r]);
  if (!strstr(msg, "FCO_FAULT_GA_PUSH") || !strstr(msg, "unusable"))
    t_fail(__FILE__, __LINE__, "rank %d's error \"%s\" lacks the hook or \"unusable\"", r, msg);
}

/* impl 2 failing after it queued work on its push stream (test hook FCO_FAULT_GA_PUSH=1: the
 * exchange is queued, the first push fails; the case has rows, ga_make_moving_case: with none
 * nothing is pushed and the hook never fires), eager and then captured, each on a world of its
 * own (warmed up first, the hook off): the call returns the failure and its communicator keeps
 * it, saying why (its device epoch did not end: every later call returns it); captured, the push
 * stream is still joined back, so the capture ends (until session 63 the failure returned
 * unjoined: cudaStreamEndCapture failed with cudaErrorStreamCaptureUnjoined and the caller's
 * whole graph was lost). Then, the hook off, world 0 on the same stream: an eager call and a
 * capture are right. */
static void impl2_fault_joins(ctx_t* c) {
  const t_world_t* w = &c->w[0];
  void* s = new_stream(w->transport);
  ga_case_t gc;
  ga_bufs_t gb;
  ga_make_moving_case(&gc, 1, 64, 96, 0, FCO_BF16, t_next_seed(), 1, 4);
  for (int captured = 0; captured < 2; captured++) {
    const char* how = captured ? "captured" : "eager";
    t_world_t wf;
    ga_bufs_t fb;
    t_context("impl 2 with FCO_FAULT_GA_PUSH=1, %s: its world, warmed up", how);
    ASSERT_OK(t_world_init(&wf, w->transport, 1, NULL));
    ga_upload(&wf, &gc, &fb);
    ASSERT_OK(ga_issue(&wf, &gc, &fb, 2, 1, s));
    sync_stream(w->transport, s);
    ASSERT_EQ(ga_check(&wf, &gc, &fb), (size_t)0);
    t_context("impl 2 with FCO_FAULT_GA_PUSH=1, %s", how);
    ASSERT_EQ(setenv("FCO_FAULT_GA_PUSH", "1", 1), 0);
    cudaGraph_t g = NULL;
    if (captured)
      ASSERT_EQ(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal),
                cudaSuccess);
    const fco_result_t r = ga_issue(&wf, &gc, &fb, 2, 1, s);
    const cudaError_t end = captured ? cudaStreamEndCapture((cudaStream_t)s, &g) : cudaSuccess;
    ASSERT_EQ(unsetenv("FCO_FAULT_GA_PUSH"), 0);
    ASSERT_EQ(r, FCO_ERR_CUDA);
    ASSERT_EQ(end, cudaSuccess); /* cudaErrorStreamCaptureUnjoined: the push stream left */
    if (g) ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
    sync_stream(w->transport, s);
    expect_kept(&wf, 0);
    t_context("impl 2 %s after the failure: refused", how);
    ASSERT_EQ(ga_issue(&wf, &gc, &fb, 2, 1, s), FCO_ERR_CUDA);
    ga_free_bufs(&wf, &gc, &fb);
    t_world_destroy(&wf, 0);
  }
  t_context("impl 2 of world 0 after the failures, eager");
  ga_upload(w, &gc, &gb);
  ASSERT_OK(ga_issue(w, &gc, &gb, 2, 1, s));
  sync_stream(w->transport, s);
  ASSERT_EQ(ga_check(w, &gc, &gb), (size_t)0);
  t_context("impl 2 of world 0 after the failures, captured and replayed");
  ga_graph_once(w, &gc, &gb, 2, s, -1);
  ga_free_bufs(w, &gc, &gb);
  ga_free_case(&gc);
  free_stream(w->transport, s);
}

/* Local transport, two virtual ranks on two streams, only rank 1's being captured: the call
 * makes rank 0's stream wait for rank 1's (which draws it into the capture) and, after the
 * one launch, rank 1's wait for rank 0's. With the launch failing (FCO_FAULT_GA_PUSH=1) that
 * second join must still be made: until session 63 the failure returned before it, and
 * cudaStreamEndCapture failed with cudaErrorStreamCaptureUnjoined (the whole graph lost). Both
 * virtual ranks then keep the failure. */
static void local_join_after_failure(void) {
  t_world_t w2;
  t_context("local world of 2 virtual ranks");
  ASSERT_OK(t_world_init(&w2, FCO_TRANSPORT_LOCAL, 2, NULL));
  void* s[2] = {new_stream(FCO_TRANSPORT_LOCAL), new_stream(FCO_TRANSPORT_LOCAL)};
  ga_case_t gc;
  ga_bufs_t gb;
  ga_make_moving_case(&gc, 2, 64, 96, 0, FCO_BF16, t_next_seed(), 1, 4);
  ga_upload(&w2, &gc, &gb);
  for (int pass = 0; pass < 2; pass++) { /* 0: warm-up, 1: the failure captured */
    t_context("local P = 2, impl 2 on two streams, %s", pass ? "the failure captured" : "warm-up");
    ga_poison(&w2, &gc, &gb);
    cudaGraph_t g = NULL;
    if (pass == 1) {
      ASSERT_EQ(setenv("FCO_FAULT_GA_PUSH", "1", 1), 0);
      ASSERT_EQ(cudaStreamBeginCapture((cudaStream_t)s[1], cudaStreamCaptureModeThreadLocal),
                cudaSuccess);
    }
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < 2; r++) ASSERT_OK(ga_issue_rank(&w2, &gc, &gb, r, 2, 1, s[r]));
    const fco_result_t e = fco_group_end();
    if (pass == 1) {
      const cudaError_t end = cudaStreamEndCapture((cudaStream_t)s[1], &g);
      ASSERT_EQ(unsetenv("FCO_FAULT_GA_PUSH"), 0);
      ASSERT_EQ(e, FCO_ERR_CUDA);
      ASSERT_EQ(end, cudaSuccess); /* cudaErrorStreamCaptureUnjoined: rank 0's stream left */
      ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
      for (int r = 0; r < 2; r++) expect_kept(&w2, r);
      break;
    }
    ASSERT_OK(e);
    for (int r = 0; r < 2; r++) sync_stream(FCO_TRANSPORT_LOCAL, s[r]);
    ASSERT_OK(fco_comm_get_async_error(w2.comms[0]));
    ASSERT_EQ(ga_check(&w2, &gc, &gb), (size_t)0);
  }
  for (int r = 0; r < 2; r++) sync_stream(FCO_TRANSPORT_LOCAL, s[r]);
  ga_free_bufs(&w2, &gc, &gb);
  ga_free_case(&gc);
  for (int r = 0; r < 2; r++) free_stream(FCO_TRANSPORT_LOCAL, s[r]);
  t_world_destroy(&w2, 0);
}

/* Another thread's capture in CUDA's global mode (torch.cuda.graph's default), open on a stream
 * of its own while this process's eager unfused calls do their lazy setup on fresh streams:
 * gemv impl 0 on NF of them from this thread (cuBLAS workspaces made, the least recently used
 * freed past 16) and gemm impl 2 from a new thread (its push stream and events made; no hints:
 * the counts copied to the host and its stream synchronized). Until session 63 that setup ran
 * in the global mode too: the first cudaMalloc was refused (the call failed) and the other
 * thread's capture was invalidated. Now every call must succeed, the
 * capture end valid and its graph replay. Inputs are uploaded and outputs checked outside the
 * capture's window (the test's own synchronous copies would be refused inside it). */
typedef struct {
  int device;
  int phase; /* 1: the capture is open; 2: the other threads' calls are issued */
  cudaError_t begin, end, inst, launch;
  unsigned char got[64];
} fcap_t;

static void* capture_thread(void* p) {
  fcap_t* f = (fcap_t*)p;
  cudaStream_t s;
  void* buf;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  ASSERT_EQ(cudaSetDevice(f->device), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&buf, sizeof f->got), cudaSuccess);
  ASSERT_EQ(cudaMemset(buf, 0, sizeof f->got), cudaSuccess);
  f->begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  if (f->begin == cudaSuccess) (void)cudaMemsetAsync(buf, 0x5a, sizeof f->got, s);
  __atomic_store_n(&f->phase, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(&f->phase, __ATOMIC_ACQUIRE) != 2) usleep(200);
  if (f->begin == cudaSuccess) f->end = cudaStreamEndCapture(s, &g);
  if (f->begin == cudaSuccess && f->end == cudaSuccess) {
    f->inst = cudaGraphInstantiate(&ge, g, 0);
    if (f->inst == cudaSuccess) f->launch = cudaGraphLaunch(ge, s);
    if (f->inst == cudaSuccess && f->launch == cudaSuccess)
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  (void)cudaGetLastError();
  ASSERT_EQ(cudaMemcpy(f->got, buf, sizeof f->got, cudaMemcpyDeviceToHost), cudaSuccess);
  if (ge) ASSERT_EQ(cudaGraphExecDestroy(ge), cudaSuccess);
  if (g) ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaFree(buf), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  return NULL;
}

typedef struct {
  const t_world_t* w;
  const ga_case_t* gc;
  const ga_bufs_t* gb;
  void* stream;
  fco_result_t r;
} impl2_in_window_t;

/* gemm impl 2 from a thread of its own (no push stream yet: it makes one), without the hints
 * (it copies the counts to the host and synchronizes its stream); its results checked by the
 * caller once the capture has ended. */
static void* impl2_in_window(void* p) {
  impl2_in_window_t* a = (impl2_in_window_t*)p;
  ASSERT_EQ(cudaSetDevice(t_rank_device(a->w->transport, 0)), cudaSuccess);
  a->r = ga_issue(a->w, a->gc, a->gb, 2, 0, a->stream);
  return NULL;
}

#define NF 18
static void foreign_capture(ctx_t* c) {
  const t_world_t* w = &c->w[0];
  gemv_bufs_t* b = &c->gv[0];
  void* s[NF + 1];
  for (int k = 0; k <= NF; k++) s[k] = new_stream(w->transport);
  gemv_prepare(b, 4, 1000, 4608, FCO_BF16, 1, t_next_seed());
  ga_case_t gc;
  ga_bufs_t gb;
  ga_make_moving_case(&gc, 1, 64, 96, 0, FCO_BF16, t_next_seed(), 1, 4);
  ga_upload(w, &gc, &gb);
  const int before = fco_cuda_ga_push_streams_live();
  fcap_t f;
  memset(&f, 0, sizeof f);
  f.device = t_rank_device(w->transport, 0);
  pthread_t cap;
  ASSERT_EQ(pthread_create(&cap, NULL, capture_thread, &f), 0);
  const double t0 = t_now_ms();
  while (!__atomic_load_n(&f.phase, __ATOMIC_ACQUIRE) && t_now_ms() - t0 < 10000) usleep(200);
  ASSERT_EQ(__atomic_load_n(&f.phase, __ATOMIC_ACQUIRE), 1);
  ASSERT_EQ(f.begin, cudaSuccess);
  /* Each call's stream waits for the one before (an event): calls of one communicator must be
   * ordered, and no stream may be synchronized here (cudaStreamSynchronize is refused too while
   * another thread captures in global mode: cudaErrorStreamCaptureUnsupported, on an H100). */
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  for (int k = 0; k < NF; k++) { /* the same inputs and y each time: one check at the end */
    t_context("another thread's global capture open: gemv impl 0 on fresh stream %d of %d", k,
              NF);
    ASSERT_OK(gemv_issue(w, b, 0, &s[k]));
    ASSERT_EQ(cudaEventRecord(ev, (cudaStream_t)s[k]), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent((cudaStream_t)s[k + 1], ev, 0), cudaSuccess);
  }
  impl2_in_window_t a = {w, &gc, &gb, s[NF], FCO_OK};
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, impl2_in_window, &a), 0);
  ASSERT_EQ(pthread_join(th, NULL), 0);
  t_context("another thread's global capture open: gemm impl 2 from a new thread");
  ASSERT_OK(a.r);
  __atomic_store_n(&f.phase, 2, __ATOMIC_RELEASE);
  ASSERT_EQ(pthread_join(cap, NULL), 0);
  sync_stream(w->transport, s[NF]); /* after every call of the window (the event chain) */
  ASSERT_EQ(cudaEventDestroy(ev), cudaSuccess);
  t_context("the other thread's global capture after the calls: end / instantiate / launch");
  ASSERT_EQ(f.end, cudaSuccess); /* cudaErrorStreamCaptureInvalidated: our setup broke it */
  ASSERT_EQ(f.inst, cudaSuccess);
  ASSERT_EQ(f.launch, cudaSuccess);
  for (size_t i = 0; i < sizeof f.got; i++) ASSERT_EQ(f.got[i], 0x5a);
  t_context("the calls made during the other thread's capture: check");
  ASSERT_OK(fco_comm_get_async_error(w->comms[0]));
  ASSERT_EQ(gemv_check(w, b), (size_t)0);
  ASSERT_EQ(ga_check(w, &gc, &gb), (size_t)0);
  ASSERT_EQ(fco_cuda_ga_push_streams_live(), before); /* the ended thread gave its back */
  ga_free_bufs(w, &gc, &gb);
  ga_free_case(&gc);
  for (int k = 0; k <= NF; k++) free_stream(w->transport, s[k]);
}

/* gemm_alltoall impl 0 (with the hints: capturable) captured on a stream that never ran it
 * eagerly: no workspace, right results. */
static void gemm_graph_fresh_stream(ctx_t* c) {
  const t_world_t* w = &c->w[0];
  void* s = new_stream(w->transport);
  ga_case_t gc;
  ga_bufs_t gb;
  ga_make_moving_case(&gc, 1, c->gemm_k, 128, 0, FCO_BF16, t_next_seed(), 1, 4);
  ga_upload(w, &gc, &gb);
  t_context("gemm_alltoall impl 0 captured on a fresh stream");
  ga_graph_once(w, &gc, &gb, 0, s, 1);
  ga_free_bufs(w, &gc, &gb);
  ga_free_case(&gc);
  free_stream(w->transport, s);
}
#endif

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  const int quick = t_quick();
  ctx_t c;
  memset(&c, 0, sizeof c);
  c.gemm_k = t_is_gpu(t) ? 4096 : 96; /* the cpu reference is slow at K 4096 */
  for (int k = 0; k < NW; k++) {
    t_context("comm %d: fco_comm_init_all", k);
    ASSERT_OK(t_world_init(&c.w[k], t, 1, NULL));
    c.st[k] = new_stream(t);
    gemv_bufs_alloc(&c.gv[k], &c.w[k]);
  }
  const int rounds = quick ? 3 : 8;
  for (int round = 0; round < rounds; round++) concurrent_round(&c, round);
  printf("two communicators, two streams, %d rounds: ok\n", rounds);
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(t)) {
    chunks_independent(&c, c.st, "two streams");
    printf("impl 2 of two communicators on two streams, one held: ok\n");
    chunks_many_streams(&c);
    printf("impl 2 on %d fresh streams at once, and captured on one more: ok\n", NS);
    /* The push streams are all made now: two more fresh streams each take over the least
     * recently used one (until session 34 both shared the first: the second call waited). */
    void* more[NW] = {new_stream(t), new_stream(t)};
    chunks_independent(&c, more, "two fresh streams past the 8 push streams");
    for (int k = 0; k < NW; k++) free_stream(t, more[k]);
    printf("impl 2 on two more fresh streams, one held: ok\n");
    threads_give_back(&c);
    printf("impl 2 from %d threads in turn, each one's push stream given back: ok\n", NT);
    void* s = new_stream(t);
    graph_on(&c, s, 1, "a stream with no eager call"); /* no workspace */
    t_context("eager call on that stream");
    gemv_prepare(&c.gv[0], 4, 1000, 4608, FCO_BF16, 1, t_next_seed());
    ASSERT_OK(gemv_issue(&c.w[0], &c.gv[0], 0, &s));
    sync_stream(t, s);
    expect_plan(&c.w[0], "no cuBLAS workspace", 0);
    ASSERT_EQ(gemv_check(&c.w[0], &c.gv[0]), (size_t)0);
    graph_on(&c, s, 0, "the stream after an eager call"); /* its own workspace */
    free_stream(t, s);
    gemm_graph_fresh_stream(&c);
    printf("CUDA graphs on fresh and warmed-up streams, 18 more streams: ok\n");
    impl2_fault_joins(&c);
    printf("impl 2 failing after its fork (FCO_FAULT_GA_PUSH), eager and captured: ok\n");
    if (t == FCO_TRANSPORT_LOCAL) {
      local_join_after_failure();
      printf("local P = 2 on two streams, the launch failing inside a capture of one: ok\n");
    }
    foreign_capture(&c);
    printf("another thread's global capture open during lazy setup on %d fresh streams: ok\n",
           NF + 1);
  }
#endif
  for (int k = 0; k < NW; k++) {
    gemv_bufs_free(&c.gv[k]);
    free_stream(t, c.st[k]);
    t_world_destroy(&c.w[k], 0);
  }
  return t_pass(t, 1, 1);
}
