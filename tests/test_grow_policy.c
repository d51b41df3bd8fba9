/*
 * test_grow_policy.c — the sizes a GPU transport's workspace grows to (src/transport/
 * gpu_common.h, fco_gpu_ws_target). Above 256 MiB a growth takes 64 MiB steps; but a growth
 * after a captured call keeps the old workspace for the graph until destroy, so there it at
 * least doubles the workspace: what growths after captures keep stays below the final size
 * (with 64 MiB steps, a graph per step kept one workspace per step). Per world (P = 1, 2):
 *   - fco_comm_reserve(320 MiB) → 320 MiB; (321 MiB) → 384 MiB, no capture: 64 MiB steps;
 *   - a gemv_allreduce call captured into a CUDA graph on that workspace, then
 *     fco_comm_reserve(385 MiB) → 768 MiB on every rank (twice 384, not 448);
 *   - the graph replayed after the growth: exact (its workspace was kept);
 *   - fco_comm_reserve(769 MiB) → 832 MiB: the 768 MiB workspace no captured call used.
 * First, on the fresh world, the setup steps inside a capture (review rev62): while a blocking
 * stream of rank 0's device captures in global mode, fco_comm_reserve, fco_mem_alloc and a gemv
 * call that must grow (on streams of its own, not captured) are refused with
 * FCO_ERR_INVALID_USAGE ("being captured") before they allocate or agree (on nccl they failed
 * past the gate, the peers waiting in NCCL), the capture stays valid, and nothing is sticky.
 *   build/tests/test_grow_policy   (FCO_TRANSPORT=local|nccl; exit 77 on cpu)
 */
#include <stdlib.h>

#include "gemv_fixture.h"

#define MIB ((size_t)1 << 20)

#ifdef FCO_HAVE_CUDA
static void expect_ws(const t_world_t* w, size_t want) {
  for (int r = 0; r < w->n; r++) {
    size_t ws = 0;
    ASSERT_OK(fco_comm_workspace_bytes(w->comms[r], &ws));
    if (ws != want)
      t_fail(__FILE__, __LINE__, "rank %d holds %zu MiB of workspace, want %zu MiB", r,
             ws / MIB, want / MIB);
  }
}

static void capture_refusals(const t_world_t* w, gemv_bufs_t* b) {
  const fco_transport_t t = w->transport;
  gemv_prepare(b, 16, 1000, gemv_vec_kt(w->n), FCO_BF16, 1, t_next_seed());
  size_t need = 0;
  ASSERT_OK(fco_gemv_allreduce_workspace(w->comms[0], 16, 1000, b->K[0], FCO_BF16, 1, &need));
  cudaStream_t own[T_MAX_RANKS];
  void* sp[T_MAX_RANKS];
  for (int r = 0; r < w->n; r++) {
    ASSERT_EQ(cudaSetDevice(t_rank_device(t, r)), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&own[r], cudaStreamNonBlocking), cudaSuccess);
    sp[r] = own[r];
  }
  cudaStream_t cs;
  ASSERT_EQ(cudaSetDevice(t_rank_device(t, 0)), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&cs), cudaSuccess); /* blocking: the default streams tell */
  ASSERT_EQ(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(b->y[0], 0, 64, cs), cudaSuccess);
  ASSERT_RES(fco_comm_reserve(w->comms[0], 64 * MIB), FCO_ERR_INVALID_USAGE);
  ASSERT_STR_HAS(fco_last_error(w->comms[0]), "being captured");
  void* p = (void*)&p;
  ASSERT_RES(fco_mem_alloc(w->comms[0], MIB, &p), FCO_ERR_INVALID_USAGE);
  ASSERT_STR_HAS(fco_last_error(w->comms[0]), "being captured");
  ASSERT_NULL(p);
  if (need > 0) { /* a fresh world holds no workspace: the call must grow it */
    ASSERT_RES(gemv_issue(w, b, 1, sp), FCO_ERR_INVALID_USAGE);
    ASSERT_STR_HAS(fco_last_error(w->comms[0]), "being captured");
  } else {
    printf("P=%d: gemv impl 1 needs no workspace here: its growth not tried\n", w->n);
  }
  ASSERT_EQ(cudaSetDevice(t_rank_device(t, 0)), cudaSuccess);
  cudaGraph_t g = NULL;
  ASSERT_EQ(cudaStreamEndCapture(cs, &g), cudaSuccess); /* still valid: nothing broke it */
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(cs), cudaSuccess);
  for (int r = 0; r < w->n; r++) {
    ASSERT_OK(fco_comm_get_async_error(w->comms[r])); /* not sticky */
    ASSERT_EQ(cudaSetDevice(t_rank_device(t, r)), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(own[r]), cudaSuccess);
  }
  printf("P=%d: reserve, fco_mem_alloc%s inside a capture refused, the capture valid\n", w->n,
         need > 0 ? " and a growing call" : "");
}

