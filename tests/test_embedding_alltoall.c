/*
 * test_embedding_alltoall.c — fco_embedding_alltoall equals the pooled lookup + all_to_all_single
 * + permute it replaces: P = 1..4 ranks with uneven tables per rank (some ranks own none) and
 * uneven batch splits (some ranks own no sample), D ∈ {1, 3, 64, 130}, f32 / f16 / bf16, int32
 * and int64 indices, with and without per-sample weights, sum and mean, ragged bags (empty ones
 * included), impl 0, 1 and AUTO; then calls issued back to back on one world (fresh shapes and
 * inputs each), a CUDA-graph replay (local transport), bad data (an index outside its table,
 * decreasing offsets, offsets past num_indices: FCO_ERR_INVALID_ARGUMENT naming the table and
 * position, with the bad entries skipped and nothing written past out) and bad arguments.
 *   make test   or   build/tests/test_embedding_alltoall   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 runs fewer combinations.
 *
 * Exactness: table values are small integers and weights multiples of 1/2, so every bag sum is
 * exact in fp32 and the one rounding to the dtype is the same everywhere: outputs are compared
 * bit for bit with a reference computed here (fp32, bag order, fmaf for weights, one division
 * for mean). A second pass uses random real values and compares with a float64 reference by
 * relative error (f32 1e-5, f16 2e-3, bf16 1e-2).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_P 8

typedef struct {
  int P;
  int32_t tpr[MAX_P];
  int64_t bpr[MAX_P];
  int64_t D, T, B;
  fco_dtype_t dt;
  fco_emb_index_t it;
  int weighted, real;
  fco_emb_pooling_t pool;
  /* host data per rank */
  int64_t* rows[MAX_P];
  int64_t total_rows[MAX_P];
  float* weight[MAX_P]; /* values as stored (already rounded to dt) */
  int64_t* offsets[MAX_P];
  int64_t* indices[MAX_P];
  int64_t nnz[MAX_P];
  float* psw[MAX_P];
  /* rank buffers (device on GPU transports) */
  void *d_weight[MAX_P], *d_offsets[MAX_P], *d_indices[MAX_P], *d_psw[MAX_P], *d_out[MAX_P];
  size_t out_bytes[MAX_P];
  size_t shift[MAX_P]; /* d_weight and d_out lie this many bytes past their allocations */
  void* d_sym[MAX_P];  /* fco_mem_alloc'd buffers (g_sym_mask != 0), NULL otherwise */
} prob_t;

/* Symmetric outputs (fco_mem_alloc): when g_sym_mask != 0 every rank allocates a symmetric
 * buffer (collective, the same bytes: the largest out) and rank r's out lies in it, 256·(r + 1)
 * bytes in (offsets differ: each rank announces its own), iff bit r is set; the others keep an
 * ordinary out. Peers then store straight into the symmetric outs (the fused lean kernel). */
static unsigned g_sym_mask;

/* Bytes by which prob_upload shifts rank g_shift_rank's weight and out off 16-byte alignment
 * (0: none; ranks < 0: every rank). */
static size_t g_shift;
static int g_shift_rank = -1;

