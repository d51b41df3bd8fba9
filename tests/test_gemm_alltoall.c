/*
 * test_gemm_alltoall.c — fco_gemm_alltoall (grouped GEMM + combine all-to-all) against a float64
 * host reference: P = 1..4 ranks, E_r = 1..3 experts per rank (different per rank), ragged
 * counts with zero rows for some (expert, source) pairs and whole sources, K and N odd or not a
 * multiple of the tile (1, 17, 100, 136, ...), both weight layouts, f32 / f16 / bf16, impls 0, 1,
 * 2 and AUTO, with and without the host hints; outputs poisoned first and guarded after their
 * capacity (rows past the received total must stay poison). Then calls back to back without a
 * sync, a fixed asymmetric routing (rank 0 → 1 ≠ rank 1 → 0, one direction empty), MiB-sized
 * messages per peer (nccl impl 0: NCCL's SIMPLE protocol, not LL), bad counts
 * (out capacity too small, sum over a_rows, negative) and host hints unlike the counts (also:
 * changed between the call and fco_group_end) that must write nothing, bad arguments, and on
 * the local transport CUDA-graph replays with changing device counts.
 *   make test   or   build/tests/test_gemm_alltoall   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 runs fewer shapes.
 *
 * Error bound per element: |got − ref| ≤ rtol·|ref| + atol·Σ_k |a_k·w_k| with (rtol, atol) =
 * f32 (1e-5, 1e-5), f16 (2e-3, 1e-3), bf16 (1e-2, 4e-3): output rounding (relative) plus fp32
 * accumulation in any order (bounded by the sum of magnitudes), plus half an f16 subnormal step
 * for f16 (results below 2^-14 round absolutely).
 */
#include <math.h>
#include <stdlib.h>

#include "test.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAXP 8
#define MAXE 3

typedef struct {
  int P, E[MAXP];
  int K, N, layout;
  fco_dtype_t dtype;
  int32_t* counts[MAXP];  /* host [E_r][P] */
  int32_t recv[MAXP][MAXP]; /* recv[s][r]: rows s gets from r */
  int64_t a_rows, out_rows;
  float* a[MAXP];         /* host copies, values exactly representable in dtype */
  float* w[MAXP];
} ga_case_t;

typedef struct {
  void *a[MAXP], *w[MAXP], *out[MAXP];
  int32_t* counts[MAXP]; /* device */
  size_t out_bytes[MAXP];
  void* sym[MAXP]; /* fco_mem_alloc'd buffers (g_sym_mask != 0), NULL otherwise */
} ga_bufs_t;

/* Symmetric outputs (fco_mem_alloc): when g_sym_mask != 0 every rank allocates a symmetric
 * buffer (collective) and rank r's out lies in it, 256·(r + 1) bytes in (offsets differ by rank:
 * each header carries its own), iff bit r is set; the others keep an ordinary out. Peers then
 * store straight into the symmetric outs (impls 1 and 2 on the GPU transports). */
static unsigned g_sym_mask;
#define SYM_PAD (256 * (MAXP + 1))

static int dev_of(const t_world_t* w, int r) { return t_rank_device(w->transport, r); }

static double urand(uint64_t* s) {
  *s = t_mix(*s);
  return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}

static void finish_case(ga_case_t* c, uint64_t s, int slack);

/* Counts: ragged, with zero segments; `big` makes some segments span several 128-row tiles. */
static void make_case(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt, uint64_t seed,
                      int big, int slack) {
  memset(c, 0, sizeof *c);
  c->P = P;
  c->K = K;
  c->N = N;
  c->layout = layout;
  c->dtype = dt;
  uint64_t s = seed;
  int zero_src = P > 1 ? (int)(urand(&s) * P) : -1; /* a source nobody gets rows from, at times */
  if (urand(&s) < 0.5) zero_src = -1;
  for (int r = 0; r < P; r++) {
    c->E[r] = 1 + (int)((seed >> (8 * r)) % MAXE);
    c->counts[r] = (int32_t*)calloc((size_t)c->E[r] * P, sizeof(int32_t));
    for (int e = 0; e < c->E[r]; e++)
      for (int q = 0; q < P; q++) {
        double u = urand(&s);
        int v = u < 0.25 ? 0 : (int)(urand(&s) * (big ? 300 : 9));
        if (q == zero_src) v = 0;
        c->counts[r][e * P + q] = v;
      }
  }
  finish_case(c, s, slack);
}

/* recv and the capacities from c->counts (+ slack), then the inputs (values from seed s). */
static void finish_case(ga_case_t* c, uint64_t s, int slack) {
  const int P = c->P, K = c->K, N = c->N;
  const fco_dtype_t dt = c->dtype;
  int64_t max_a = 0, max_out = 0;
  memset(c->recv, 0, sizeof c->recv);
  for (int r = 0; r < P; r++) {
    int64_t sum = 0;
    for (int i = 0; i < c->E[r] * P; i++) {
      sum += c->counts[r][i];
      c->recv[i % P][r] += c->counts[r][i];
    }
    if (sum > max_a) max_a = sum;
  }
  for (int q = 0; q < P; q++) {
    int64_t t = 0;
    for (int r = 0; r < P; r++) t += c->recv[q][r];
    if (t > max_out) max_out = t;
  }
  c->a_rows = max_a + slack;
  c->out_rows = max_out + slack;
  for (int r = 0; r < P; r++) {
    size_t na = (size_t)c->a_rows * K, nw = (size_t)c->E[r] * K * N;
    c->a[r] = (float*)malloc((na + 1) * sizeof(float));
    c->w[r] = (float*)malloc((nw + 1) * sizeof(float));
    char tmp[4];
    for (size_t i = 0; i < na; i++) {
      t_set_elem(dt, tmp, 0, (float)(2 * urand(&s) - 1));
      c->a[r][i] = t_get_elem(dt, tmp, 0);
    }
    for (size_t i = 0; i < nw; i++) {
      t_set_elem(dt, tmp, 0, (float)(2 * urand(&s) - 1));
      c->w[r][i] = t_get_elem(dt, tmp, 0);
    }
  }
}

static void free_case(ga_case_t* c) {
  for (int r = 0; r < c->P; r++) {
    free(c->counts[r]);
    free(c->a[r]);
    free(c->w[r]);
  }
}

