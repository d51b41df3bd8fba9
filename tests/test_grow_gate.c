/*
 * test_grow_gate.c — the nccl transport's collective setup steps (workspace growth,
 * fco_mem_alloc) when the ranks do not all take them: each step enters through a gate bounded
 * by FCO_TIMEOUT_MS (src/cuda/gate.h) instead of waiting in an NCCL all-reduce forever. Two
 * GPUs, one process per rank, each case in fresh child processes under a deadline (a hang
 * fails the test instead of stalling the suite); timeout_ms = 2000.
 *   G1  fco_comm_reserve on rank 0 only: rank 0 returns FCO_ERR_TIMEOUT naming rank 1 within
 *       the bound (it used to wait forever), and its communicator is unusable (sticky).
 *   G2  fco_allreduce (impl 1) whose count differs between the ranks (a caller's error) so that
 *       only rank 0's call must grow the workspace: rank 0 FCO_ERR_TIMEOUT from the growth,
 *       rank 1's kernel times out waiting for rank 0 (async error): both bounded.
 *   G3  fco_comm_reserve with different sizes on the two ranks: both grow to the larger size's
 *       workspace (one size on every rank), and an allreduce through it is exact.
 *   G4  fco_mem_alloc on rank 0 only: FCO_ERR_TIMEOUT naming rank 1, sticky.
 *   G5  rank 1 500 ms late to a growth, inside the bound: both grow; exact allreduce after.
 *   G6  rank 0 grows (fco_comm_reserve) while rank 1 calls fco_mem_alloc: both pass the gate
 *       in one generation, but their NCCL steps differ (they hung in them): both refuse with
 *       FCO_ERR_INVALID_USAGE naming "a different collective step", bounded, sticky.
 *   FCO_TRANSPORT=nccl build/tests/test_grow_gate   (exit 77 otherwise)
 */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>

enum { P = 2, TIMEOUT_MS = 2000 };

typedef enum {
  G1_RESERVE_ALONE,
  G2_COUNTS_DIFFER,
  G3_SIZES_DIFFER,
  G4_ALLOC_ALONE,
  G5_LATE,
  G6_STEPS_DIFFER
} case_t;
static const char* const kName[] = {"G1 reserve on one rank", "G2 allreduce counts differ",
                                    "G3 reserve sizes differ", "G4 fco_mem_alloc on one rank",
                                    "G5 a rank late inside the bound",
                                    "G6 a growth against an fco_mem_alloc"};
typedef struct {
  case_t c;
  int fd[2]; /* rank 0 writes the unique id, rank 1 reads it */
} arg_t;

static unsigned g_mix; /* fresh inputs every run (set before the children fork) */