static uint64_t g_rng;
static uint64_t rnd(void) { return g_rng = t_mix(g_rng); }
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }
static float rnd_real(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

static float round_to(fco_dtype_t dt, float v) {
  char b[4];
  t_set_elem(dt, b, 0, v);
  return t_get_elem(dt, b, 0);
}

static int64_t toff(const prob_t* p, int r) {
  int64_t s = 0;
  for (int q = 0; q < r; q++) s += p->tpr[q];
  return s;
}
static int64_t boff(const prob_t* p, int r) {
  int64_t s = 0;
  for (int q = 0; q < r; q++) s += p->bpr[q];
  return s;
}

/* A random problem: T_r ∈ [0, 3] (T ≥ 1), b_s ∈ [0, 6] (B ≥ 1), rows ∈ [1, 40], bags of 0..6.
 * prob_make_n with bmax > 0, a big one: T_r ∈ [2, 3], b_s ∈ [bmax/2, bmax]; prob_make_shape:
 * the given T_r and b_s (T ≥ 1, B ≥ 1). */
static void prob_make_shape(prob_t* p, int P, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                            int weighted, fco_emb_pooling_t pool, int real, uint64_t seed,
                            int64_t bmax, const int32_t* tpr, const int64_t* bpr) {
  memset(p, 0, sizeof *p);
  g_rng = seed;
  p->P = P;
  p->D = D;
  p->dt = dt;
  p->it = it;
  p->weighted = weighted;
  p->pool = pool;
  p->real = real;
  do {
    p->T = p->B = 0;
    for (int r = 0; r < P; r++) {
      p->tpr[r] = tpr ? tpr[r] : (int32_t)rnd_in(bmax ? 2 : 0, 3);
      p->bpr[r] = bpr ? bpr[r] : bmax ? rnd_in(bmax / 2, bmax) : rnd_in(0, 6);
      p->T += p->tpr[r];
      p->B += p->bpr[r];
    }
  } while (p->T < 1 || p->B < 1);
  for (int r = 0; r < P; r++) {
    int Tr = p->tpr[r];
    p->rows[r] = (int64_t*)calloc((size_t)Tr + 1, sizeof(int64_t));
    for (int t = 0; t < Tr; t++) p->total_rows[r] += p->rows[r][t] = rnd_in(1, 40);
    size_t nw = (size_t)p->total_rows[r] * (size_t)D;
    p->weight[r] = (float*)malloc((nw + 1) * sizeof(float));
    for (size_t i = 0; i < nw; i++)
      p->weight[r][i] = round_to(dt, real ? rnd_real() : (float)rnd_in(-4, 4));
    size_t nb = (size_t)Tr * (size_t)p->B;
    p->offsets[r] = (int64_t*)malloc((nb + 1) * sizeof(int64_t));
    int64_t* len = (int64_t*)malloc((nb + 1) * sizeof(int64_t));
    int64_t nnz = 0;
    for (size_t k = 0; k < nb; k++) {
      len[k] = rnd() % 4 == 0 ? 0 : rnd_in(1, 6); /* a quarter of the bags are empty */
      p->offsets[r][k] = nnz;
      nnz += len[k];
    }
    p->offsets[r][nb] = nnz;
    p->nnz[r] = nnz;
    p->indices[r] = (int64_t*)malloc(((size_t)nnz + 1) * sizeof(int64_t));
    p->psw[r] = (float*)malloc(((size_t)nnz + 1) * sizeof(float));
    for (size_t k = 0; k < nb; k++) {
      int t = (int)(k / (size_t)p->B);
      for (int64_t j = p->offsets[r][k]; j < p->offsets[r][k + 1]; j++) {
        p->indices[r][j] = rnd_in(0, p->rows[r][t] - 1);
        p->psw[r][j] = real ? rnd_real() : (float)rnd_in(-4, 4) * 0.5f;
      }
    }
    free(len);
  }
}
static void prob_make_n(prob_t* p, int P, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                        int weighted, fco_emb_pooling_t pool, int real, uint64_t seed,
                        int64_t bmax) {
  prob_make_shape(p, P, D, dt, it, weighted, pool, real, seed, bmax, NULL, NULL);
}
static void prob_make(prob_t* p, int P, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                      int weighted, fco_emb_pooling_t pool, int real, uint64_t seed) {
  prob_make_n(p, P, D, dt, it, weighted, pool, real, seed, 0);
}

static void prob_free(const t_world_t* w, prob_t* p) {
  for (int r = 0; r < p->P; r++) {
    int d = t_rank_device(w->transport, r);
    free(p->rows[r]);
    free(p->weight[r]);
    free(p->offsets[r]);
    free(p->indices[r]);
    free(p->psw[r]);
    t_free(w->transport, d, p->d_weight[r] ? (char*)p->d_weight[r] - p->shift[r] : NULL);
    t_free(w->transport, d, p->d_offsets[r]);
    t_free(w->transport, d, p->d_indices[r]);
    t_free(w->transport, d, p->d_psw[r]);
    if (!p->d_sym[r] || (g_sym_mask >> r & 1) == 0)
      t_free(w->transport, d, p->d_out[r] ? (char*)p->d_out[r] - p->shift[r] : NULL);
  }
  for (int r = 0; r < p->P; r++)
    if (p->d_sym[r]) ASSERT_OK(fco_mem_free(w->comms[r], p->d_sym[r]));
  memset(p, 0, sizeof *p);
}

/* Upload rank r's inputs (converted to dt / index type) and poison its out + guard. */
static void upload_inputs(const t_world_t* w, prob_t* p, int r) {
  int d = t_rank_device(w->transport, r);
  size_t es = fco_dtype_size(p->dt), is = p->it == FCO_EMB_INDEX_I64 ? 8 : 4;
  size_t nw = (size_t)p->total_rows[r] * (size_t)p->D;
  char* h = (char*)malloc(nw * es + 16);
  for (size_t i = 0; i < nw; i++) t_set_elem(p->dt, h, i, p->weight[r][i]);
  if (nw) t_put(w->transport, d, p->d_weight[r], h, nw * es);
  free(h);
  size_t no = (size_t)p->tpr[r] * (size_t)p->B + 1;
  size_t ni = (size_t)p->nnz[r];
  char* hi = (char*)malloc((no > ni ? no : ni) * is + 16);
  for (size_t i = 0; i < no; i++) {
    if (is == 8) ((int64_t*)hi)[i] = p->offsets[r][i];
    else ((int32_t*)hi)[i] = (int32_t)p->offsets[r][i];
  }
  if (p->tpr[r]) t_put(w->transport, d, p->d_offsets[r], hi, no * is);
  for (size_t i = 0; i < ni; i++) {
    if (is == 8) ((int64_t*)hi)[i] = p->indices[r][i];
    else ((int32_t*)hi)[i] = (int32_t)p->indices[r][i];
  }
  if (ni) t_put(w->transport, d, p->d_indices[r], hi, ni * is);
  free(hi);
  if (ni && p->d_psw[r]) t_put(w->transport, d, p->d_psw[r], p->psw[r], ni * sizeof(float));
}

static void poison_out(const t_world_t* w, prob_t* p, int r) {
  int d = t_rank_device(w->transport, r);
  unsigned char* h = (unsigned char*)malloc(p->out_bytes[r] + T_GUARD);
  memset(h, T_POISON, p->out_bytes[r]);
  memset(h + p->out_bytes[r], T_GUARD_BYTE, T_GUARD);
  t_put(w->transport, d, p->d_out[r], h, p->out_bytes[r] + T_GUARD);
  free(h);
}

static void prob_upload(const t_world_t* w, prob_t* p) {
  size_t es = fco_dtype_size(p->dt), is = p->it == FCO_EMB_INDEX_I64 ? 8 : 4;
  memset(p->d_sym, 0, sizeof p->d_sym);
  if (g_sym_mask) {
    size_t most = 0;
    for (int r = 0; r < p->P; r++) {
      size_t ob = (size_t)p->bpr[r] * (size_t)p->T * (size_t)p->D * es;
      if (ob > most) most = ob;
    }
    for (int r = 0; r < p->P; r++) /* every rank, in rank order: collective */
      ASSERT_OK(fco_mem_alloc(w->comms[r], most + T_GUARD + 256 * (MAX_P + 1) + 64, &p->d_sym[r]));
  }
  for (int r = 0; r < p->P; r++) {
    int d = t_rank_device(w->transport, r);
    size_t nw = (size_t)p->total_rows[r] * (size_t)p->D;
    size_t no = (size_t)p->tpr[r] * (size_t)p->B + 1;
    size_t ni = (size_t)p->nnz[r];
    p->shift[r] = g_shift_rank < 0 || g_shift_rank == r ? g_shift : 0;
    p->d_weight[r] = nw ? (char*)t_alloc(w->transport, d, nw * es + p->shift[r]) + p->shift[r] : NULL;
    p->d_offsets[r] = p->tpr[r] ? t_alloc(w->transport, d, no * is) : NULL;
    p->d_indices[r] = ni ? t_alloc(w->transport, d, ni * is) : NULL;
    p->d_psw[r] = ni && p->weighted ? t_alloc(w->transport, d, ni * sizeof(float)) : NULL;
    p->out_bytes[r] = (size_t)p->bpr[r] * (size_t)p->T * (size_t)p->D * es;
    p->d_out[r] = (g_sym_mask >> r & 1 ? (char*)p->d_sym[r] + 256 * (r + 1)
                                        : (char*)t_alloc(w->transport, d, p->out_bytes[r] + T_GUARD +
                                                                          p->shift[r])) +
                  p->shift[r];
    upload_inputs(w, p, r);
    poison_out(w, p, r);
  }
}

static fco_result_t call_rank(const t_world_t* w, const prob_t* p, int r, int impl, void* stream) {
  return fco_embedding_alltoall(w->comms[r], p->d_weight[r], p->rows[r], p->tpr, p->bpr, p->D,
                                p->dt, p->d_offsets[r], p->d_indices[r], p->nnz[r], p->it,
                                p->weighted ? (const float*)p->d_psw[r] : NULL, p->pool,
                                p->bpr[r] ? p->d_out[r] : NULL, impl, stream);
}

/* Every rank's call in one group; the first failure. */
static fco_result_t prob_run(const t_world_t* w, const prob_t* p, int impl, void* stream) {
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < p->P; r++) {
    fco_result_t e = call_rank(w, p, r, impl, stream);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}

/* Expected out element (sample i of rank s, global table tg, column d): exact mode gives the
 * fp32 value the library must produce; *ref / *mag the float64 sum and Σ|terms| (real mode). */
static float expect(const prob_t* p, int s, int64_t i, int64_t tg, int64_t d, double* ref,
                    double* mag) {
  int r = 0;
  while (tg >= toff(p, r) + p->tpr[r]) r++;
  int t = (int)(tg - toff(p, r));
  int64_t k = (int64_t)t * p->B + boff(p, s) + i, base = 0;
  for (int q = 0; q < t; q++) base += p->rows[r][q];
  int64_t lo = p->offsets[r][k], hi = p->offsets[r][k + 1];
  float acc = 0.0f;
  *ref = *mag = 0.0;
  if (lo < 0 || hi < lo || hi > p->nnz[r]) return round_to(p->dt, 0.0f); /* bad bag: empty */
  for (int64_t j = lo; j < hi; j++) {
    int64_t idx = p->indices[r][j];
    if (idx < 0 || idx >= p->rows[r][t]) continue; /* bad index: skipped */
    float x = p->weight[r][(size_t)(base + idx) * (size_t)p->D + (size_t)d];
    if (p->weighted) {
      acc = fmaf(p->psw[r][j], x, acc);
      *ref += (double)p->psw[r][j] * x;
      *mag += fabs((double)p->psw[r][j] * x);
    } else {
      acc += x;
      *ref += x;
      *mag += fabs((double)x);
    }
  }
  if (p->pool == FCO_EMB_POOL_MEAN && hi > lo) {
    acc = acc / (float)(hi - lo);
    *ref /= (double)(hi - lo);
    *mag /= (double)(hi - lo);
  }
  return round_to(p->dt, acc);
}

/* Compare every rank's out (and its guard) with the reference; returns wrong elements. */
static size_t prob_check(const t_world_t* w, const prob_t* p) {
  size_t wrong = 0, es = fco_dtype_size(p->dt);
  double tol = p->dt == FCO_F32 ? 1e-5 : p->dt == FCO_F16 ? 2e-3 : 1e-2;
  for (int s = 0; s < p->P; s++) {
    int dv = t_rank_device(w->transport, s);
    unsigned char* h = (unsigned char*)malloc(p->out_bytes[s] + T_GUARD);
    t_get(w->transport, dv, h, p->d_out[s], p->out_bytes[s] + T_GUARD);
    size_t bad = 0;
    for (int64_t i = 0; i < p->bpr[s]; i++)
      for (int64_t tg = 0; tg < p->T; tg++)
        for (int64_t d = 0; d < p->D; d++) {
          size_t e = ((size_t)i * (size_t)p->T + (size_t)tg) * (size_t)p->D + (size_t)d;
          double ref, mag;
          float want = expect(p, s, i, tg, d, &ref, &mag), got = t_get_elem(p->dt, h, e);
          int ok = p->real ? fabs((double)got - ref) <= tol * mag + 1e-6 : got == want;
          if (ok) continue;
          if (bad++ < 5)
            fprintf(stderr, "  rank %d out[%lld][%lld][%lld] = %g, want %g (float64 %g)\n", s,
                    (long long)i, (long long)tg, (long long)d, (double)got, (double)want, ref);
        }
    for (size_t g = 0; g < T_GUARD; g++)
      if (h[p->out_bytes[s] + g] != T_GUARD_BYTE && bad++ < 5)
        fprintf(stderr, "  rank %d wrote 0x%02x %zu bytes past out\n", s, h[p->out_bytes[s] + g], g);
    (void)es;
    if (bad) fprintf(stderr, "  rank %d: %zu wrong\n", s, bad);
    wrong += bad;
    free(h);
  }
  return wrong;
}

static void describe(const prob_t* p, int impl, uint64_t seed, const char* what) {
  char splits[256];
  size_t n = 0;
  for (int r = 0; r < p->P && n < sizeof splits - 32; r++)
    n += (size_t)snprintf(splits + n, sizeof splits - n, "%s%d/%lld", r ? "," : "", p->tpr[r],
                          (long long)p->bpr[r]);
  t_context("%s P=%d T_r/b_s=%s D=%lld %s %s %s %s %s impl=%d seed=0x%016llx", what, p->P, splits,
            (long long)p->D, fco_dtype_name(p->dt), p->it == FCO_EMB_INDEX_I64 ? "i64" : "i32",
            p->weighted ? "weighted" : "unweighted", p->pool == FCO_EMB_POOL_MEAN ? "mean" : "sum",
            p->real ? "real" : "integer", impl, (unsigned long long)seed);
}

static const int kImpls[] = {0, 1, FCO_IMPL_AUTO};
static const int64_t kDims[] = {1, 3, 64, 130};
static const fco_dtype_t kDtypes[] = {FCO_F32, FCO_F16, FCO_BF16};

static void shape_call(const t_world_t* w, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                       int weighted, fco_emb_pooling_t pool, int real, int impl, int64_t bmax,
                       const int32_t* tpr, const int64_t* bpr, const char* what) {
  prob_t p;
  uint64_t seed = t_next_seed();
  prob_make_shape(&p, w->n, D, dt, it, weighted, pool, real, seed, bmax, tpr, bpr);
  describe(&p, impl, seed, what ? what : bmax ? "sweep (big)" : "sweep");
  prob_upload(w, &p);
  ASSERT_OK(prob_run(w, &p, impl, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(prob_check(w, &p), 0);
  prob_free(w, &p);
}
static void one_call(const t_world_t* w, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                     int weighted, fco_emb_pooling_t pool, int real, int impl, int64_t bmax) {
  shape_call(w, D, dt, it, weighted, pool, real, impl, bmax, NULL, NULL, NULL);
}

/* (index type, weights, pooling) combinations, pairwise covering all of them. */
static const struct {
  fco_emb_index_t it;
  int weighted;
  fco_emb_pooling_t pool;
} kCombos[] = {{FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM},
               {FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_SUM},
               {FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_MEAN},
               {FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_MEAN}};

static void sweep(const t_world_t* w, int quick) {
  for (int di = 0; di < 4; di++)
    for (int ti = 0; ti < 3; ti++)
      for (int ii = 0; ii < 3; ii++)
        for (int c = 0; c < 4; c++) {
          if (quick && (c + di + ti + ii) % 2) continue;
          one_call(w, kDims[di], kDtypes[ti], kCombos[c].it, kCombos[c].weighted,
                   kCombos[c].pool, 0, kImpls[ii], 0);
        }
  /* The lean kernels (the default where rows are whole 16-byte units of ≤ 512 bytes: impl 0's
   * lookup, impl 1's ea_kernel_fused_lean) and the previous kernels' streaming lookup
   * (FCO_EA_LEAN=0 FCO_EA_STREAM=1: pool_tile_stream in both impls), at their lane groups'
   * edges: one lane a row (f16 D = 8), a group with an idle lane (bf16 D = 24: 3 units, 4 lanes),
   * 512-byte rows (f32 D = 128, one group a warp); and on GPUs a big problem (many warp tiles). */
  const int64_t bbig = t_is_gpu(w->transport) ? 12288 / w->n : 0;
  for (int sv = 0; sv < 2; sv++) {
    if (sv) {
      setenv("FCO_EA_LEAN", "0", 1);
      setenv("FCO_EA_STREAM", "1", 1);
    }
    for (int ii = 0; ii < 2; ii++) {
      t_context(sv ? "FCO_EA_LEAN=0 FCO_EA_STREAM=1" : "lean (default)");
      one_call(w, 8, FCO_F16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, kImpls[ii], 0);
      one_call(w, 24, FCO_BF16, FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_MEAN, 0, kImpls[ii], 0);
      one_call(w, 128, FCO_F32, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_MEAN, 0, kImpls[ii], 0);
      if (bbig) one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_SUM, 0, kImpls[ii], bbig);
    }
  }
  unsetenv("FCO_EA_LEAN");
  unsetenv("FCO_EA_STREAM");
  /* Weights and out off 16-byte alignment (by one element): on rank 0 only (the fused lean
   * kernel pools that rank by lean_tile_any, the others by lean_tile, one protocol), then on every
   * rank; impl 0 takes the previous lookup's element path there. */
  for (int ii = 0; ii < 2; ii++) {
    g_shift_rank = 0;
    g_shift = 2;
    one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_MEAN, 0, kImpls[ii], bbig);
    g_shift_rank = -1;
    g_shift = 4;
    one_call(w, 32, FCO_F32, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, kImpls[ii], 0);
    g_shift = 0;
  }
  /* Warp tiles of several tables (FCO_EA_LEAN_TABLES) with rank 0's pointers off alignment: its
   * tiles pooled table by table by lean_tile_any, the others' by the multi-table lean_tile. */
  setenv("FCO_EA_LEAN_TABLES", "4", 1);
  g_shift_rank = 0;
  g_shift = 2;
  one_call(w, 16, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_MEAN, 0, 1, bbig);
  g_shift = 0;
  g_shift_rank = -1;
  unsetenv("FCO_EA_LEAN_TABLES");
  /* The fused lean kernel compiled for 4 blocks a SM (the default is 3). */
  setenv("FCO_EA_LEAN_BLOCKS", "4", 1);
  one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, 1, bbig);
  one_call(w, 16, FCO_F32, FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_MEAN, 0, 1, 0);
  unsetenv("FCO_EA_LEAN_BLOCKS");
  /* Random real values against float64, by relative error. */
  for (int ti = 0; ti < 3; ti++)
    for (int ii = 0; ii < 2; ii++)
      one_call(w, 64, kDtypes[ti], FCO_EMB_INDEX_I64, ti != 1, ti == 2 ? FCO_EMB_POOL_MEAN : FCO_EMB_POOL_SUM,
               1, kImpls[ii], 0);
}