static void upload(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b) {
  size_t es = fco_dtype_size(c->dtype);
  memset(b->sym, 0, sizeof b->sym);
  for (int r = 0; r < c->P && g_sym_mask; r++) /* every rank, in rank order: collective */
    ASSERT_OK(fco_mem_alloc(w->comms[r], (size_t)c->out_rows * c->N * es + T_GUARD + SYM_PAD,
                            &b->sym[r]));
  for (int r = 0; r < c->P; r++) {
    int d = dev_of(w, r);
    size_t na = (size_t)c->a_rows * c->K, nw = (size_t)c->E[r] * c->K * c->N;
    b->a[r] = t_alloc(w->transport, d, na * es + T_GUARD);
    b->w[r] = t_alloc(w->transport, d, nw * es + T_GUARD);
    b->out_bytes[r] = (size_t)c->out_rows * c->N * es;
    b->out[r] = (g_sym_mask >> r) & 1 ? (char*)b->sym[r] + 256 * (r + 1)
                                      : t_alloc(w->transport, d, b->out_bytes[r] + T_GUARD);
    b->counts[r] = (int32_t*)t_alloc(w->transport, d, (size_t)c->E[r] * c->P * 4 + 16);
    void* h = malloc((na > nw ? na : nw) * es + 1);
    for (size_t i = 0; i < na; i++) t_set_elem(c->dtype, h, i, c->a[r][i]);
    t_put(w->transport, d, b->a[r], h, na * es);
    for (size_t i = 0; i < nw; i++) t_set_elem(c->dtype, h, i, c->w[r][i]);
    t_put(w->transport, d, b->w[r], h, nw * es);
    free(h);
    t_put(w->transport, d, b->counts[r], c->counts[r], (size_t)c->E[r] * c->P * 4);
  }
}

static void poison(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b) {
  for (int r = 0; r < c->P; r++) {
    t_memset(w->transport, dev_of(w, r), b->out[r], T_POISON, b->out_bytes[r]);
    t_memset(w->transport, dev_of(w, r), (char*)b->out[r] + b->out_bytes[r], T_GUARD_BYTE,
             T_GUARD);
  }
}

static void free_bufs(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b) {
  for (int r = 0; r < c->P; r++) {
    int d = dev_of(w, r);
    t_free(w->transport, d, b->a[r]);
    t_free(w->transport, d, b->w[r]);
    if (!b->sym[r] || (g_sym_mask >> r & 1) == 0) t_free(w->transport, d, b->out[r]);
    t_free(w->transport, d, b->counts[r]);
  }
  for (int r = 0; r < c->P; r++)
    if (b->sym[r]) ASSERT_OK(fco_mem_free(w->comms[r], b->sym[r]));
}

/* Host hints of one call (rank r's counts_host / recv_rows_host), NULL = none. The library
 * reads them when the group executes, so they must stay valid until fco_group_end returns. */
typedef struct {
  const int32_t* counts[MAXP];
  const int32_t* recv[MAXP];
  void (*before_end)(void* arg); /* called after the last submit, before fco_group_end */
  void* arg;
} ga_hints_t;

static fco_result_t issue_hints(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b,
                                int impl, const ga_hints_t* h, void* stream) {
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < c->P; r++) {
    fco_result_t e = fco_gemm_alltoall(w->comms[r], b->a[r], c->a_rows, b->w[r], c->layout,
                                       c->E[r], b->counts[r], h ? h->counts[r] : NULL,
                                       h ? h->recv[r] : NULL, b->out[r], c->out_rows, c->K,
                                       c->N, c->dtype, impl, stream);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  if (h && h->before_end) h->before_end(h->arg);
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}

/* hints: 0 none, 1 counts_host + recv_rows_host (the case's own, right). */
static fco_result_t issue(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b, int impl,
                          int hints, void* stream) {
  ga_hints_t h;
  memset(&h, 0, sizeof h);
  for (int r = 0; r < c->P; r++) {
    h.counts[r] = c->counts[r];
    h.recv[r] = c->recv[r];
  }
  return issue_hints(w, c, b, impl, hints ? &h : NULL, stream);
}

/* floor: half the smallest subnormal step of the dtype (f16 results below 2^-14 are subnormal,
 * where the relative bound alone is too tight). */
static void tolerances(fco_dtype_t dt, double* rtol, double* atol, double* floor_) {
  switch (dt) {
    case FCO_F32: *rtol = 1e-5; *atol = 1e-5; *floor_ = 1e-40; break;
    case FCO_F16: *rtol = 2e-3; *atol = 1e-3; *floor_ = 3.0e-8; break;
    default: *rtol = 1e-2; *atol = 4e-3; *floor_ = 1e-40; break;
  }
}

/* Wrong elements (printed, first few) across every rank; rows past the total must be poison
 * and the guard intact. */
static size_t check(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b) {
  size_t es = fco_dtype_size(c->dtype), N = (size_t)c->N, K = (size_t)c->K, bad = 0;
  double rtol, atol, floor_;
  tolerances(c->dtype, &rtol, &atol, &floor_);
  for (int s = 0; s < c->P; s++) {
    unsigned char* h = (unsigned char*)malloc(b->out_bytes[s] + T_GUARD);
    t_get(w->transport, dev_of(w, s), h, b->out[s], b->out_bytes[s] + T_GUARD);
    size_t row = 0;
    for (int r = 0; r < c->P; r++) {
      int64_t arow = 0; /* row of r's A */
      for (int e = 0; e < c->E[r]; e++)
        for (int q = 0; q < c->P; q++) {
          int cnt = c->counts[r][e * c->P + q];
          if (q != s) {
            arow += cnt;
            continue;
          }
          const float* we = c->w[r] + (size_t)e * K * N;
          for (int i = 0; i < cnt; i++, arow++, row++) {
            const float* ar = c->a[r] + (size_t)arow * K;
            for (size_t n = 0; n < N; n++) {
              double ref = 0, mag = 0;
              for (size_t k = 0; k < K; k++) {
                double x = (double)ar[k] * (c->layout == FCO_W_NK ? we[n * K + k] : we[k * N + n]);
                ref += x;
                mag += fabs(x);
              }
              double got = t_get_elem(c->dtype, h, row * N + n);
              if (fabs(got - ref) <= rtol * fabs(ref) + atol * mag + floor_) continue;
              if (bad++ < 5)
                printf("  rank %d out[%zu][%zu] (from rank %d expert %d row %d) = %.6g, want "
                       "%.6g\n", s, row, n, r, e, i, got, ref);
            }
          }
        }
    }
    for (size_t i = row * N * es; i < b->out_bytes[s]; i++)
      if (h[i] != T_POISON) {
        if (bad++ < 5) printf("  rank %d: byte %zu past the %zu received rows was written\n", s, i, row);
        break;
      }
    for (size_t i = 0; i < T_GUARD; i++)
      if (h[b->out_bytes[s] + i] != T_GUARD_BYTE) {
        if (bad++ < 5) printf("  rank %d: guard byte %zu after out was written\n", s, i);
        break;
      }
    free(h);
  }
  return bad;
}