static void one_world(fco_transport_t t, int n) {
  t_world_t w;
  t_context("P=%d: init", n);
  ASSERT_OK(t_world_init(&w, t, n, NULL));
  gemv_bufs_t* b = (gemv_bufs_t*)calloc(1, sizeof *b);
  ASSERT_NOT_NULL(b);
  gemv_bufs_alloc(b, &w);

  t_context("P=%d: setup steps inside a capture", n);
  capture_refusals(&w, b);

  t_context("P=%d: growths without a capture", n);
  ASSERT_OK(fco_comm_reserve(w.comms[0], 320 * MIB));
  expect_ws(&w, 320 * MIB);
  ASSERT_OK(fco_comm_reserve(w.comms[0], 321 * MIB));
  expect_ws(&w, 384 * MIB);

  gemv_capture_t c;
  gemv_capture_init(&c, &w);
  const uint64_t seed = t_next_seed();
  t_context("P=%d: a captured call, seed 0x%016llx", n, (unsigned long long)seed);
  gemv_prepare(b, 16, 1000, gemv_vec_kt(n), FCO_BF16, 1, seed);
  ASSERT_OK(gemv_issue(&w, b, 1, c.sp)); /* eager first: cuBLAS state, no growth */
  gemv_capture_sync(&c);
  gemv_capture_begin(&c);
  ASSERT_OK(gemv_issue(&w, b, 1, c.sp));
  gemv_capture_end(&c);
  gemv_capture_replay(&c, 1);

  t_context("P=%d: a growth after the capture", n);
  ASSERT_OK(fco_comm_reserve(w.comms[0], 385 * MIB));
  expect_ws(&w, 768 * MIB);
  const size_t es = fco_dtype_size(b->dt);
  for (int r = 0; r < w.n; r++)
    t_memset(t, t_rank_device(t, r), b->y[r], T_POISON, b->M * b->N * es);
  gemv_capture_replay(&c, 1);
  for (int r = 0; r < w.n; r++) ASSERT_OK(fco_comm_get_async_error(w.comms[r]));
  ASSERT_EQ(gemv_check(&w, b), 0);

  t_context("P=%d: a growth with nothing captured since", n);
  ASSERT_OK(fco_comm_reserve(w.comms[0], 769 * MIB));
  expect_ws(&w, 832 * MIB);
  gemv_capture_free(&c);
  gemv_bufs_free(b);
  free(b);
  t_world_destroy(&w, 0);
  printf("P=%d: 320 → 384 MiB, after a capture 768 MiB (graph exact), then 832 MiB\n", n);
}
#endif

int main(void) {
  t_seed_init();
  const fco_transport_t t = t_transport();
  if (!t_is_gpu(t)) t_skip("GPU transports only (the cpu transport captures no graphs)");
#ifdef FCO_HAVE_CUDA
  t_require_ranks(t, 1);
  const int max = t_test_max_ranks(t) < 2 ? t_test_max_ranks(t) : 2;
  for (int n = 1; n <= max; n++) one_world(t, n);
  return t_pass(t, max, 2);
#else
  t_skip("built without CUDA");
#endif
}
