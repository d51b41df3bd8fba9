/*
 * test_leaks.c — worlds that come and go give back what they took. Worlds of 1..max ranks are
 * made, used by every operator (impl 0 and the fused impls, symmetric outputs from fco_mem_alloc,
 * on GPU transports a call captured in a CUDA graph and replayed, then a growth that keeps the
 * captured workspace until destroy), and destroyed, round after
 * round. After a first round (one world of each size: what is made once a process — the cuBLAS
 * handle, workspaces, push streams — is made then) the process's resources are counted, and again
 * after at least 12 more worlds:
 *   - open file descriptors (/proc/self/fd) and threads (/proc/self/task): at most 2 and 1 more;
 *   - mappings of the cpu transport's shared memory (/dev/shm/fco-*) in /proc/self/maps: none
 *     left after any world is destroyed;
 *   - on GPU transports, device memory in use (cudaMemGetInfo, summed over the world's devices):
 *     at most 8 MiB more (a workspace, a symmetric window or a staging buffer left behind by each
 *     world is at least a 2 MiB page: 12 worlds would show 24 MiB).
 * Every call's output is checked against its reference as in the operators' own tests.
 *   make test   or   build/tests/test_leaks   (FCO_TRANSPORT=cpu|local|nccl)
 * Worlds of P = 1..FCO_TEST_MAX_RANKS; FCO_TEST_SEED reproduces a run.
 */
#include <dirent.h>
#include <stdlib.h>

#include "ea_fixture.h"
#include "ga_fixture.h"
#include "gemv_fixture.h"

typedef struct {
  int fds, threads;
  long long dev_used; /* bytes in use on the world's devices; -1 on cpu */
} counts_t;

static int dir_entries(const char* path) {
  DIR* d = opendir(path);
  ASSERT_NOT_NULL(d);
  int n = 0;
  for (struct dirent* e; (e = readdir(d));)
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - (strcmp(path, "/proc/self/fd") == 0); /* opendir's own */
}

/* Mappings of the cpu transport's shared memory segments (shm_open names "/fco-<nonce>"). */
static int fco_shm_maps(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  ASSERT_NOT_NULL(f);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, "/dev/shm/fco-")) ++n;
  fclose(f);
  return n;
}

static counts_t count_now(fco_transport_t t, int devices) {
  counts_t c = {dir_entries("/proc/self/fd"), dir_entries("/proc/self/task"), -1};
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(t)) {
    int prev = 0;
    ASSERT_EQ(cudaGetDevice(&prev), cudaSuccess);
    c.dev_used = 0;
    for (int d = 0; d < devices; d++) {
      size_t free_b = 0, total_b = 0;
      ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
      c.dev_used += (long long)(total_b - free_b);
    }
    ASSERT_EQ(cudaSetDevice(prev), cudaSuccess);
  }
#else
  (void)t;
  (void)devices;
#endif
  return c;
}

static void print_counts(const char* what, counts_t c) {
  printf("  %-34s fds %3d  threads %3d", what, c.fds, c.threads);
  if (c.dev_used >= 0) printf("  device memory in use %8.1f MiB", (double)c.dev_used / (1 << 20));
  printf("\n");
}

/* One world of n ranks, every operator on it, checked; then destroyed. */
static void one_world(fco_transport_t t, int n, int it) {
  t_world_t w;
  t_context("world %d: %d ranks, fco_comm_init_all", it, n);
  ASSERT_OK(t_world_init(&w, t, n, NULL));

  /* allreduce: the fused one-shot (AUTO at this size) and NCCL / the cpu path (impl 0) */
  t_ar_bufs_t ar;
  t_ar_alloc(&w, &ar, 5000);
  for (int impl = FCO_IMPL_AUTO; impl <= 0; impl++) {
    uint64_t seed = t_next_seed();
    t_context("world %d: %d ranks, allreduce impl %d", it, n, impl);
    t_ar_prepare(&w, &ar, 5000, FCO_BF16, 0, seed);
    ASSERT_OK(t_ar_run(&w, &ar, impl));
    t_sync(&w);
    ASSERT_EQ(t_ar_check(&w, &ar, seed), 0);
  }
  t_ar_free(&w, &ar);

  /* gemv_allreduce: impl 0, the fused impl 1 at M 4 (LL / one-shot) and M 48 (the grouped
   * tiles), and impl 1 captured in a CUDA graph */
  gemv_bufs_t* gv = (gemv_bufs_t*)calloc(1, sizeof *gv);
  ASSERT_NOT_NULL(gv);
  gemv_bufs_alloc(gv, &w);
  gemv_one_call(&w, gv, 4, 300, gemv_vec_kt(n), FCO_BF16, 1, 0);
  gemv_one_call(&w, gv, 4, 300, gemv_vec_kt(n), FCO_BF16, 1, 1);
  gemv_one_call(&w, gv, 48, 1000, gemv_vec_kt(n), FCO_BF16, 0, 1);
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(t)) {
    gemv_graph(&w, gv, 1);
    /* A growth after a capture keeps the old workspace for the graph (src/transport/
     * gpu_common.h) until the world is destroyed: the count below sees one left behind. */
    size_t ws = 0;
    t_context("world %d: %d ranks, growth after a capture", it, n);
    ASSERT_OK(fco_comm_workspace_bytes(w.comms[0], &ws));
    ASSERT_OK(fco_comm_reserve(w.comms[0], ws + 1));
  }