/* Every output byte still poison, every guard intact. */
static size_t untouched(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b) {
  size_t bad = 0;
  for (int s = 0; s < c->P; s++) {
    unsigned char* h = (unsigned char*)malloc(b->out_bytes[s] + T_GUARD);
    t_get(w->transport, dev_of(w, s), h, b->out[s], b->out_bytes[s] + T_GUARD);
    for (size_t i = 0; i < b->out_bytes[s]; i++) bad += h[i] != T_POISON;
    for (size_t i = 0; i < T_GUARD; i++) bad += h[b->out_bytes[s] + i] != T_GUARD_BYTE;
    free(h);
  }
  return bad;
}

static const fco_dtype_t kDtypes[] = {FCO_F32, FCO_F16, FCO_BF16};
static const int kImpls[] = {0, 1, 2, FCO_IMPL_AUTO};

/* Upload, poison, one call (impl, with or without the hints), sync: no error anywhere and every
 * rank's out equal to the reference; frees the case. */
static void run_checked(const t_world_t* w, ga_case_t* c, int impl, int hints) {
  ga_bufs_t b;
  upload(w, c, &b);
  poison(w, c, &b);
  ASSERT_OK(issue(w, c, &b, impl, hints, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(check(w, c, &b), 0);
  free_bufs(w, c, &b);
  free_case(c);
}

/* A call that must be refused (r: what it returned): FCO_ERR_INVALID_ARGUMENT from the call or,
 * for device-side checks, from some rank's async error, and no byte of any out written. Frees the
 * case and destroys the world's communicators (unusable after a device-side error; destroy must
 * still work). */
static void expect_rejected(t_world_t* w, ga_case_t* c, ga_bufs_t* b, fco_result_t r) {
  t_sync(w);
  for (int q = 0; q < w->n && r == FCO_OK; q++) r = fco_comm_get_async_error(w->comms[q]);
  ASSERT_EQ(r, FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(untouched(w, c, b), 0);
  free_bufs(w, c, b);
  free_case(c);
  for (int q = 0; q < w->n; q++) fco_comm_destroy(w->comms[q]);
}

/* A case with 2 experts per rank and zeroed counts [2][P] for the caller to fill (then
 * finish_case). */
static void two_expert_case(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt) {
  memset(c, 0, sizeof *c);
  c->P = P;
  c->K = K;
  c->N = N;
  c->layout = layout;
  c->dtype = dt;
  for (int r = 0; r < P; r++) {
    c->E[r] = 2;
    c->counts[r] = (int32_t*)calloc((size_t)2 * P, sizeof(int32_t));
  }
}

static void one(const t_world_t* w, int K, int N, int layout, fco_dtype_t dt, int impl, int hints,
                int big) {
  uint64_t seed = t_next_seed();
  t_context("P=%d K=%d N=%d %s %s impl=%d hints=%d big=%d sym=0x%x seed=0x%016llx", w->n, K, N,
            layout ? "W[N,K]" : "W[K,N]", fco_dtype_name(dt), impl, hints, big, g_sym_mask,
            (unsigned long long)seed);
  ga_case_t c;
  make_case(&c, w->n, K, N, layout, dt, seed, big, (int)(seed % 3));
  run_checked(w, &c, impl, hints);
}

/* Calls issued back to back without a sync, with allreduces (fused impl 1) between them:
 * gemm_alltoall impls 1, 2, 0, 1, 2, 0, 1 with different counts, buffers and shapes, so calls
 * alternate workspace halves, mix ops and follow impl 0 (scratch in the workspace, a barrier on
 * nccl) — the workspace rule of src/core/internal.h without any handshake. One sync, then
 * check all. */
#define B2B 7
static void back_to_back(const t_world_t* w) {
  static const int kSeq[B2B] = {1, 2, 0, 1, 2, 0, 1};
  ga_case_t c[B2B];
  ga_bufs_t b[B2B];
  t_ar_bufs_t ar[2];
  uint64_t ar_seed[2];
  size_t ws = 0, x = 0;
  for (int i = 0; i < B2B; i++) {
    make_case(&c[i], w->n, 33 + 8 * i, 24 + i, i % 2, i % 3 == 2 ? FCO_F16 : FCO_BF16,
              t_next_seed(), i == 3, 1 + i % 2);
    upload(w, &c[i], &b[i]);
    poison(w, &c[i], &b[i]);
    ASSERT_OK(fco_gemm_alltoall_workspace(w->comms[0], c[i].a_rows, c[i].out_rows, c[i].K, c[i].N,
                                          c[i].dtype, kSeq[i], &x));
    if (x > ws) ws = x;
  }
  for (int j = 0; j < 2; j++) {
    t_ar_alloc(w, &ar[j], 3000);
    ar_seed[j] = t_next_seed();
    t_ar_prepare(w, &ar[j], 1000 + 1000 * j, FCO_F32, 0, ar_seed[j]);
    ASSERT_OK(fco_allreduce_workspace(w->comms[0], ar[j].count, FCO_F32, 1, &x));
    if (x > ws) ws = x;
  }
  ASSERT_OK(fco_comm_reserve(w->comms[0], ws)); /* no growth between the calls */
  t_context("P=%d back-to-back calls impls 1,AR,2,0,AR,1,2,0,1", w->n);
  for (int i = 0; i < B2B; i++) {
    ASSERT_OK(issue(w, &c[i], &b[i], kSeq[i], 1, NULL));
    if (i == 0 || i == 2) ASSERT_OK(t_ar_run(w, &ar[i / 2], 1));
  }
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  for (int i = 0; i < B2B; i++) {
    t_context("P=%d back-to-back call %d (impl %d)", w->n, i, kSeq[i]);
    ASSERT_EQ(check(w, &c[i], &b[i]), 0);
    free_bufs(w, &c[i], &b[i]);
    free_case(&c[i]);
  }
  for (int j = 0; j < 2; j++) {
    t_context("P=%d back-to-back allreduce %d", w->n, j);
    ASSERT_EQ(t_ar_check(w, &ar[j], ar_seed[j]), 0);
    t_ar_free(w, &ar[j]);
  }
}

/* Outputs in symmetric buffers (fco_mem_alloc): every rank's, rank 0's only, every rank's but
 * rank 0's — peers store straight into a symmetric out and stage for the others, in one call —
 * for the fused impls and AUTO; with FCO_GA_DIRECT=0 (staging despite symmetric outs); then calls
 * back to back (halves alternate, other ops between) with every out symmetric. */
static void sym_outputs(const t_world_t* w) {
  const unsigned all = (1u << w->n) - 1, masks[3] = {all, 1u, all & ~1u};
  static const int impls[] = {1, 2, FCO_IMPL_AUTO};
  for (int m = 0; m < 3; m++) {
    if (!masks[m] || (m > 0 && masks[m] == all)) continue;
    g_sym_mask = masks[m];
    for (int i = 0; i < 3; i++) {
      t_context("P=%d symmetric outs mask 0x%x impl %d", w->n, g_sym_mask, impls[i]);
      one(w, 40, 24, i % 2, i == 1 ? FCO_F16 : FCO_BF16, impls[i], 1, 1);
    }
    one(w, 64, 136, 1, FCO_F32, 1, 0, 0);
  }
  g_sym_mask = all;
  setenv("FCO_GA_DIRECT", "0", 1);
  one(w, 40, 24, 0, FCO_BF16, 1, 1, 1);
  one(w, 17, 136, 1, FCO_F16, 2, 1, 1);
  unsetenv("FCO_GA_DIRECT");
  back_to_back(w);
  g_sym_mask = 0;
}

/* Bad counts on a fresh world: the call fails (cpu, or host-side checks) or reports
 * FCO_ERR_INVALID_ARGUMENT asynchronously (device-side checks); nothing is written. */
static void bad_counts(fco_transport_t t, int P, int kind, int impl) {
  static const char* kinds[] = {"out_rows too small", "counts sum over a_rows", "negative count"};
  t_world_t w;
  t_context("P=%d bad counts: %s, impl %d", P, kinds[kind], impl);
  ASSERT_OK(t_world_init(&w, t, P, NULL));
  ga_case_t c;
  ga_bufs_t b;
  make_case(&c, P, 20, 12, 0, FCO_F32, t_next_seed(), 0, 10);
  c.counts[0][0] += 5; /* at least one row, so the capacities can be too small (fits the slack) */
  /* Capacities that fit exactly, then one broken. */
  int64_t max_a = 0, max_out = 0;
  int64_t recv[MAXP] = {0};
  for (int r = 0; r < P; r++) {
    int64_t sum = 0;
    for (int i = 0; i < c.E[r] * P; i++) {
      sum += c.counts[r][i];
      recv[i % P] += c.counts[r][i];
    }
    if (sum > max_a) max_a = sum;
  }
  for (int q = 0; q < P; q++)
    if (recv[q] > max_out) max_out = recv[q];
  c.a_rows = max_a;
  c.out_rows = kind == 0 ? max_out - 1 : max_out;
  if (kind == 1) c.a_rows = max_a - 1;
  if (kind == 2) c.counts[P - 1][0] = -3;
  upload(&w, &c, &b);
  poison(&w, &c, &b);
  expect_rejected(&w, &c, &b, issue(&w, &c, &b, impl, 0, NULL));
}

/* Asymmetric routing, fixed counts: rank 0 sends rank 1 42 rows (experts 0, 1: 37 + 5); rank 1
 * sends rank 0 none (variant 0) or 13 (variant 1), so what a pair of ranks sends each other
 * differs, one direction may be empty, and every rank gets a different total. Every impl; with
 * the hints (impl 0 on nccl sizes its ncclSend / ncclRecv from them) and without. */
static void asymmetric(const t_world_t* w) {
  const int P = w->n;
  if (P < 2) return;
  for (int variant = 0; variant < 2; variant++)
    for (int i = 0; i < 4; i++)
      for (int hints = 1; hints >= 0; hints--) {
        if (!hints && t_transport() == FCO_TRANSPORT_NCCL && kImpls[i] == 0) continue;
        ga_case_t c;
        two_expert_case(&c, P, 24, 40, variant, FCO_BF16);
        for (int r = 0; r < P; r++)
          for (int e = 0; e < 2; e++)
            for (int s = 0; s < P; s++)
              c.counts[r][e * P + s] = r == 0 && s == 1   ? (e ? 5 : 37)
                                       : r == 1 && s == 0 ? (variant && !e ? 13 : 0)
                                                          : (r + 2 * s + e) % 4;
        finish_case(&c, t_next_seed(), 1);
        t_context("P=%d asymmetric routing %d (0→1: %d rows, 1→0: %d), impl %d, hints %d", P,
                  variant, c.recv[1][0], c.recv[0][1], kImpls[i], hints);
        run_checked(w, &c, kImpls[i], hints);
      }
}

/* Messages of MiBs per peer (every earlier case sends KiBs): on nccl impl 0's ncclSend/Recv
 * then use NCCL's SIMPLE protocol, whose zero-copy path needs the send and receive buffers
 * registered alike on both sides (LL, below tens of KiB, never registers). Sending from the
 * registered workspace into the caller's unregistered out hung there (fco-bench, moe_layer.py)
 * while every smaller case passed. Fixed counts, a different number per (rank, expert, source). */
static void large(const t_world_t* w) {
  const int P = w->n;
  static const int kIdx[] = {0, 2, 3}; /* impls 0, 2 and AUTO (1 on GPUs: K ≤ 2048), with the hints */
  for (int ii = 0; ii < 3; ii++) {
    const int i = kIdx[ii];
    ga_case_t c;
    two_expert_case(&c, P, 16, 1024, FCO_W_NK, FCO_BF16);
    for (int r = 0; r < P; r++)
      for (int e = 0; e < 2; e++)
        for (int s = 0; s < P; s++) c.counts[r][e * P + s] = 1000 + 37 * e + 11 * s + 5 * r;
    finish_case(&c, t_next_seed(), 3);
    t_context("P=%d large messages (%d rows 0→%d, %.1f MiB), impl %d", P, c.recv[P - 1][0],
              P - 1, c.recv[P - 1][0] * (double)c.N * 2 / (1 << 20), kImpls[i]);
    run_checked(w, &c, kImpls[i], 1);
  }
}

/* The hint arrays of bad_hints kind 2: rewritten between the submits and fco_group_end, as a
 * caller's stack array that went out of scope would be (fco-bench did that). */
typedef struct {
  int32_t recv[MAXP][MAXP];
  int32_t counts[MAXP][MAXE * MAXP];
} ga_hint_copy_t;

static void clobber_hints(void* arg) {
  ga_hint_copy_t* h = (ga_hint_copy_t*)arg;
  int32_t t = h->recv[0][0]; /* rank 0: rows from ranks 0 and 1 swapped (same total) */
  h->recv[0][0] = h->recv[0][1];
  h->recv[0][1] = t;
}

/* Hints that disagree with the counts, on a fresh world: kind 0 recv_rows_host (rank 0 expects
 * one row less from rank 1 and one more from itself), kind 1 counts_host (rank 1's first two
 * entries swapped: same totals), kind 2 recv_rows_host rewritten after the submits, before
 * fco_group_end. Checked where the truth is at hand (cpu: every kind; local impl 0: recv on the
 * host, counts_host by the digest; local impl 2: counts_host): FCO_ERR_INVALID_ARGUMENT, nothing
 * written. nccl cannot check recv_rows_host without an exchange: not run there. */
static void bad_hints(fco_transport_t t, int P, int kind, int impl) {
  static const char* kinds[] = {"recv_rows_host off by one", "counts_host unlike counts",
                                "recv_rows_host rewritten before fco_group_end"};
  t_world_t w;
  t_context("P=%d bad hints: %s, impl %d", P, kinds[kind], impl);
  ASSERT_OK(t_world_init(&w, t, P, NULL));
  ga_case_t c;
  ga_bufs_t b;
  two_expert_case(&c, P, 20, 12, 0, FCO_F32);
  for (int r = 0; r < P; r++)
    for (int i = 0; i < 2 * P; i++) c.counts[r][i] = 2 + (r + 3 * i) % 5;
  /* Rank 1's first two entries differ (swapping them changes counts_host), and rank 0 gets a
   * different number of rows from rank 1 (13) than from itself (5): swapping those is wrong. */
  c.counts[1][0] = 9;
  finish_case(&c, t_next_seed(), 4);
  ga_hint_copy_t hc;
  ga_hints_t h;
  memset(&h, 0, sizeof h);
  for (int r = 0; r < P; r++) {
    memcpy(hc.recv[r], c.recv[r], sizeof hc.recv[r]);
    memcpy(hc.counts[r], c.counts[r], (size_t)c.E[r] * P * sizeof(int32_t));
    h.recv[r] = hc.recv[r];
    h.counts[r] = hc.counts[r];
  }
  if (kind == 0) {
    hc.recv[0][1] -= 1;
    hc.recv[0][0] += 1;
  } else if (kind == 1) {
    hc.counts[1][0] = c.counts[1][1];
    hc.counts[1][1] = c.counts[1][0];
  } else {
    h.before_end = clobber_hints;
    h.arg = &hc;
  }
  upload(&w, &c, &b);
  poison(&w, &c, &b);
  expect_rejected(&w, &c, &b, issue_hints(&w, &c, &b, impl, &h, NULL));
}

/* One rank, impl 0, counts_host unlike the device counts (the two experts' sizes swapped, same
 * total): at P = 1 impl 0's GEMMs write out directly (the all-to-all is the identity), so the
 * device-side digest check cannot hold them back. It must still report
 * FCO_ERR_INVALID_ARGUMENT, and nothing may be written past the rows the hints size (the
 * slack rows of out and the guard after it stay as poisoned). GPU transports. */
static void one_rank_hint_unlike_counts(fco_transport_t t) {
  t_world_t w;
  t_context("P=1 impl 0: counts_host unlike counts");
  ASSERT_OK(t_world_init(&w, t, 1, NULL));
  ga_case_t c;
  ga_bufs_t b;
  two_expert_case(&c, 1, 20, 12, 0, FCO_F32);
  c.counts[0][0] = 3;
  c.counts[0][1] = 5;
  finish_case(&c, t_next_seed(), 4);
  int32_t hcounts[2] = {5, 3}, hrecv[1] = {8};
  ga_hints_t h;
  memset(&h, 0, sizeof h);
  h.counts[0] = hcounts;
  h.recv[0] = hrecv;
  upload(&w, &c, &b);
  poison(&w, &c, &b);
  fco_result_t r = issue_hints(&w, &c, &b, 0, &h, NULL);
  t_sync(&w);
  if (r == FCO_OK) r = fco_comm_get_async_error(w.comms[0]);
  ASSERT_EQ(r, FCO_ERR_INVALID_ARGUMENT);
  const size_t used = (size_t)8 * c.N * sizeof(float);
  ASSERT_EQ(c.out_rows, 12);
  unsigned char* o = (unsigned char*)malloc(b.out_bytes[0] + T_GUARD);
  t_get(w.transport, dev_of(&w, 0), o, b.out[0], b.out_bytes[0] + T_GUARD);
  size_t bad = 0;
  for (size_t i = used; i < b.out_bytes[0]; i++) bad += o[i] != T_POISON;
  for (size_t i = 0; i < T_GUARD; i++) bad += o[b.out_bytes[0] + i] != T_GUARD_BYTE;
  free(o);
  ASSERT_EQ(bad, 0);
  free_bufs(&w, &c, &b);
  free_case(&c);
  fco_comm_destroy(w.comms[0]);
}

/* Rank r's fco_last_plan begins "gemm_alltoall impl <want> " (what AUTO resolved to). */
static void expect_auto_ran(const t_world_t* w, int r, int want) {
  char expect[64];
  snprintf(expect, sizeof expect, "gemm_alltoall impl %d ", want);
  const char* plan = fco_last_plan(w->comms[r]);
  if (strncmp(plan, expect, strlen(expect)) != 0)
    t_fail(__FILE__, __LINE__, "rank %d: AUTO ran \"%s\", expected \"%s...\"", r, plan, expect);
}

/* One rank, AUTO (GPU transports): tiles (impl 1) in bf16 / f16 with k, n multiples of 8 where
 * every expert has ≤ 256 rows — by counts_host when given, else by the mean of a_rows — else
 * impl 0 (src/ops/gemm_alltoall.c). Read from fco_last_plan; every call must succeed. */
static void one_rank_auto_rule(fco_transport_t t) {
  t_world_t w;
  t_context("P=1 AUTO rule");
  ASSERT_OK(t_world_init(&w, t, 1, NULL));
  enum { K = 64, N = 64, E = 2, ROWS = 2 * 256 + 8, OUT = 2 * 256 };
  const int d = dev_of(&w, 0);
  void* a = t_alloc(t, d, (size_t)ROWS * K * 2);
  void* wt = t_alloc(t, d, (size_t)E * K * N * 2);
  void* dc = t_alloc(t, d, E * sizeof(int32_t));
  void* out = t_alloc(t, d, (size_t)OUT * N * 4);
  t_memset(t, d, a, 0, (size_t)ROWS * K * 2);
  t_memset(t, d, wt, 0, (size_t)E * K * N * 2);
  const struct {
    int64_t a_rows;
    int32_t counts[E];
    int hint;
    fco_dtype_t dt;
    int want;
  } cases[] = {
      {7, {3, 4}, 0, FCO_BF16, 1},       /* mean 3.5 rows per expert */
      {512, {3, 4}, 0, FCO_F16, 1},      /* mean 256 */
      {514, {3, 4}, 0, FCO_BF16, 0},     /* mean 257 */
      {514, {3, 4}, 1, FCO_BF16, 1},     /* the hint: at most 4 */
      {514, {256, 256}, 1, FCO_F16, 1},  /* at most 256 */
      {290, {3, 257}, 1, FCO_BF16, 0},   /* one expert over 256 (skew), mean 145 */
      {7, {3, 4}, 1, FCO_F32, 0},        /* no tensor-core tile in f32 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int32_t* c = cases[i].counts;
    int32_t recv[1] = {c[0] + c[1]};
    t_context("P=1 AUTO rule: a_rows %lld counts %d,%d hint %d %s", (long long)cases[i].a_rows,
              c[0], c[1], cases[i].hint, fco_dtype_name(cases[i].dt));
    t_put(t, d, dc, c, E * sizeof(int32_t));
    ASSERT_OK(fco_gemm_alltoall(w.comms[0], a, cases[i].a_rows, wt, FCO_W_KN, E,
                                (const int32_t*)dc, cases[i].hint ? c : NULL,
                                cases[i].hint ? recv : NULL, out, OUT, K, N, cases[i].dt,
                                FCO_IMPL_AUTO, NULL));
    t_sync(&w);
    ASSERT_OK(fco_comm_get_async_error(w.comms[0]));
    expect_auto_ran(&w, 0, cases[i].want);
  }
  t_free(t, d, a);
  t_free(t, d, wt);
  t_free(t, d, dc);
  t_free(t, d, out);
  fco_comm_destroy(w.comms[0]);
}

/* Several ranks, AUTO (GPU transports): tiles (impl 1) where K ≤ 2048, except on local above
 * two ranks where a_rows > 2048 (then impl 0; src/ops/gemm_alltoall.c). a_rows 2048 and 2049
 * (the capacity, from the slack), K 64, bf16, with the hints; checked against the reference
 * and read from every rank's fco_last_plan. */
static void multi_rank_auto_rule(const t_world_t* w) {
  const int P = w->n;
  for (int big = 0; big < 2; big++) {
    ga_case_t c;
    two_expert_case(&c, P, 64, 64, FCO_W_KN, FCO_BF16);
    for (int r = 0; r < P; r++)
      for (int i = 0; i < 2 * P; i++) c.counts[r][i] = 1 + (r + 2 * i) % 4;
    int64_t most = 0;
    for (int r = 0; r < P; r++) {
      int64_t sum = 0;
      for (int i = 0; i < 2 * P; i++) sum += c.counts[r][i];
      if (sum > most) most = sum;
    }
    finish_case(&c, t_next_seed(), (int)(2048 + big - most));
    const int want = w->transport == FCO_TRANSPORT_LOCAL && P > 2 && big ? 0 : 1;
    t_context("P=%d AUTO rule: a_rows %lld, expect impl %d", P, (long long)c.a_rows, want);
    ga_bufs_t b;
    upload(w, &c, &b);
    poison(w, &c, &b);
    ASSERT_OK(issue(w, &c, &b, FCO_IMPL_AUTO, 1, NULL));
    t_sync(w);
    for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_EQ(check(w, &c, &b), 0);
    for (int r = 0; r < P; r++) expect_auto_ran(w, r, want);
    free_bufs(w, &c, &b);
    free_case(&c);
  }
}

static void bad_args(const t_world_t* w) {
  fco_comm_t c = w->comms[0];
  int32_t dummy[16] = {0};
  void* p = t_alloc(w->transport, dev_of(w, 0), 4096);
  t_context("bad arguments");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 0, dummy, NULL, NULL, p, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "num_experts");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 2, 1, dummy, NULL, NULL, p, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "w_layout");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 1, NULL, NULL, NULL, p, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "counts");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 1, dummy, NULL, NULL, p, 1, 0, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "k");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 1, dummy, NULL, NULL, p, 1, 4, 4, FCO_F32, 7, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "impl");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 1, dummy, NULL, NULL, p, 1, 4, 4, (fco_dtype_t)9, 1,
                               NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "dtype");
  int32_t neg[8] = {-1, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, p, 0, 1, dummy, neg, NULL, (char*)p + 2048, 8, 4, 4,
                               FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "counts_host");
  size_t ws = 0;
  ASSERT_OK(fco_gemm_alltoall_workspace(c, 100, 100, 64, 64, FCO_BF16, FCO_IMPL_AUTO, &ws));
  ASSERT_GE(ws, (size_t)100 * 64 * 2);
  /* impl 0 at one rank writes out directly: no workspace on GPUs (cpu: every impl is the
   * reference, sized as impl 1) */
  ASSERT_OK(fco_gemm_alltoall_workspace(c, 100, 100, 64, 64, FCO_BF16, 0, &ws));
  if (w->transport == FCO_TRANSPORT_CPU) ASSERT_GE(ws, (size_t)100 * 64 * 2);
  else ASSERT_EQ(ws, (size_t)0);
  ASSERT_STR_EQ(fco_gemm_alltoall_impl_name(c, 1), "tiles");
  ASSERT_STR_EQ(fco_gemm_alltoall_impl_name(c, 2), "chunks");
  ASSERT_NULL(fco_gemm_alltoall_impl_name(c, 3));
  t_free(w->transport, dev_of(w, 0), p);
}