/* The fused kernel's launch knobs (read at every launch, src/cuda/embedding_alltoall.cu): every
 * non-default setting must give the same exact result (only the default runs in the sweep).
 * FCO_EA_MIX reorders each block's pool tiles: on GPUs it runs on big problems, where blocks
 * have several remote and local tiles to interleave (and signal batches that span local tiles):
 * rows of ≥ 500 B (32 bags a tile) and b_s up to 24576/P (nccl: a rank per GPU, 264 blocks on
 * an H200) or 12288/P (local: 264/P blocks per virtual rank), T_r ∈ [2, 3], give about 5.5
 * (P = 2) to 11 (P = 4, local) pool tiles per block. The 16-byte path with kB = 4 (f32 D = 128,
 * bf16 D = 256) and the element path with kNV = 4 (f32 D = 125). */
static void knobs(const t_world_t* w) {
  static const struct {
    const char *name, *value, *name2, *value2; /* name2: a second knob set with it, or NULL */
    int64_t D;                                 /* 0: 64 or 3 on a small problem; else big */
    fco_dtype_t dt;
  } kKnobs[] = {
      /* the lean fused kernel (the others run with FCO_EA_LEAN=0: the previous kernels' knobs) */
      {"FCO_EA_LEAN", "1", "FCO_EA_LAND_KB", "4", 64, FCO_BF16},
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_BLOCKS", "4", 128, FCO_F32},
      /* 4 blocks a SM, aligned one-rank calls: the kernels specialized to the index type (kIdx),
       * both orders; consecutive entries take int32 and int64 indices (kCombos) */
      {"FCO_EA_LEAN_BLOCKS", "4", NULL, NULL, 64, FCO_BF16},
      {"FCO_EA_LEAN_BLOCKS", "4", NULL, NULL, 64, FCO_BF16},
      {"FCO_EA_LEAN_BLOCKS", "4", "FCO_EA_LEAN_DYN", "0", 64, FCO_BF16},
      {"FCO_EA_LEAN_BLOCKS", "4", "FCO_EA_LEAN_DYN", "0", 64, FCO_BF16},
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_MIX", "100", 64, FCO_BF16},
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_MIX", "37", 128, FCO_F32},
      /* the tile-size rule at its ends (FCO_EA_LEAN_CHUNKS): the smallest tiles, and the largest
       * (up to FCO_EA_LEAN_MAX_TILE_BAGS bags, the most staged offsets), both orders */
      {"FCO_EA_LEAN_CHUNKS", "1", NULL, NULL, 64, FCO_BF16},
      {"FCO_EA_LEAN_CHUNKS", "64", NULL, NULL, 128, FCO_F32},
      {"FCO_EA_LEAN_CHUNKS", "64", "FCO_EA_LEAN_DYN", "0", 16, FCO_BF16},
      /* warp tiles of several tables (experimental): 32-byte rows (16 lane groups a warp) and
       * 256-byte rows (2 groups: nt ≤ 2) */
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_TABLES", "4", 16, FCO_BF16},
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_TABLES", "2", 64, FCO_F32},
      /* claimed tiles (kernel variant kDyn; the default where bags hold ≤ 16 rows on average,
       * as here): calls in a row, so the queues' counters carry older epochs (the first claims
       * lift them); remote first on half the SMs, on none, on all; its timeline variant; the
       * static order (FCO_EA_LEAN_DYN=0) and its timeline variant */
      {"FCO_EA_LEAN_DYN", "1", "FCO_EA_LEAN_SPLIT", "50", 64, FCO_BF16},
      {"FCO_EA_LEAN_DYN", "1", "FCO_EA_LEAN_SPLIT", "0", 128, FCO_F32},
      {"FCO_EA_LEAN_DYN", "1", "FCO_EA_LEAN_SPLIT", "100", 16, FCO_BF16},
      {"FCO_EA_LEAN_DYN", "1", "FCO_EA_PROFILE", "1", 64, FCO_BF16},
      {"FCO_EA_LEAN_DYN", "0", NULL, NULL, 64, FCO_BF16},
      {"FCO_EA_LEAN_DYN", "0", "FCO_EA_PROFILE", "1", 128, FCO_F32},
      /* the timeline variants (stamps to stderr) must pool as the kernels without them */
      {"FCO_EA_LEAN", "1", "FCO_EA_PROFILE", "1", 64, FCO_BF16},
      {"FCO_EA_PROFILE", "1", NULL, NULL, 128, FCO_F32},
      {"FCO_EA_LAND_POLL", "1", NULL, NULL, 0, FCO_BF16},
      {"FCO_EA_SIGNAL_EVERY", "1", NULL, NULL, 0, FCO_BF16},
      {"FCO_EA_SIGNAL_EVERY", "16", NULL, NULL, 0, FCO_F32},
      {"FCO_EA_LAND_KB", "4", NULL, NULL, 0, FCO_BF16},
      /* the kB paths (16-byte rows take the streaming path unless FCO_EA_STREAM=0) */
      {"FCO_EA_BAGS", "1", "FCO_EA_STREAM", "0", 0, FCO_BF16},
      {"FCO_EA_BAGS", "4", "FCO_EA_STREAM", "0", 0, FCO_F32},
      {"FCO_EA_STREAM", "0", NULL, NULL, 128, FCO_F32},
      {"FCO_EA_STREAM", "0", "FCO_EA_DECODE", "cursor", 64, FCO_BF16},
      {"FCO_EA_STREAM", "1", NULL, NULL, 256, FCO_BF16},
      {"FCO_EA_STREAM", "1", "FCO_EA_MIX", "100", 32, FCO_F32},
      /* rows > 256 B run the old kernel by default: the cursor kernel asked for by name */
      {"FCO_EA_MIX", "100", "FCO_EA_DECODE", "cursor", 128, FCO_F32},
      {"FCO_EA_MIX", "37", NULL, NULL, 125, FCO_F32},
      {"FCO_EA_MIX", "0", "FCO_EA_DECODE", "1", 256, FCO_BF16},
      {"FCO_EA_MIX", "100", "FCO_EA_LAND_POLL", "1", 125, FCO_F32},
      {"FCO_EA_DECODE", "old", NULL, NULL, 128, FCO_F32},
      {"FCO_EA_DECODE", "old", NULL, NULL, 256, FCO_BF16},
      {"FCO_EA_DECODE", "old", "FCO_EA_MIX", "100", 125, FCO_F32}};
  const int64_t bmax =
      t_is_gpu(w->transport) ? (w->transport == FCO_TRANSPORT_LOCAL ? 12288 : 24576) / w->n : 0;
  for (size_t k = 0; k < sizeof kKnobs / sizeof kKnobs[0]; k++) {
    /* FCO_EA_LEAN_* knobs are the lean kernel's: it runs; the others are the previous kernels' */
    setenv("FCO_EA_LEAN", strncmp(kKnobs[k].name, "FCO_EA_LEAN_", 12) == 0 ? "1" : "0", 1);
    const int64_t D = kKnobs[k].D > 0 ? kKnobs[k].D : k % 2 ? 64 : 3;
    const int64_t b = kKnobs[k].D > 0 ? bmax : 0;
    t_context("knob %s=%s%s%s%s%s", kKnobs[k].name, kKnobs[k].value, kKnobs[k].name2 ? " " : "",
              kKnobs[k].name2 ? kKnobs[k].name2 : "", kKnobs[k].name2 ? "=" : "",
              kKnobs[k].name2 ? kKnobs[k].value2 : "");
    setenv(kKnobs[k].name, kKnobs[k].value, 1);
    if (kKnobs[k].name2) setenv(kKnobs[k].name2, kKnobs[k].value2, 1);
    one_call(w, D, kKnobs[k].dt, kCombos[k % 4].it, kCombos[k % 4].weighted, kCombos[k % 4].pool,
             0, 1, b);
    unsetenv(kKnobs[k].name);
    if (kKnobs[k].name2) unsetenv(kKnobs[k].name2);
  }
  unsetenv("FCO_EA_LEAN");
}