#endif
  gemv_bufs_free(gv);
  free(gv);

  /* embedding_alltoall: impl 0 and the fused impl 1, the second into symmetric outs */
  for (int impl = 0; impl <= 1; impl++) {
    ea_prob_t p;
    uint64_t seed = t_next_seed();
    ea_sym_mask = impl == 1 ? 1u : 0u;
    ea_prob_make(&p, n, 16, FCO_BF16, FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_SUM, 0, seed);
    ea_describe(&p, impl, seed, "leaks");
    ea_prob_upload(&w, &p);
    ASSERT_OK(ea_prob_run(&w, &p, impl, NULL));
    t_sync(&w);
    for (int r = 0; r < n; r++) ASSERT_OK(fco_comm_get_async_error(w.comms[r]));
    ASSERT_EQ(ea_prob_check(&w, &p), 0);
    ea_prob_free(&w, &p);
    ea_sym_mask = 0;
  }

  /* gemm_alltoall: impl 0, the tiles (impl 1, into a symmetric out on rank 0) and the chunks
   * (impl 2: its push stream, made once a thread and stream) */
  for (int impl = 0; impl <= 2; impl++) {
    ga_case_t c;
    t_context("world %d: %d ranks, gemm_alltoall impl %d", it, n, impl);
    ga_sym_mask = impl == 1 ? 1u : 0u;
    /* rows moved, so impl 2 pushes (an all-zero draw would leave its push path unexercised) */
    ga_make_moving_case(&c, n, 64, 72, impl == 2, FCO_BF16, t_next_seed(), 0, 1);
    ga_run_checked(&w, &c, impl, impl == 0);
    ga_sym_mask = 0;
  }

  t_context("world %d: %d ranks, destroy", it, n);
  t_world_destroy(&w, it % 2);
  ASSERT_EQ(fco_shm_maps(), 0);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  const int max = t_test_max_ranks(t);
  const int devices = t == FCO_TRANSPORT_NCCL ? max : 1;
  ASSERT_EQ(fco_shm_maps(), 0);
  print_counts("before any world", count_now(t, devices));

  int it = 0;
  for (int n = 1; n <= max; n++) one_world(t, n, it++);
  const counts_t base = count_now(t, devices);
  print_counts("after one world of each size", base);

  const int more = 12; /* worlds after the first round: 1..max ranks in turn */
  counts_t now = base;
  for (int k = 0; k < more; k++) {
    one_world(t, 1 + k % max, it++);
    if ((k + 1) % max == 0 || k + 1 == more) {
      char what[64];
      now = count_now(t, devices);
      snprintf(what, sizeof what, "after %d more worlds", k + 1);
      print_counts(what, now);
    }
  }

  t_context("after %d more worlds: file descriptors %d → %d, threads %d → %d", more, base.fds,
            now.fds, base.threads, now.threads);
  ASSERT_LE(now.fds - base.fds, 2);
  ASSERT_LE(now.threads - base.threads, 1);
  if (now.dev_used >= 0) {
    t_context("after %d more worlds: device memory in use %.1f → %.1f MiB", more,
              (double)base.dev_used / (1 << 20), (double)now.dev_used / (1 << 20));
    ASSERT_LE(now.dev_used - base.dev_used, 8ll << 20);
  }
  printf("%d worlds of 1..%d ranks, every operator: nothing left behind\n", it, max);
  return t_pass(t, max, t_test_rank_cap());
}