#ifdef FCO_HAVE_CUDA
/* Local transport: capture one call (impl 1, no hints), replay it with new counts and inputs
 * written into the same device buffers, check every replay. */
static void graph_replay(const t_world_t* w) {
  cudaStream_t st;
  ASSERT_EQ(cudaSetDevice(dev_of(w, 0)), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  ga_case_t c;
  ga_bufs_t b;
  /* Slack 72 ≥ the most rows the replays' counts (each < 7, E ≤ 3, P ≤ 4) can need. */
  make_case(&c, w->n, 72, 40, 1, FCO_BF16, t_next_seed(), 0, 72);
  upload(w, &c, &b);
  size_t ws = 0;
  ASSERT_OK(fco_gemm_alltoall_workspace(w->comms[0], c.a_rows, c.out_rows, c.K, c.N, c.dtype, 1,
                                        &ws));
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_reserve(w->comms[r], ws));
  t_context("P=%d graph capture", w->n);
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r = issue(w, &c, &b, 1, 0, st);
  cudaGraph_t g = NULL;
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_OK(r);
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int it = 0; it < 3; it++) {
    t_context("P=%d graph replay %d", w->n, it);
    /* New counts (same E per rank) that fit the captured capacities. */
    uint64_t s = t_next_seed();
    memset(c.recv, 0, sizeof c.recv);
    for (int q = 0; q < w->n; q++) {
      for (int i = 0; i < c.E[q] * w->n; i++) {
        s = t_mix(s);
        c.counts[q][i] = (int32_t)(s % 7);
      }
      int64_t sum = 0;
      for (int i = 0; i < c.E[q] * w->n; i++) sum += c.counts[q][i];
      if (sum > c.a_rows) memset(c.counts[q], 0, (size_t)c.E[q] * w->n * 4);
      for (int i = 0; i < c.E[q] * w->n; i++) c.recv[i % w->n][q] += c.counts[q][i];
      t_put(w->transport, dev_of(w, q), b.counts[q], c.counts[q], (size_t)c.E[q] * w->n * 4);
    }
    poison(w, &c, &b);
    ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    for (int q = 0; q < w->n; q++) ASSERT_OK(fco_comm_get_async_error(w->comms[q]));
    ASSERT_EQ(check(w, &c, &b), 0);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  free_bufs(w, &c, &b);
  free_case(&c);
}