/* The fused kernel's two forms, ea_kernel_fused32 (the default: the 32-bit tile cursor) and
 * ea_kernel_fused (FCO_EA_DECODE=old; also the launcher's fallback beyond the cursor's 32-bit
 * bounds), on ragged shapes, exact: a rank without tables (no pool tiles, lands only), a
 * destination without samples (a position of zero chunks the cursor steps over), T_r = 5 (f32 D =
 * 128: one table a tile, so a block's step bpr = bq · 5 + br carries in tg; bf16 D = 64: 4 tables
 * a tile, the last group of 1), and on GPUs b_s up to 24576/P (nccl) or 12288/P (local) so blocks
 * step across destinations. Both kernels, and kMix with the cursor. On cpu the knob does nothing:
 * small shapes. */
static void decode_edges(const t_world_t* w) {
  const int P = w->n;
  const int64_t bmax =
      t_is_gpu(w->transport) ? (w->transport == FCO_TRANSPORT_LOCAL ? 12288 : 24576) / P : 6;
  int32_t tpr[MAX_P];
  int64_t bpr[MAX_P];
  for (int r = 0; r < P; r++) {
    tpr[r] = r == 0 && P > 1 ? 0 : r % 2 ? 1 : 5;
    bpr[r] = r == 1 ? 0 : bmax - 7 * r > 1 ? bmax - 7 * r : 1;
  }
  if (P == 2) bpr[0] += bmax / 3; /* unequal: rank 1 has none */
  static const struct {
    const char *name, *value, *name2, *value2;
    int64_t D;
    fco_dtype_t dt;
  } kRuns[] = {{"FCO_EA_LEAN", "1", NULL, NULL, 128, FCO_F32}, /* the lean kernel: ragged too */
               {"FCO_EA_LEAN", "1", NULL, NULL, 64, FCO_BF16},
               {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_MIX", "50", 64, FCO_BF16},
               {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_TABLES", "4", 16, FCO_BF16}, /* 5 tables: 4 + 1 */
               {"FCO_EA_LEAN_DYN", "1", "FCO_EA_LEAN_SPLIT", "50", 64, FCO_BF16},
               {"FCO_EA_LEAN_DYN", "0", NULL, NULL, 64, FCO_BF16},
               {"FCO_EA_DECODE", "cursor", NULL, NULL, 128, FCO_F32}, /* > 256 B: not default */
               {NULL, NULL, NULL, NULL, 64, FCO_BF16},
               {NULL, NULL, NULL, NULL, 3, FCO_F32},
               {"FCO_EA_MIX", "100", "FCO_EA_DECODE", "cursor", 128, FCO_F32},
               {"FCO_EA_MIX", "50", NULL, NULL, 64, FCO_BF16},
               {"FCO_EA_DECODE", "old", NULL, NULL, 128, FCO_F32},
               {"FCO_EA_DECODE", "old", NULL, NULL, 64, FCO_BF16},
               {"FCO_EA_DECODE", "old", "FCO_EA_MIX", "50", 3, FCO_F32}};
  for (size_t k = 0; k < sizeof kRuns / sizeof kRuns[0]; k++) {
    char what[128];
    snprintf(what, sizeof what, "decode edges (%s%s%s%s%s%s)",
             kRuns[k].name ? kRuns[k].name : "default", kRuns[k].name ? "=" : "",
             kRuns[k].value ? kRuns[k].value : "", kRuns[k].name2 ? " " : "",
             kRuns[k].name2 ? kRuns[k].name2 : "", kRuns[k].name2 ? "=" : "");
    if (kRuns[k].name2) strncat(what, kRuns[k].value2, sizeof what - strlen(what) - 1);
    /* the previous kernels, unless the run names the lean one or one of its knobs */
    setenv("FCO_EA_LEAN", kRuns[k].name && strncmp(kRuns[k].name, "FCO_EA_LEAN_", 12) == 0 ? "1" : "0", 1);
    if (kRuns[k].name) setenv(kRuns[k].name, kRuns[k].value, 1);
    if (kRuns[k].name2) setenv(kRuns[k].name2, kRuns[k].value2, 1);
    shape_call(w, kRuns[k].D, kRuns[k].dt, kCombos[k % 4].it, kCombos[k % 4].weighted,
               kCombos[k % 4].pool, 0, 1, bmax, tpr, bpr, what);
    if (kRuns[k].name) unsetenv(kRuns[k].name);
    if (kRuns[k].name2) unsetenv(kRuns[k].name2);
  }
  unsetenv("FCO_EA_LEAN");
}

/* K calls issued back to back (no synchronisation between), each with its own shape, inputs and
 * outputs, then every output checked: epochs, workspace halves, growth between calls. */
static void back_to_back(const t_world_t* w) {
  enum { K = 8 };
  prob_t p[K];
  uint64_t seeds[K];
  for (int k = 0; k < K; k++) {
    seeds[k] = t_next_seed();
    prob_make(&p[k], w->n, kDims[k % 4], kDtypes[k % 3], kCombos[k % 4].it,
              kCombos[k % 4].weighted, kCombos[k % 4].pool, 0, seeds[k]);
    prob_upload(w, &p[k]);
  }
  /* Reserve the largest need first so no growth (a device sync) separates the calls. */
  size_t need = 0;
  for (int k = 0; k < K; k++)
    for (int i = 0; i < 2; i++) {
      size_t b = 0;
      ASSERT_OK(fco_embedding_alltoall_workspace(w->comms[0], p[k].tpr, p[k].bpr, p[k].D, p[k].dt,
                                                 i, &b));
      if (b > need) need = b;
    }
  ASSERT_OK(fco_comm_reserve(w->comms[0], need)); /* a world reserves for all its ranks */
  for (int k = 0; k < K; k++) {
    describe(&p[k], k % 2, seeds[k], "back to back");
    ASSERT_OK(prob_run(w, &p[k], k % 2, NULL));
  }
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  for (int k = 0; k < K; k++) {
    describe(&p[k], k % 2, seeds[k], "back to back (check)");
    ASSERT_EQ(prob_check(w, &p[k]), 0);
    prob_free(w, &p[k]);
  }
}

/* Outputs in symmetric buffers (fco_mem_alloc): every rank's, rank 0's only, every rank's but
 * rank 0's — peers store straight into a symmetric out and stage for the others, in one call —
 * on the fused lean kernel's both tile orders (short bags: claimed; long: static), 32- and
 * 128-byte rows, unaligned outs (the generic kernel), impl 0 and AUTO, the previous fused kernel
 * (rows of 130 f32 and FCO_EA_LEAN=0: staging whatever the out), FCO_EA_DIRECT=0; then calls back
 * to back with every out symmetric. */
static void sym_outputs(const t_world_t* w) {
  const unsigned all = (1u << w->n) - 1, masks[3] = {all, 1u, all & ~1u};
  /* ragged splits for up to MAX_P ranks (a world reads its first w->n entries) */
  static const int32_t tpr_r[MAX_P] = {2, 1, 3, 2, 0, 1, 2, 3};
  static const int64_t bpr_r[MAX_P] = {37, 64, 5, 90, 11, 0, 23, 48};
  for (int m = 0; m < 3; m++) {
    if (!masks[m] || (m > 0 && masks[m] == all)) continue;
    g_sym_mask = masks[m];
    for (int i = 0; i < 3; i++) {
      one_call(w, 64, FCO_BF16, kCombos[i].it, kCombos[i].weighted, kCombos[i].pool, 0, kImpls[i], 0);
      one_call(w, 16, FCO_F32, kCombos[i + 1].it, kCombos[i + 1].weighted, kCombos[i + 1].pool, 0,
               1, 40);
    }
    shape_call(w, 32, FCO_BF16, FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_SUM, 0, 1, 0, tpr_r, bpr_r,
               "symmetric outs, ragged");
    setenv("FCO_EA_LEAN_DYN", "0", 1); /* the static order */
    one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, 1, 40);
    unsetenv("FCO_EA_LEAN_DYN");
    one_call(w, 130, FCO_F32, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_MEAN, 0, 1, 0); /* not lean */
  }
  g_sym_mask = all;
  g_shift = 4; /* unaligned outs and weights on every rank: the generic fused kernel */
  one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, 1, 0);
  g_shift = 0;
  setenv("FCO_EA_LEAN", "0", 1);
  one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_SUM, 0, 1, 0);
  unsetenv("FCO_EA_LEAN");
  setenv("FCO_EA_DIRECT", "0", 1);
  one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_MEAN, 0, 1, 0);
  unsetenv("FCO_EA_DIRECT");
  back_to_back(w);
  g_sym_mask = 0;
}