/* An impl 1 allreduce of `count` f32 on both ranks (the same count): exact (small integers). */
static void exact_allreduce(fco_comm_t c, int rank, size_t count) {
  float* h = (float*)malloc(count * sizeof(float));
  float *in = NULL, *out = NULL;
  ASSERT_EQ(cudaMalloc((void**)&in, count * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc((void**)&out, count * 4), cudaSuccess);
  for (size_t i = 0; i < count; i++) h[i] = (float)((int)((i * 7 + rank * 3 + g_mix) % 11) - 5);
  ASSERT_EQ(cudaMemcpy(in, h, count * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0xFF, count * 4), cudaSuccess);
  ASSERT_OK(fco_allreduce(c, in, out, count, FCO_F32, 1, NULL));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_OK(fco_comm_get_async_error(c));
  ASSERT_EQ(cudaMemcpy(h, out, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int q = 0; q < P; q++) want += (float)((int)((i * 7 + q * 3 + g_mix) % 11) - 5);
    if (h[i] != want) {
      t_fail(__FILE__, __LINE__, "rank %d: out[%zu] = %g, want %g", rank, i, (double)h[i],
             (double)want);
      break;
    }
  }
  ASSERT_EQ(cudaFree(in), cudaSuccess);
  ASSERT_EQ(cudaFree(out), cudaSuccess);
  free(h);
}

/* The communicator holds the gate's error: a later call is refused with it. */
static void expect_sticky(fco_comm_t c, fco_result_t code) {
  size_t ws = 0;
  ASSERT_OK(fco_comm_workspace_bytes(c, &ws));
  ASSERT_RES(fco_comm_reserve(c, ws + ((size_t)64 << 20)), code);
  ASSERT_STR_HAS(fco_last_error(c), "refused");
  ASSERT_RES(fco_comm_get_async_error(c), code);
}

/* G1 / G4: rank 0's step, which rank 1 never takes, returned `r` at t0: TIMEOUT naming rank 1
 * (`want` in the message) within the bound, and sticky. */
static void lone_timed_out(fco_comm_t c, fco_result_t r, double t0, const char* want) {
  const double ms = t_now_ms() - t0;
  printf("rank 0: after %.0f ms: %s\n", ms, fco_last_error(c));
  ASSERT_RES(r, FCO_ERR_TIMEOUT);
  ASSERT_STR_HAS(fco_last_error(c), want);
  ASSERT_LT(ms, 20.0 * TIMEOUT_MS);
  expect_sticky(c, FCO_ERR_TIMEOUT);
}

static int proc_rank(int rank, void* arg) {
  arg_t* a = (arg_t*)arg;
  t_context("%s: rank %d", kName[a->c], rank);
  ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
  fco_comm_t c = t_nccl_join(rank, P, a->fd, TIMEOUT_MS);
  size_t ws0 = 0, ws = 0;
  ASSERT_OK(fco_comm_workspace_bytes(c, &ws0));
  const size_t more = ws0 + ((size_t)40 << 20);
  double t0 = t_now_ms();
  switch (a->c) {
    case G1_RESERVE_ALONE:
      if (rank == 0) {
        const fco_result_t r = fco_comm_reserve(c, more);
        lone_timed_out(c, r, t0, "rank 1 did not take this collective step");
      } else {
        usleep(3 * TIMEOUT_MS * 1000); /* alive, never growing, while rank 0 waits */
      }
      break;
    case G2_COUNTS_DIFFER: {
      const size_t small = 1024, large = (size_t)8 << 20; /* large: 128 MiB of impl 1 ws */
      ASSERT_OK(fco_allreduce_workspace(c, small, FCO_F32, 1, &ws));
      ASSERT_OK(fco_comm_reserve(c, ws)); /* both: the small call needs no growth */
      exact_allreduce(c, rank, small);
      const size_t count = rank == 0 ? large : small;
      float *in = NULL, *out = NULL;
      ASSERT_EQ(cudaMalloc((void**)&in, count * 4), cudaSuccess);
      ASSERT_EQ(cudaMalloc((void**)&out, count * 4), cudaSuccess);
      ASSERT_EQ(cudaMemset(in, 0, count * 4), cudaSuccess);
      t0 = t_now_ms();
      fco_result_t r = fco_allreduce(c, in, out, count, FCO_F32, 1, NULL);
      if (r == FCO_OK) {
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        r = fco_comm_get_async_error(c);
      }
      const double ms = t_now_ms() - t0;
      printf("rank %d: after %.0f ms: %s\n", rank, ms, fco_last_error(c));
      ASSERT_RES(r, FCO_ERR_TIMEOUT);
      if (rank == 0) ASSERT_STR_HAS(fco_last_error(c), "workspace growth: rank 1");
      ASSERT_LT(ms, 20.0 * TIMEOUT_MS);
      expect_sticky(c, FCO_ERR_TIMEOUT);
      break;
    }
    case G3_SIZES_DIFFER:
      ASSERT_OK(fco_comm_reserve(c, rank == 0 ? ws0 + ((size_t)3 << 20) : more));
      ASSERT_OK(fco_comm_workspace_bytes(c, &ws));
      printf("rank %d: asked %zu, holds %zu bytes\n", rank,
             rank == 0 ? ws0 + ((size_t)3 << 20) : more, ws);
      ASSERT_GE(ws, more); /* the larger request, on both ranks */
      exact_allreduce(c, rank, (size_t)1 << 20);
      break;
    case G4_ALLOC_ALONE:
      if (rank == 0) {
        void* p = NULL;
        const fco_result_t r = fco_mem_alloc(c, (size_t)1 << 20, &p);
        ASSERT_NULL(p);
        lone_timed_out(c, r, t0, "fco_mem_alloc: rank 1 did not take");
      } else {
        usleep(3 * TIMEOUT_MS * 1000);
      }
      break;
    case G5_LATE:
      if (rank == 1) usleep(500 * 1000);
      ASSERT_OK(fco_comm_reserve(c, more));
      ASSERT_OK(fco_comm_workspace_bytes(c, &ws));
      ASSERT_GE(ws, more);
      exact_allreduce(c, rank, (size_t)1 << 16);
      break;
    case G6_STEPS_DIFFER: {
      void* p = NULL;
      const fco_result_t r = rank == 0 ? fco_comm_reserve(c, more)
                                       : fco_mem_alloc(c, (size_t)1 << 20, &p);
      const double ms = t_now_ms() - t0;
      printf("rank %d: after %.0f ms: %s\n", rank, ms, fco_last_error(c));
      ASSERT_NULL(p);
      ASSERT_RES(r, FCO_ERR_INVALID_USAGE);
      ASSERT_STR_HAS(fco_last_error(c), "a different collective step");
      ASSERT_LT(ms, 20.0 * TIMEOUT_MS);
      expect_sticky(c, FCO_ERR_INVALID_USAGE);
      break;
    }
  }
  ASSERT_OK(fco_comm_destroy(c));
  return 0;
}

int main(void) {
  t_seed_init();
  g_mix = (unsigned)(t_next_seed() % 11);
  if (t_transport() != FCO_TRANSPORT_NCCL) t_skip("nccl transport only (FCO_TRANSPORT=nccl)");
  const int gpus = t_fork_gpu_count();
  if (gpus < 2) t_skip("needs two GPUs, found %d", gpus);
  int st[P];
  for (int k = G1_RESERVE_ALONE; k <= G6_STEPS_DIFFER; k++) {
    arg_t a;
    a.c = (case_t)k;
    ASSERT_EQ(pipe(a.fd), 0);
    t_context("%s", kName[k]);
    t_fork_run(P, proc_rank, &a, 90, st);
    close(a.fd[0]);
    close(a.fd[1]);
    for (int r = 0; r < P; r++)
      if (st[r] != 0)
        t_fail(__FILE__, __LINE__, "%s: rank %d ended with %d (-1: killed after 90 s: a hang)",
               kName[k], r, st[r]);
    printf("%s: ok\n", kName[k]);
  }
  printf("PASS\n");
  return 0;
}
#else
int main(void) {
  t_skip("built without CUDA");
}
#endif
