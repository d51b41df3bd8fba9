/*
 * test_gemm_alltoall_nccl_faults.c — fco_gemm_alltoall on the nccl transport when the ranks'
 * calls disagree (audit56 F1, F3, F4) or a rank freed a buffer alone (S1). Two GPUs; each case
 * runs in fresh child processes (one per rank, or one for a world driven by one thread) under a
 * deadline, so a hang fails the test instead of stalling the suite.
 *   F1  impl 0 without hints, one rank's device counts bad (a negative entry; a sum over a_rows):
 *       every rank returns FCO_ERR_INVALID_ARGUMENT naming that rank (the peers used to wait in
 *       ncclAllGather forever), writes nothing, and the next good call is exact (the epochs still
 *       agree). One thread for both ranks (fco_comm_init_all, hints), rank 1's counts bad, then a
 *       hint unlike its sender's counts, then rows over out_rows: each group is refused on the
 *       host before any rank's send / recv is queued (audit56 R1); the next call is exact.
 *   F3  rank 0 impl 1, rank 1 impl 2 (and the reverse), good counts: both ranks report
 *       FCO_ERR_INVALID_USAGE well before the timeout (impl 1 used to land impl 2's rows unstored,
 *       without an error), nothing written.
 *   F4  impl 0 with the hints, rank 0's device counts unlike its counts_host: every rank reports
 *       FCO_ERR_INVALID_ARGUMENT and no out is written (rank 1 used to take stale rows silently).
 *   S1  an fco_mem_alloc rank 1 refuses (bytes 0): rank 0 returns FCO_ERR_INVALID_USAGE (it used
 *       to wait in the collective registration forever); then rank 0 frees a symmetric buffer
 *       rank 1 keeps, both allocate another: the same slot on both (until session 57 each took
 *       its own lowest free one), impl 1 into it exact.
 * Inputs are small integers, so every output element is exact in bf16.
 *   FCO_TRANSPORT=nccl build/tests/test_gemm_alltoall_nccl_faults   (exit 77 otherwise)
 */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>

enum { P = 2, E = 2, K = 16, N = 32, A_ROWS = 40, OUT_ROWS = 40 };
#define OUT_BYTES ((size_t)OUT_ROWS * N * 2)

/* Good counts [rank][e][s]: rank 0 sends 18 rows, rank 1 22; rank 0 gets 18, rank 1 22. */
static int32_t good_count(int r, int e, int s) { return 3 + r + 2 * e + s; }

/* Fresh inputs every run (the run's seed, set before the children fork): small integers. */
static unsigned g_mix;
static int a_val(int r, int i, int k) { return (int)((i * 7 + k * 3 + r * 5 + g_mix) % 5) - 2; }
static int w_val(int r, int e, int k, int n) {
  return (int)((e * 11 + k * 5 + n * 3 + r + g_mix / 5) % 5) - 2;
}

typedef struct {
  int32_t counts[P][E * P]; /* host counts (the truth) */
  void *a, *w, *out;
  int32_t* dcounts;
  int dev;
} rank_bufs_t;

static void upload(rank_bufs_t* b, int r) {
  uint16_t* h = (uint16_t*)malloc((size_t)E * K * N * 2 + (size_t)A_ROWS * K * 2);
  ASSERT_EQ(cudaSetDevice(b->dev), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b->a, (size_t)A_ROWS * K * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b->w, (size_t)E * K * N * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b->out, OUT_BYTES + T_GUARD), cudaSuccess);
  ASSERT_EQ(cudaMalloc((void**)&b->dcounts, E * P * 4), cudaSuccess);
  for (int i = 0; i < A_ROWS; i++)
    for (int k = 0; k < K; k++) h[i * K + k] = t_f32_to_bf16((float)a_val(r, i, k));
  ASSERT_EQ(cudaMemcpy(b->a, h, (size_t)A_ROWS * K * 2, cudaMemcpyHostToDevice), cudaSuccess);
  for (int e = 0; e < E; e++)
    for (int k = 0; k < K; k++)
      for (int n = 0; n < N; n++) h[(e * K + k) * N + n] = t_f32_to_bf16((float)w_val(r, e, k, n));
  ASSERT_EQ(cudaMemcpy(b->w, h, (size_t)E * K * N * 2, cudaMemcpyHostToDevice), cudaSuccess);
  free(h);
  for (int q = 0; q < P; q++)
    for (int e = 0; e < E; e++)
      for (int s = 0; s < P; s++) b->counts[q][e * P + s] = good_count(q, e, s);
}

static void put_counts(rank_bufs_t* b, const int32_t* c) {
  ASSERT_EQ(cudaSetDevice(b->dev), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b->dcounts, c, E * P * 4, cudaMemcpyHostToDevice), cudaSuccess);
}