/* New A values (same shape, same buffers): a replay must compute with them. */
static void refill_a(const t_world_t* w, ga_case_t* c, ga_bufs_t* b, uint64_t seed) {
  size_t es = fco_dtype_size(c->dtype);
  for (int r = 0; r < c->P; r++) {
    size_t na = (size_t)c->a_rows * c->K;
    void* h = malloc(na * es + 1);
    char tmp[4];
    for (size_t i = 0; i < na; i++) {
      seed = t_mix(seed);
      t_set_elem(c->dtype, tmp, 0, (float)((double)(seed >> 11) * (2.0 / 9007199254740992.0) - 1));
      c->a[r][i] = t_get_elem(c->dtype, tmp, 0);
      t_set_elem(c->dtype, h, i, c->a[r][i]);
    }
    t_put(w->transport, dev_of(w, r), b->a[r], h, na * es);
    free(h);
  }
}

/* Local transport, impls 0 and 2 (GEMM sizes from counts_host): capture without counts_host is
 * refused up front (FCO_ERR_INVALID_USAGE, nothing captured, the capture ends cleanly); with the
 * hints, replays with new inputs are right; a replay with other device counts reports
 * FCO_ERR_INVALID_ARGUMENT (the digest) and writes nothing. Own world: the last step leaves an
 * asynchronous error behind. */