#ifdef FCO_HAVE_CUDA
/* Local transport: capture impl 1 and impl 0 into one CUDA graph, replay it with fresh table
 * values each time (the epoch is re-read by every replay). */
static void graph_replay(const t_world_t* w) {
  prob_t p;
  uint64_t seed = t_next_seed();
  prob_make(&p, w->n, 64, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, seed);
  describe(&p, 1, seed, "CUDA graph");
  prob_upload(w, &p);
  size_t need = 0, b;
  for (int i = 0; i < 2; i++) {
    ASSERT_OK(fco_embedding_alltoall_workspace(w->comms[0], p.tpr, p.bpr, p.D, p.dt, i, &b));
    if (b > need) need = b;
  }
  ASSERT_OK(fco_comm_reserve(w->comms[0], need));
  cudaStream_t s;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r1 = prob_run(w, &p, 1, s), r0 = prob_run(w, &p, 0, s);
  cudaGraph_t g = NULL;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_OK(r1);
  ASSERT_OK(r0);
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int rep = 0; rep < 3; rep++) {
    g_rng = t_next_seed();
    for (int r = 0; r < p.P; r++) {
      for (size_t i = 0; i < (size_t)p.total_rows[r] * (size_t)p.D; i++)
        p.weight[r][i] = round_to(p.dt, (float)rnd_in(-4, 4));
      upload_inputs(w, &p, r);
      poison_out(w, &p, r);
    }
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_EQ(prob_check(w, &p), 0);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  prob_free(w, &p);
}
#endif

