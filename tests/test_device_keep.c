/*
 * test_device_keep.c — public calls on a GPU transport give the caller's current CUDA device
 * back (as NCCL's calls do), though they switch to each rank's device inside: init_all,
 * fco_comm_reserve, fco_mem_alloc / fco_mem_free, operator calls in a group (fco_gemm_alltoall
 * asks whether the stream captures when the call is made, before the group runs), destroy. And a
 * process that has not used the caller's device (a thread reads device 0 before any CUDA
 * call) is left on the rank's device: no context is made on GPU 0 for it. Needs two GPUs to
 * tell devices apart (skips otherwise; cpu: no CUDA device).
 *   make test   or   build/tests/test_device_keep   (FCO_TRANSPORT=local|nccl)
 */
#include "ga_fixture.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>

static int current(void) {
  int d = -1;
  ASSERT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

/* Make `dev` current and in use (its primary context created). */
static void use(int dev) {
  ASSERT_EQ(cudaSetDevice(dev), cudaSuccess);
  ASSERT_EQ(cudaFree(0), cudaSuccess);
}

#define ASSERT_DEVICE(want, what)                                                          \
  do {                                                                                     \
    int d_ = current();                                                                    \
    if (d_ != (want))                                                                      \
      t_fail(__FILE__, __LINE__, "after %s the current device is %d, want the caller's %d", \
             (what), d_, (want));                                                          \
  } while (0)

/* First, before this process has used any GPU: a one-rank world on device 1 leaves device 1
 * current (the thread's device 0 had no context to give back). */
static void fresh_process(fco_transport_t t) {
  t_context("fresh process: a one-rank world on device 1");
  fco_config_t cfg;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = t;
  const int devs[1] = {1};
  fco_comm_t c = NULL;
  ASSERT_OK(fco_comm_init_all(&c, 1, devs, &cfg));
  ASSERT_DEVICE(1, "init_all on device 1 in a fresh process");
  ASSERT_OK(fco_comm_destroy(c));
  ASSERT_DEVICE(1, "destroy");
}

static void caller_kept(fco_transport_t t, int caller) {
  t_context("%s, caller on device %d", fco_transport_name(t), caller);
  const int n = 2;
  t_world_t w;
  use(caller);
  ASSERT_OK(t_world_init(&w, t, n, NULL));
  ASSERT_DEVICE(caller, "fco_comm_init_all");

  t_ar_bufs_t b;
  const uint64_t seed = t_next_seed();
  t_ar_alloc(&w, &b, 4096); /* these helpers set each rank's device: the caller's back next */
  t_ar_prepare(&w, &b, 4096, FCO_F32, 0, seed);
  use(caller);
  ASSERT_OK(t_ar_run(&w, &b, 1));
  ASSERT_DEVICE(caller, "an allreduce group");
  t_sync(&w);
  ASSERT_EQ(t_ar_check(&w, &b, seed), 0);

  ga_case_t gc;
  ga_bufs_t gb;
  ga_make_case(&gc, n, 64, 48, FCO_W_KN, FCO_BF16, t_next_seed(), 0, 2);
  ga_upload(&w, &gc, &gb);
  use(caller);
  ASSERT_OK(ga_issue(&w, &gc, &gb, FCO_IMPL_AUTO, 1, NULL));
  ASSERT_DEVICE(caller, "a gemm_alltoall group");
  t_sync(&w);
  ASSERT_EQ(ga_check(&w, &gc, &gb), 0);
  ga_free_bufs(&w, &gc, &gb);
  ga_free_case(&gc);

  use(caller);
  size_t ws = 0;
  ASSERT_OK(fco_comm_workspace_bytes(w.comms[0], &ws));
  ASSERT_OK(fco_comm_reserve(w.comms[0], 2 * ws + 1));
  ASSERT_DEVICE(caller, "fco_comm_reserve (growth)");

  void* p[2] = {NULL, NULL};
  for (int r = 0; r < n; r++) ASSERT_OK(fco_mem_alloc(w.comms[r], 1 << 20, &p[r]));
  ASSERT_DEVICE(caller, "fco_mem_alloc");
  for (int r = 0; r < n; r++) ASSERT_OK(fco_mem_free(w.comms[r], p[r]));
  ASSERT_DEVICE(caller, "fco_mem_free");

  t_ar_free(&w, &b);
  use(caller);
  for (int r = n - 1; r >= 0; r--) ASSERT_OK(fco_comm_destroy(w.comms[r]));
  ASSERT_DEVICE(caller, "fco_comm_destroy");
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  if (!t_is_gpu(t)) t_skip("transport %s uses no CUDA device", fco_transport_name(t));
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2)
    t_skip("two GPUs needed to tell the caller's device from a rank's, %d visible", gpus);
  fresh_process(t);
  /* nccl: ranks on devices 0 and 1, the last touched is 1, so caller 0 tells; local: every
   * virtual rank on device 0, caller on 1. */
  caller_kept(t, t == FCO_TRANSPORT_NCCL ? 0 : 1);
  printf("PASS\n");
  return 0;
}
#else
int main(void) { t_skip("a build without CUDA: no device to keep"); }
#endif