static void poison(rank_bufs_t* b) {
  ASSERT_EQ(cudaSetDevice(b->dev), cudaSuccess);
  ASSERT_EQ(cudaMemset(b->out, T_POISON, OUT_BYTES), cudaSuccess);
  ASSERT_EQ(cudaMemset((char*)b->out + OUT_BYTES, T_GUARD_BYTE, T_GUARD), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

/* Rank s's out: exact (every received row, poison after them) or untouched; the guard kept. */
static void check_out(rank_bufs_t* b, int s, int want_untouched) {
  unsigned char* h = (unsigned char*)malloc(OUT_BYTES + T_GUARD);
  ASSERT_EQ(cudaSetDevice(b->dev), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(h, b->out, OUT_BYTES + T_GUARD, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t row = 0;
  for (int r = 0; r < P && !want_untouched; r++) {
    int arow = 0;
    for (int e = 0; e < E; e++)
      for (int q = 0; q < P; q++)
        for (int i = 0; i < b->counts[r][e * P + q]; i++, arow++) {
          if (q != s) continue;
          for (int n = 0; n < N; n++) {
            int ref = 0;
            for (int k = 0; k < K; k++) ref += a_val(r, arow, k) * w_val(r, e, k, n);
            float got = t_get_elem(FCO_BF16, h, row * N + n);
            if (got != (float)ref)
              t_fail(__FILE__, __LINE__, "rank %d out[%zu][%d] = %g, want %d (from rank %d)", s,
                     row, n, (double)got, ref, r);
          }
          row++;
        }
  }
  for (size_t i = row * N * 2; i < OUT_BYTES; i++)
    if (h[i] != T_POISON)
      t_fail(__FILE__, __LINE__, "rank %d: out byte %zu (past %zu good rows) was written", s, i,
             row);
  for (size_t i = 0; i < T_GUARD; i++) ASSERT_EQ(h[OUT_BYTES + i], T_GUARD_BYTE);
  free(h);
}

/* ---- one process per rank ------------------------------------------------------------------- */
typedef enum {
  F1_NEGATIVE,
  F1_OVER_AROWS,
  F3_TILES_CHUNKS,
  F3_CHUNKS_TILES,
  F4_UNLIKE_HOST,
  S1_SLOT
} mode_t_;
static const char* const kModeName[] = {"F1 negative count", "F1 sum over a_rows",
                                        "F3 impl 1 + impl 2", "F3 impl 2 + impl 1",
                                        "F4 device counts unlike counts_host",
                                        "S1 slot after a one-sided fco_mem_free"};
typedef struct {
  mode_t_ mode;
  int fd[2]; /* rank 0 writes the unique id, rank 1 reads it */
} proc_arg_t;

static fco_comm_t join(int rank, proc_arg_t* pa) {
  fco_comm_t c = t_nccl_join(rank, P, pa->fd, 10000); /* a refusal must come well before it */
  /* one workspace size on both ranks whatever impl each runs (growth is collective) */
  size_t ws = 0;
  ASSERT_OK(fco_gemm_alltoall_workspace(c, A_ROWS, OUT_ROWS, K, N, FCO_BF16, FCO_IMPL_AUTO, &ws));
  ASSERT_OK(fco_comm_reserve(c, ws));
  return c;
}

/* S1: rank 0 frees a symmetric buffer rank 1 keeps, then both allocate another: one slot on both,
 * the lowest free on both (agreed through NCCL; rank 0 used to take the slot it had freed and
 * rank 1 the next, so rank 1's table row of rank 0's out pointed at the freed buffer), every
 * peer mapped in it, and impl 1 with its outs there exact. */
static void slot_case(fco_comm_t c, rank_bufs_t* b, int rank) {
  const size_t bytes = OUT_BYTES + T_GUARD;
  void *x = NULL, *y = NULL, *z = NULL, *table = NULL;
  /* a call rank 1 refuses (bytes 0): rank 0 hears of it in the slot agreement and returns */
  ASSERT_RES(fco_mem_alloc(c, rank == 1 ? 0 : bytes, &x),
             rank == 1 ? FCO_ERR_INVALID_ARGUMENT : FCO_ERR_INVALID_USAGE);
  ASSERT_STR_HAS(fco_last_error(c), rank == 1 ? "bytes is 0" : "another rank refused");
  ASSERT_NULL(x);
  ASSERT_OK(fco_mem_alloc(c, bytes, &x));
  ASSERT_OK(fco_mem_alloc(c, bytes, &y));
  if (rank == 0) ASSERT_OK(fco_mem_free(c, x));
  ASSERT_OK(fco_mem_alloc(c, bytes, &z));
  int ky = -1, kz = -1;
  ASSERT_OK(fco_mem_find(c, y, bytes, &ky, NULL, NULL));
  ASSERT_OK(fco_mem_find(c, z, bytes, &kz, NULL, &table));
  ASSERT_EQ(ky, 1);
  ASSERT_EQ(kz, 2); /* slot 0 is free on rank 0 only */
  void* row[FCO_MAX_GPU_RANKS];
  ASSERT_EQ(cudaMemcpy(row, (void**)table + (size_t)kz * FCO_MAX_GPU_RANKS, sizeof row,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int q = 0; q < P; q++) ASSERT_NOT_NULL(row[q]);
  ASSERT_EQ(cudaFree(b->out), cudaSuccess);
  b->out = z;
  put_counts(b, b->counts[rank]);
  poison(b);
  ASSERT_OK(fco_gemm_alltoall(c, b->a, A_ROWS, b->w, FCO_W_KN, E, b->dcounts, NULL, NULL, b->out,
                              OUT_ROWS, K, N, FCO_BF16, 1, NULL));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_OK(fco_comm_get_async_error(c));
  ASSERT_STR_HAS(fco_last_plan(c), " direct");
  check_out(b, rank, 0);
}

static int proc_rank(int rank, void* arg) {
  proc_arg_t* pa = (proc_arg_t*)arg;
  t_context("%s: rank %d", kModeName[pa->mode], rank);
  fco_comm_t c = join(rank, pa);
  rank_bufs_t b;
  b.dev = rank;
  upload(&b, rank);
  if (pa->mode == S1_SLOT) {
    slot_case(c, &b, rank);
    ASSERT_OK(fco_comm_destroy(c));
    return 0;
  }
  int32_t dc[E * P];
  memcpy(dc, b.counts[rank], sizeof dc);
  const int bad = pa->mode == F1_OVER_AROWS ? 1 : 0; /* whose counts are wrong */
  if (rank == bad && pa->mode == F1_NEGATIVE) dc[1] = -1;
  if (rank == bad && pa->mode == F1_OVER_AROWS) dc[2] = 1000;
  if (rank == bad && pa->mode == F4_UNLIKE_HOST) { /* same sums, other experts: a new digest */
    int32_t x = dc[0];
    dc[0] = dc[2];
    dc[2] = x;
  }
  put_counts(&b, dc);
  poison(&b);
  const int f3 = pa->mode == F3_TILES_CHUNKS || pa->mode == F3_CHUNKS_TILES;
  const int impl = !f3 ? 0 : (rank == 0) == (pa->mode == F3_TILES_CHUNKS) ? 1 : 2;
  const int hints = pa->mode == F4_UNLIKE_HOST;
  int32_t recv[P];
  for (int q = 0; q < P; q++) recv[q] = good_count(q, 0, rank) + good_count(q, 1, rank);
  const double t0 = t_now_ms();
  fco_result_t r = fco_gemm_alltoall(c, b.a, A_ROWS, b.w, FCO_W_KN, E, b.dcounts,
                                     hints ? b.counts[rank] : NULL, hints ? recv : NULL, b.out,
                                     OUT_ROWS, K, N, FCO_BF16, impl, NULL);
  ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const double ms = t_now_ms() - t0;
  if (pa->mode == F1_NEGATIVE || pa->mode == F1_OVER_AROWS) {
    /* refused on the host by every rank, naming the same rank; nothing ran */
    ASSERT_RES(r, FCO_ERR_INVALID_ARGUMENT);
    char want[16];
    snprintf(want, sizeof want, "rank %d", bad);
    if (rank != bad) ASSERT_STR_HAS(fco_last_error(c), want);
    ASSERT_OK(fco_comm_get_async_error(c));
    check_out(&b, rank, 1);
    /* the next call, good counts everywhere: exact (epochs and NCCL still agree) */
    t_context("%s: rank %d, the next call", kModeName[pa->mode], rank);
    put_counts(&b, b.counts[rank]);
    ASSERT_OK(fco_gemm_alltoall(c, b.a, A_ROWS, b.w, FCO_W_KN, E, b.dcounts, NULL, NULL, b.out,
                                OUT_ROWS, K, N, FCO_BF16, 0, NULL));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_OK(fco_comm_get_async_error(c));
    check_out(&b, rank, 0);
  } else {
    /* issued fine, refused on the device by every rank, before the timeout */
    ASSERT_OK(r);
    const fco_result_t want = f3 ? FCO_ERR_INVALID_USAGE : FCO_ERR_INVALID_ARGUMENT;
    ASSERT_RES(fco_comm_get_async_error(c), want);
    printf("rank %d: %s after %.0f ms: %s\n", rank, kModeName[pa->mode], ms, fco_last_error(c));
    ASSERT_LT(ms, 5000);
    check_out(&b, rank, 1);
  }
  ASSERT_OK(fco_comm_destroy(c));
  return 0;
}

/* ---- one thread driving both ranks (fco_comm_init_all) ------------------------------------- */
static int proc_world(int idx, void* arg) {
  (void)idx;
  (void)arg;
  t_context("F1 world: init");
  fco_config_t cfg;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_NCCL;
  cfg.timeout_ms = 10000;
  fco_comm_t c[P];
  ASSERT_OK(fco_comm_init_all(c, P, NULL, &cfg));
  rank_bufs_t b[P];
  int32_t recv[P][P];
  for (int r = 0; r < P; r++) {
    b[r].dev = r;
    upload(&b[r], r);
    for (int q = 0; q < P; q++) recv[r][q] = good_count(q, 0, r) + good_count(q, 1, r);
  }
  /* Rounds 0..2 refused (rank 1's counts; rank 1's hint from rank 0 one row short; rank 1's
   * counts fine but over rank 0's out_rows by its hint and counts alike), each on the world's
   * first good call's connections still unmade, then a good round; every refusal on the host
   * before any rank's send / receive is queued (audit56 R1: a group cancelled mid-way could leave
   * the next call hanging in NCCL). */
  static const char* const what[] = {"rank 1's counts bad", "rank 1's recv_rows_host[0] short",
                                     "rank 0 over out_rows", "good counts"};
  static const char* const want[] = {"rank 1's counts", "recv_rows_host[0]", "more than out_rows",
                                     ""};
  for (int round = 0; round < 4; round++) {
    t_context("F1 world: round %d (%s)", round, what[round]);
    int32_t hint[P][P];
    memcpy(hint, recv, sizeof hint);
    for (int r = 0; r < P; r++) {
      int32_t dc[E * P];
      memcpy(dc, b[r].counts[r], sizeof dc);
      if (r == 1 && round == 0) dc[0] = -1; /* rank 0's send / recv are queued first */
      if (r == 1 && round == 2) {           /* rank 1 sends rank 0 all its A_ROWS rows */
        for (int i = 0; i < E * P; i++) dc[i] = 0;
        dc[0] = A_ROWS;
        hint[0][1] = A_ROWS;
      }
      put_counts(&b[r], dc);
      poison(&b[r]);
    }
    if (round == 1) hint[1][0] -= 1;
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < P; r++) /* the hints: a world driven by one thread needs recv_rows_host */
      (void)fco_gemm_alltoall(c[r], b[r].a, A_ROWS, b[r].w, FCO_W_KN, E, b[r].dcounts, NULL,
                              hint[r], b[r].out, OUT_ROWS, K, N, FCO_BF16, 0, NULL);
    fco_result_t res = fco_group_end();
    for (int r = 0; r < P; r++) {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_OK(fco_comm_get_async_error(c[r]));
    }
    if (round < 3) {
      ASSERT_RES(res, FCO_ERR_INVALID_ARGUMENT);
      for (int r = 0; r < P; r++) ASSERT_STR_HAS(fco_last_error(c[r]), want[round]);
    } else {
      ASSERT_OK(res);
    }
    for (int r = 0; r < P; r++) check_out(&b[r], r, round < 3);
  }
  for (int r = 0; r < P; r++) ASSERT_OK(fco_comm_destroy(c[r]));
  return 0;
}

int main(void) {
  t_seed_init();
  g_mix = (unsigned)(t_next_seed() % 25);
  if (t_transport() != FCO_TRANSPORT_NCCL) t_skip("nccl transport only (FCO_TRANSPORT=nccl)");
  const int gpus = t_fork_gpu_count();
  if (gpus < 2) t_skip("needs two GPUs, found %d", gpus);
  int st[P];
  for (int m = F1_NEGATIVE; m <= S1_SLOT; m++) {
    proc_arg_t pa;
    pa.mode = (mode_t_)m;
    ASSERT_EQ(pipe(pa.fd), 0);
    t_context("%s", kModeName[m]);
    t_fork_run(P, proc_rank, &pa, 60, st);
    close(pa.fd[0]);
    close(pa.fd[1]);
    for (int r = 0; r < P; r++)
      if (st[r] != 0)
        t_fail(__FILE__, __LINE__, "%s: rank %d ended with %d (-1: killed after 60 s: a hang)",
               kModeName[m], r, st[r]);
    printf("%s: ok\n", kModeName[m]);
  }
  t_context("F1 world");
  t_fork_run(1, proc_world, NULL, 60, st);
  if (st[0] != 0)
    t_fail(__FILE__, __LINE__, "F1 world: ended with %d (-1: killed after 60 s: a hang)", st[0]);
  printf("F1 world (one thread, hints): ok\nPASS\n");
  return 0;
}
#else
int main(void) {
  t_skip("built without CUDA");
}
#endif