/* Bad data on rank `bad_rank`: the documented error naming table and position, the bad entries
 * skipped (the reference skips them too), nothing written past out. `kind`: 0 index = rows,
 * 1 negative index, 2 decreasing offsets, 3 offsets past num_indices. D, dt: the kernel path
 * (3 f32: the element path; 16 bf16: 32-byte rows, the lean kernels); stream: NULL the
 * defaults, "T<n>" the lean kernels with FCO_EA_LEAN_TABLES = n, "S" the lean fused kernel's
 * static order (FCO_EA_LEAN_DYN=0), else the previous kernels (FCO_EA_LEAN=0) with
 * FCO_EA_STREAM = stream. Destroys the world (GPU errors are sticky) and
 * makes a new one. */
static void bad_data(t_world_t* w, int impl, int kind, int64_t D, fco_dtype_t dt,
                     const char* stream) {
  prob_t p;
  uint64_t seed = t_next_seed();
  int found = 0, r = 0;
  int64_t pos = 0, table = 0;
  for (int attempt = 0; attempt < 100 && !found; attempt++) {
    if (attempt) prob_free(w, &p);
    prob_make(&p, w->n, D, dt, kind % 2 ? FCO_EMB_INDEX_I64 : FCO_EMB_INDEX_I32, 1,
              FCO_EMB_POOL_SUM, 0, seed + (uint64_t)attempt);
    for (r = 0; r < p.P && !found; r++) {
      int64_t nb = (int64_t)p.tpr[r] * p.B;
      if (kind <= 1 && p.nnz[r] > 0) {
        pos = (int64_t)(rnd() % (uint64_t)p.nnz[r]);
        int64_t k = 0;
        while (p.offsets[r][k + 1] <= pos) k++;
        table = toff(&p, r) + k / p.B;
        p.indices[r][pos] = kind == 0 ? p.rows[r][k / p.B] : -1 - (int64_t)(rnd() % 5);
        found = 1;
      } else if (kind == 2) {
        for (int64_t k = 0; k < nb && !found; k++) {
          /* Bag k+1 (if any) grows by the index at offsets[k] - 1, which belongs to an earlier
           * bag j: keep j and k+1 in one table, so that index stays valid and bag k is the only
           * bad thing. */
          int64_t j = 0;
          if (p.offsets[r][k] >= 1)
            while (p.offsets[r][j + 1] <= p.offsets[r][k] - 1) j++;
          if (p.offsets[r][k] >= 1 && (k + 1 == nb || j / p.B == (k + 1) / p.B)) {
            p.offsets[r][k + 1] = p.offsets[r][k] - 1; /* bag k decreases; bag k+1 stays valid */
            pos = k;
            table = toff(&p, r) + k / p.B;
            found = 1;
          }
        }
      } else if (kind == 3 && nb > 0) {
        p.offsets[r][nb] = p.nnz[r] + 3; /* the last bag leaves [0, num_indices] */
        pos = nb - 1;
        table = toff(&p, r) + (nb - 1) / p.B;
        found = 1;
      }
      if (found) break;
    }
  }
  if (!found) t_fail(__FILE__, __LINE__, "bad_data: no problem with a place for kind %d", kind);
  describe(&p, impl, seed, "bad data");
  prob_upload(w, &p);
  if (stream && stream[0] == 'T') {
    setenv("FCO_EA_LEAN_TABLES", stream + 1, 1);
  } else if (stream && stream[0] == 'S') {
    setenv("FCO_EA_LEAN_DYN", "0", 1);
  } else if (stream) {
    setenv("FCO_EA_LEAN", "0", 1);
    setenv("FCO_EA_STREAM", stream, 1);
  }
  fco_result_t res = prob_run(w, &p, impl, NULL);
  unsetenv("FCO_EA_LEAN");
  unsetenv("FCO_EA_STREAM");
  unsetenv("FCO_EA_LEAN_TABLES");
  unsetenv("FCO_EA_LEAN_DYN");
  t_sync(w);
  char want_table[32], want_pos[32];
  snprintf(want_table, sizeof want_table, "table %lld", (long long)table);
  snprintf(want_pos, sizeof want_pos, "[%lld]", (long long)pos);
  if (t_is_gpu(w->transport)) {
    ASSERT_OK(res);
    ASSERT_RES(fco_comm_get_async_error(w->comms[r]), FCO_ERR_INVALID_ARGUMENT);
  } else {
    ASSERT_RES(res, FCO_ERR_INVALID_ARGUMENT);
  }
  const char* msg = fco_last_error(w->comms[r]);
  if (!t_contains(msg, want_table) || !t_contains(msg, want_pos))
    t_fail(__FILE__, __LINE__, "message does not name %s and position %s: \"%s\"", want_table,
           want_pos, msg);
  ASSERT_EQ(prob_check(w, &p), 0);
  prob_free(w, &p);
  int n = w->n;
  fco_transport_t t = w->transport;
  t_world_destroy(w, 0);
  ASSERT_OK(t_world_init(w, t, n, NULL));
}