static void graph_hinted(fco_transport_t t, int P, int impl) {
  t_world_t w;
  t_context("P=%d graph impl %d: init", P, impl);
  ASSERT_OK(t_world_init(&w, t, P, NULL));
  cudaStream_t st;
  ASSERT_EQ(cudaSetDevice(dev_of(&w, 0)), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  ga_case_t c;
  ga_bufs_t b;
  make_case(&c, P, 72, 40, 1, FCO_BF16, t_next_seed(), 1, 8);
  upload(&w, &c, &b);
  size_t ws = 0;
  ASSERT_OK(fco_gemm_alltoall_workspace(w.comms[0], c.a_rows, c.out_rows, c.K, c.N, c.dtype, impl,
                                        &ws));
  ASSERT_OK(fco_comm_reserve(w.comms[0], ws));
  t_context("P=%d graph impl %d: capture without counts_host is refused", P, impl);
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r = issue(&w, &c, &b, impl, 0, st);
  cudaGraph_t g = NULL;
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_EQ(r, FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(w.comms[0], "counts_host");
  if (g) cudaGraphDestroy(g);
  t_context("P=%d graph impl %d: capture with hints", P, impl);
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  r = issue(&w, &c, &b, impl, 1, st);
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_OK(r);
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int it = 0; it < 2; it++) {
    t_context("P=%d graph impl %d: replay %d, new inputs", P, impl, it);
    refill_a(&w, &c, &b, t_next_seed());
    poison(&w, &c, &b);
    ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    for (int q = 0; q < P; q++) ASSERT_OK(fco_comm_get_async_error(w.comms[q]));
    ASSERT_EQ(check(&w, &c, &b), 0);
  }
  t_context("P=%d graph impl %d: replay with other device counts", P, impl);
  c.counts[0][0] += c.counts[0][0] > 0 ? -1 : 1; /* still fits the capacities (slack 8) */
  t_put(w.transport, dev_of(&w, 0), b.counts[0], c.counts[0], (size_t)c.E[0] * P * 4);
  poison(&w, &c, &b);
  ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  expect_rejected(&w, &c, &b, FCO_OK);
}
#endif

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = getenv("FCO_TEST_QUICK") && atoi(getenv("FCO_TEST_QUICK")) > 0;
  int max = t_test_max_ranks(t) < MAXP ? t_test_max_ranks(t) : MAXP;
  static const int kShapes[][2] = {{1, 1},   {17, 17}, {100, 33}, {64, 136},
                                   {136, 64}, {3, 100}, {33, 300}};
  int nshapes = quick ? 3 : 7;
  for (int p = 1; p <= max; p++) {
    t_world_t w;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    if (p == 1) bad_args(&w);
    int k = 0;
    for (int sh = 0; sh < nshapes; sh++)
      for (int d = 0; d < 3; d++)
        for (int i = 0; i < 4; i++, k++) {
          int hints = (k % 3) != 0;
          /* impl 0 on a nccl world driven by one thread needs the host hints */
          if (t == FCO_TRANSPORT_NCCL && kImpls[i] == 0) hints = 1;
          one(&w, kShapes[sh][0], kShapes[sh][1], k % 2, kDtypes[d], kImpls[i], hints, 0);
        }
    /* Segments spanning several 128-row tiles, every impl. */
    for (int i = 0; i < 4; i++)
      one(&w, 40, 24, i % 2, i < 2 ? FCO_BF16 : FCO_F16, kImpls[i], 1, 1);
    if (!quick) one(&w, 256, 256, 0, FCO_BF16, 1, 0, 1);
    /* impl 2 with small chunks (experts split into 128-row GEMMs, groups, several pushes) and
     * few push blocks; read per call. */
    setenv("FCO_GA_CHUNK_ROWS", "100", 1);
    setenv("FCO_GA_PUSH_BLOCKS", "3", 1);
    one(&w, 40, 24, 0, FCO_BF16, 2, 1, 1);
    one(&w, 17, 136, 1, FCO_F16, 2, 0, 1);
    /* impl 2's early landing (FCO_GA_LAND_EARLY=1): with small chunks each push is followed by
     * a progress kernel and a land kernel; ordinary outs, then outs symmetric on some ranks
     * only (those land nothing early), then calls back to back (halves alternate, the
     * progress flags of one call never read in the next). */
    setenv("FCO_GA_LAND_EARLY", "1", 1);
    one(&w, 40, 24, 0, FCO_BF16, 2, 1, 1);
    one(&w, 17, 136, 1, FCO_F32, 2, 1, 1);
    if (p > 1) {
      g_sym_mask = 1u; /* rank 0's out symmetric: its peers store into it, it lands nothing */
      one(&w, 40, 24, 1, FCO_F16, 2, 1, 1);
      g_sym_mask = 0;
    }
    back_to_back(&w);
    unsetenv("FCO_GA_LAND_EARLY");
    unsetenv("FCO_GA_CHUNK_ROWS");
    unsetenv("FCO_GA_PUSH_BLOCKS");
    /* impl 1's asynchronous epilogue (FCO_GA_EPI=async: the TMA tile drains C with bulk copies
     * while the next tile computes; read per call, the same path elsewhere): 16-byte rows
     * (N 24, 136, 256) in both layouts and dtypes, several tiles per block and segments
     * spanning tiles, then calls back to back with other ops. */
    setenv("FCO_GA_EPI", "async", 1);
    for (int i = 0; i < 4; i++)
      one(&w, i < 2 ? 64 : 40, i < 2 ? 136 : 24, i % 2, i % 3 ? FCO_BF16 : FCO_F16, 1, i & 1, 1);
    one(&w, 256, 256, 1, FCO_BF16, 1, 0, 1);
    setenv("FCO_GA_TILES_BLOCKS", "3", 1); /* many tiles per block: flags raised one tile late */
    one(&w, 64, 136, 0, FCO_BF16, 1, 0, 1);
    one(&w, 256, 256, 1, FCO_F16, 1, 1, 1);
    unsetenv("FCO_GA_TILES_BLOCKS");
    back_to_back(&w);
    unsetenv("FCO_GA_EPI");
    back_to_back(&w);
    sym_outputs(&w);
    asymmetric(&w);
    large(&w);
    if (t != FCO_TRANSPORT_CPU && p > 1) multi_rank_auto_rule(&w);
#ifdef FCO_HAVE_CUDA
    if (t == FCO_TRANSPORT_LOCAL) graph_replay(&w);
#endif
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
    fflush(stdout);
  }
  /* Bad counts: every kind, the device-checked impls (cpu: the reference). */
  int pb = max < 2 ? max : 2;
  for (int kind = 0; kind < 3; kind++) {
    bad_counts(t, pb, kind, 1);
    if (t != FCO_TRANSPORT_CPU) bad_counts(t, pb, kind, 2);
    if (t == FCO_TRANSPORT_LOCAL) bad_counts(t, pb, kind, 0);
  }
  if (t != FCO_TRANSPORT_CPU) {
    one_rank_hint_unlike_counts(t);
    one_rank_auto_rule(t);
  }
  printf("bad counts: ok\n");
  /* Hints unlike the counts (the nccl bench's hang: recv_rows_host read after it changed). */
  if (pb >= 2 && t != FCO_TRANSPORT_NCCL) {
    for (int kind = 0; kind < 3; kind++) {
      bad_hints(t, pb, kind, t == FCO_TRANSPORT_CPU ? 1 : 0);
      if (t == FCO_TRANSPORT_LOCAL && kind == 1) bad_hints(t, pb, kind, 2);
    }
    printf("bad hints: ok\n");
  }
#ifdef FCO_HAVE_CUDA
  if (t == FCO_TRANSPORT_LOCAL) {
    graph_hinted(t, max, 2);
    graph_hinted(t, max, 0);
    printf("graphs with hints (impls 2, 0): ok\n");
  }
#endif
  const int cap = t_test_rank_cap() < MAXP ? t_test_rank_cap() : MAXP;
  if (max < cap)
    printf("ranks %d..%d not run: transport %s has %d here\n", max + 1, cap,
           fco_transport_name(t), max);
  printf("PASS\n");
  return 0;
}