/* Argument errors on rank 0 of a world: code, a message naming the argument, out untouched. */
static void bad_args(const t_world_t* w) {
  prob_t p;
  uint64_t seed = t_next_seed();
  do { /* rank 0 needs a table and a sample */
    prob_make(&p, w->n, 4, FCO_F32, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, seed++);
    if (p.tpr[0] > 0 && p.bpr[0] > 0 && p.nnz[0] > 0) break;
    prob_free(w, &p);
  } while (1);
  describe(&p, 0, seed, "bad arguments");
  prob_upload(w, &p);
  fco_comm_t c = w->comms[0];
  const fco_result_t E = FCO_ERR_INVALID_ARGUMENT;
  void *wt = p.d_weight[0], *of = p.d_offsets[0], *ix = p.d_indices[0], *out = p.d_out[0];
  int64_t* rows = p.rows[0];
  int32_t tpr[MAX_P];
  int64_t bpr[MAX_P], neg_rows[4] = {-1, 1, 1, 1};
  memcpy(tpr, p.tpr, sizeof tpr);
  memcpy(bpr, p.bpr, sizeof bpr);
  int32_t tpr_neg[MAX_P], tpr_big[MAX_P], tpr_zero[MAX_P] = {0};
  int64_t bpr_zero[MAX_P] = {0};
  memcpy(tpr_neg, tpr, sizeof tpr);
  tpr_neg[w->n - 1] = -1;
  memcpy(tpr_big, tpr, sizeof tpr);
  tpr_big[w->n - 1] += FCO_EMBEDDING_MAX_TABLES;
  int64_t n = p.nnz[0], D = p.D;
#define BAD(word, ...)                                                                   \
  do {                                                                                   \
    t_context("bad argument %s", word);                                                  \
    ASSERT_RES(fco_embedding_alltoall(__VA_ARGS__, NULL), E);                             \
    ASSERT_MSG(NULL, word);                                                              \
  } while (0)
  BAD("comm", NULL, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("tables_per_rank", c, wt, rows, NULL, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("batch_per_rank", c, wt, rows, tpr, NULL, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("tables_per_rank", c, wt, rows, tpr_neg, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32,
      NULL, FCO_EMB_POOL_SUM, out, 0);
  BAD("FCO_EMBEDDING_MAX_TABLES", c, wt, rows, tpr_big, bpr, D, FCO_F32, of, ix, n,
      FCO_EMB_INDEX_I32, NULL, FCO_EMB_POOL_SUM, out, 0);
  BAD("tables_per_rank", c, wt, rows, tpr_zero, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32,
      NULL, FCO_EMB_POOL_SUM, out, 0);
  BAD("batch_per_rank", c, wt, rows, tpr, bpr_zero, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32,
      NULL, FCO_EMB_POOL_SUM, out, 0);
  BAD("dim", c, wt, rows, tpr, bpr, 0, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("dim", c, wt, rows, tpr, bpr, FCO_EMBEDDING_MAX_DIM + 1, FCO_F32, of, ix, n,
      FCO_EMB_INDEX_I32, NULL, FCO_EMB_POOL_SUM, out, 0);
  BAD("dtype", c, wt, rows, tpr, bpr, D, (fco_dtype_t)7, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("impl", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, FCO_EMBEDDING_ALLTOALL_NUM_IMPLS);
  BAD("impl", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, -2);
  BAD("index_type", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, (fco_emb_index_t)2, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("pooling", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      (fco_emb_pooling_t)5, out, 0);
  BAD("num_indices", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, -1, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("table_rows", c, wt, NULL, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("table_rows", c, wt, neg_rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("weight", c, NULL, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("offsets", c, wt, rows, tpr, bpr, D, FCO_F32, NULL, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("indices", c, wt, rows, tpr, bpr, D, FCO_F32, of, NULL, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("out", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, NULL, 0);
  BAD("out", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, (char*)out + 2, 0);
  BAD("offsets", c, wt, rows, tpr, bpr, D, FCO_F32, (char*)of + 2, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("overlaps", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, wt, 0);
#undef BAD
  t_sync(w);
  /* out + guard still poison */
  unsigned char* h = (unsigned char*)malloc(p.out_bytes[0] + T_GUARD);
  t_get(w->transport, t_rank_device(w->transport, 0), h, out, p.out_bytes[0] + T_GUARD);
  for (size_t i = 0; i < p.out_bytes[0] + T_GUARD; i++)
    if (h[i] != (i < p.out_bytes[0] ? T_POISON : T_GUARD_BYTE))
      t_fail(__FILE__, __LINE__, "a rejected call wrote byte %zu of out", i);
  free(h);

  /* Ranks that disagree (dim): every transport refuses, naming the field. The others' dim is
   * one less (p.D = 4): with one more, the rank's own argument checks could see its out or weight
   * run into a neighbouring allocation (they are sized for p.D) and refuse before the group,
   * leaving its peers to time out — a flake, depending on where the allocator put them. */
  if (w->n > 1) {
    t_context("bad arguments: dim differs across ranks");
    fco_result_t first = FCO_OK;
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++) {
      fco_result_t e = fco_embedding_alltoall(
          w->comms[r], p.d_weight[r], p.rows[r], p.tpr, p.bpr, r == 0 ? p.D : p.D - 1, p.dt,
          p.d_offsets[r], p.d_indices[r], p.nnz[r], p.it, NULL, p.pool,
          p.bpr[r] ? p.d_out[r] : NULL, 1, NULL);
      if (e != FCO_OK && first == FCO_OK) first = e;
    }
    fco_result_t e = fco_group_end();
    if (first == FCO_OK) first = e;
    ASSERT_RES(first, E);
    ASSERT_MSG(NULL, "dim");
  }
  prob_free(w, &p);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = getenv("FCO_TEST_QUICK") && atoi(getenv("FCO_TEST_QUICK")) > 0;
  int max = t_test_max_ranks(t);
  for (int P = 1; P <= max; P++) {
    t_world_t w;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", P);
    ASSERT_OK(t_world_init(&w, t, P, NULL));
    sweep(&w, quick);
    knobs(&w);
    decode_edges(&w);
    back_to_back(&w);
    /* the lean fused kernel's two tile orders back to back (the default claims tiles where bags
     * are short, as here: each call's queues start from the previous call's counters) */
    setenv("FCO_EA_LEAN_DYN", "0", 1);
    back_to_back(&w);
    setenv("FCO_EA_LEAN_DYN", "1", 1);
    setenv("FCO_EA_LEAN_SPLIT", "50", 1);
    back_to_back(&w);
    unsetenv("FCO_EA_LEAN_DYN");
    unsetenv("FCO_EA_LEAN_SPLIT");
    sym_outputs(&w);
#ifdef FCO_HAVE_CUDA
    if (t == FCO_TRANSPORT_LOCAL) graph_replay(&w);
#endif
    bad_args(&w);
    for (int impl = 0; impl < 2; impl++)
      for (int kind = 0; kind < 4; kind++) {
        bad_data(&w, impl, kind, 3, FCO_F32, NULL); /* the element path */
        bad_data(&w, impl, kind, 16, FCO_BF16, NULL); /* 32-byte rows: the lean kernels */
        /* the previous fused kernel's streaming lookup (pool_tile_stream) */
        if (impl == 1) bad_data(&w, impl, kind, 16, FCO_BF16, "1");
        /* the fused lean kernel's multi-table warp tiles (FCO_EA_LEAN_TABLES=4) */
        if (impl == 1) bad_data(&w, impl, kind, 16, FCO_BF16, "T4");
        /* its static order (the default claims tiles on short bags, as here) */
        if (impl == 1) bad_data(&w, impl, kind, 16, FCO_BF16, "S");
      }
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", P, t_now_ms() - t0);
    fflush(stdout);
  }
  if (max < t_test_rank_cap())
    printf("ranks %d..%d not run: transport %s has %d here\n", max + 1, t_test_rank_cap(),
           fco_transport_name(t), max);
  printf("PASS\n");
  return 0;
}
