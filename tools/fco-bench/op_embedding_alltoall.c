/*
 * op_embedding_alltoall.c — the embedding_alltoall op of fco-bench: DLRM's pooled lookup of
 * model-parallel tables followed by the All-to-All to the data-parallel owners of the samples.
 *
 *   fco-bench embedding_alltoall -t nccl -g 2 -d f32,bf16 [-G 1] [-J out.json]
 *
 * Workloads (not the -b/-e byte sweep), (global batch B, tables per GPU, D, pooling L, rows per
 * table, index distribution): the issue's (16384, 8, 128, 32, 1M), (65536, 8, 64, 8, 1M),
 * (4096, 16, 128, 64, 500k), the first with Zipf indices (hot rows), one with L = 1, two
 * small-D, small-L, large-B ones where the All-to-All is comparable to the lookup, and the first
 * two with ragged bags ("rag": each bag's length uniform in 0..2L, mean L, empty bags included,
 * as DLRM's multi-hot features are; indices uniform; lengths from a hash of the workload, rank
 * and bag, the same in every input set). Ranks get
 * B/P samples each (remainder to the first) and the same number of tables. Sum pooling, int64
 * indices, no weights (TorchRec's default). Default dtypes f32 and bf16 (-d f16 adds f16).
 * Env: FCO_BENCH_EA_WORKLOADS="0,1,4" picks workloads; FCO_BENCH_EA_ROWS=n sets the rows per
 * table (scale memory down for the local transport, where P virtual ranks share one GPU);
 * FCO_BENCH_EA_BATCH_DIV=k divides B. cpu defaults: rows ≤ 8192, B / 64 (CPU times).
 *
 * Columns: lookup = our lookup alone, every rank's tables over the whole batch, no exchange
 * (fco_embedding_alltoall on a one-rank communicator per rank: impl 0 with P = 1 is exactly the
 * lookup kernel) → compute_us; a2a = the All-to-All alone on the same byte counts: grouped
 * ncclSend/ncclRecv on our own NCCL communicators (nccl), cudaMemcpyAsync between the virtual
 * ranks' buffers (local), none on cpu → comm_us; then impl 0 (lookup + All-to-All + permute),
 * fused, auto; floor = max(bytes gathered per rank / HBM, bytes a rank sends / 364 GB/s or -L)
 * on nccl, P · bytes gathered / HBM or -L on local (one HBM); ovl = the overlap target
 * max(lookup, a2a) + 0.2 · min(lookup, a2a); hbm% = bytes gathered / lookup time / HBM. HBM:
 * the copy rate measured at start (ctx->hbm_gbps; 4300 GB/s on an H200, ~3000 on an H100).
 *
 * Env FCO_BENCH_SYM=1: every rank's out in a symmetric buffer (fco_mem_alloc): the fused lean
 * kernel's peers store into it directly, no landing copy (FCO_EA_DIRECT=0: staged as before).
 *
 * Check (#wrong), exact: table element (packed row g, column d) = A(g) + C(d) with
 * A(g) = ((g mod 1021)·5 mod 9) − 4 and C(d) = (d mod 5) − 2, so a bag of L rows sums to
 * Σ A(g_k) + L·C(d): an integer of magnitude ≤ 6·L, exact in fp32, rounded once to the dtype on
 * both sides; every element of every rank's out is compared with the host's value. Inputs
 * rotate over 2 sets (indices and out); the tables (GBs) are far larger than L2 anyway.
 * The table header echoes the fused kernel's FCO_EA_* knobs (sweep them through the env).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

enum { EA_UNIFORM, EA_ZIPF, EA_RAGGED };
static const char* const kDistName[] = {"uniform", "zipf", "ragged"}; /* JSON */
static const char* const kDistCol[] = {"unif", "zipf", "rag"};        /* table */
typedef struct {
  long long B;
  int tpg, D, L;
  long long rows;
  int dist; /* EA_UNIFORM, EA_ZIPF (Zipf indices), EA_RAGGED (bag lengths 0..2L, uniform indices) */
} ea_wl_t;

static const ea_wl_t kWorkloads[] = {
    {16384, 8, 128, 32, 1000000, EA_UNIFORM}, {65536, 8, 64, 8, 1000000, EA_UNIFORM},
    {4096, 16, 128, 64, 500000, EA_UNIFORM},  {16384, 8, 128, 32, 1000000, EA_ZIPF},
    {65536, 8, 64, 1, 1000000, EA_UNIFORM},   {131072, 8, 32, 4, 1000000, EA_UNIFORM},
    {262144, 4, 16, 2, 1000000, EA_UNIFORM},  {16384, 8, 128, 32, 1000000, EA_RAGGED},
    {65536, 8, 64, 8, 1000000, EA_RAGGED},
};
#define EA_NUM_WL ((int)(sizeof kWorkloads / sizeof kWorkloads[0]))
#define EA_SETS 2
#define EA_PERIOD 1021 /* rows of the table pattern (prime) */

static ea_wl_t g_wl[EA_NUM_WL];

typedef struct {
  ea_wl_t w;
  fco_dtype_t dt;
  size_t es, vec;
  int P;
  int32_t tpr[BENCH_MAX_RANKS], toff[BENCH_MAX_RANKS + 1];
  int64_t bpr[BENCH_MAX_RANKS], bstart[BENCH_MAX_RANKS + 1];
  int64_t T, nidx[BENCH_MAX_RANKS], most_idx; /* indices of each rank (ragged: they differ) */
  int64_t* trows; /* [tpg], the same for every rank */
  size_t off_w, off_o, off_i[EA_SETS], off_out[EA_SETS], off_scr, off_recv, total;
  int64_t* h_idx[BENCH_MAX_RANKS]; /* set 0, for the check */
  int64_t* h_off[BENCH_MAX_RANKS]; /* each rank's offsets [tpg·B + 1], for the check */
  /* FCO_BENCH_SYM=1: each rank's out sets in one fco_mem_alloc'd buffer (peers store into it
   * directly: no landing copy); NULL: in the pool */
  void* sym[BENCH_MAX_RANKS];
  size_t out_set_bytes;
  int impl;
  fco_comm_t solo[BENCH_MAX_RANKS]; /* one-rank communicators: the lookup alone */
  int32_t solo_tpr[1];
  int64_t solo_bpr[1];
#ifdef FCO_HAVE_CUDA
  ncclComm_t nccl[BENCH_MAX_RANKS]; /* ours: the All-to-All alone */
  int have_nccl;
#endif
} ea_state_t;

static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
static int val_a(int64_t g) { return (int)(((g % EA_PERIOD) * 5) % 9) - 4; }
static int val_c(int64_t d) { return (int)(d % 5) - 2; }

/* A positive decimal integer (blanks around it allowed) from the env, dflt when unset or not one
 * (said: ignored); *refused set when it is more than max (said). Base 10: "010" is ten (base 0
 * read it as octal 8), and a value past max is refused, not clamped or wrapped. */
static long long env_ll(const char* name, long long dflt, long long max, int* refused) {
  const char* s = getenv(name);
  if (!s || !*s) return dflt;
  unsigned long long v = 0;
  const char* end = NULL;
  const int big = bench_parse_dec(s + strspn(s, " \t"), &end, (unsigned long long)max, &v);
  while (end && (*end == ' ' || *end == '\t' || *end == '\n')) ++end;
  if (big >= 0 && !*end && v > 0) {
    if (!big) return (long long)v;
    fprintf(stderr, "fco-bench: %s=\"%s\" is more than %lld: refused\n", name, s, max);
    *refused = 1;
    return dflt;
  }
  fprintf(stderr, "fco-bench: %s=\"%s\" is not a positive integer: ignored\n", name, s);
  return dflt;
}

/* Rows per table: at most 2^40 (fco_embedding_alltoall's table_rows limit; 72057594037927937
 * wrapped the tables' byte count, a heap overflow). The batch divisor: at most 2^40 too (any
 * larger one leaves every batch at the ranks' count alike). */
#define EA_MAX_ROWS (1ll << 40)
#define EA_MAX_DIV (1ll << 40)

static int ea_shapes(bench_ctx_t* ctx, size_t** ids) {
  const int cpu = ctx->transport == FCO_TRANSPORT_CPU;
  int refused = 0;
  long long rows = env_ll("FCO_BENCH_EA_ROWS", 0, EA_MAX_ROWS, &refused);
  long long div = env_ll("FCO_BENCH_EA_BATCH_DIV", cpu ? 64 : 1, EA_MAX_DIV, &refused);
  if (refused) return -2;
  const char* pick = getenv("FCO_BENCH_EA_WORKLOADS");
  int chosen[EA_NUM_WL];
  for (int i = 0; i < EA_NUM_WL; i++) chosen[i] = !(pick && *pick);
  for (const char* p = pick ? pick : ""; *p;) { /* one pass: select, and say what names nothing */
    size_t l = strcspn(p, ",");
    char tok[32];
    /* a token that does not fit tok is no workload number (a cut one was: 0000...04 ran 0) */
    const int fits = l < sizeof tok;
    snprintf(tok, sizeof tok, "%.*s", (int)(fits ? l : 0), p);
    char* end = NULL;
    long v = strtol(tok, &end, 10);
    if (l == 0 || !fits || end == tok || *end != 0 || v < 0 || v >= EA_NUM_WL)
      fprintf(stderr, "fco-bench: FCO_BENCH_EA_WORKLOADS: '%.*s' is not a workload number "
              "0..%d, ignored\n", (int)l, p, EA_NUM_WL - 1);
    else
      chosen[v] = 1;
    p += l + (p[l] == ',');
  }
  *ids = (size_t*)malloc(EA_NUM_WL * sizeof(size_t));
  if (!*ids) return -1;
  int n = 0;
  for (int i = 0; i < EA_NUM_WL; i++) {
    g_wl[i] = kWorkloads[i];
    if (rows > 0) g_wl[i].rows = rows;
    else if (cpu && g_wl[i].rows > 8192) g_wl[i].rows = 8192;
    g_wl[i].B /= div;
    if (g_wl[i].B < ctx->nranks) g_wl[i].B = ctx->nranks;
    if (chosen[i]) (*ids)[n++] = (size_t)i;
  }
  return n;
}

static const char* ea_impl_name(bench_ctx_t* ctx, int impl) {
  return fco_embedding_alltoall_impl_name(ctx->comms[0], impl);
}

static char* at(bench_ctx_t* ctx, int r, size_t off) { return (char*)ctx->pool[r] + off; }
/* Rank r's out of input set `set`. */
static char* out_at(bench_ctx_t* ctx, const ea_state_t* st, int r, int set) {
  return st->sym[r] ? (char*)st->sym[r] + (size_t)set * st->out_set_bytes : at(ctx, r, st->off_out[set]);
}

static fco_result_t ea_issue(bench_ctx_t* ctx, void* arg, int iter) {
  ea_state_t* st = (ea_state_t*)arg;
  const int set = iter % EA_SETS;
  fco_result_t first = FCO_OK;
  fco_group_start();
  for (int r = 0; r < ctx->nranks; r++) {
    fco_result_t e = fco_embedding_alltoall(
        ctx->comms[r], at(ctx, r, st->off_w), st->trows, st->tpr, st->bpr, st->w.D, st->dt,
        at(ctx, r, st->off_o), at(ctx, r, st->off_i[set]), st->nidx[r], FCO_EMB_INDEX_I64, NULL,
        FCO_EMB_POOL_SUM, out_at(ctx, st, r, set), st->impl, bench_stream(ctx, r));
    if (e != FCO_OK && first == FCO_OK) {
      first = e;
      ctx->err_rank = r;
    }
  }
  return bench_group_end(ctx, first);
}

/* Every rank's lookup alone: its tables over the whole batch into the scratch [B, tpg, D]. */
static fco_result_t lookup_issue(bench_ctx_t* ctx, void* arg, int iter) {
  ea_state_t* st = (ea_state_t*)arg;
  const int set = iter % EA_SETS;
  fco_result_t first = FCO_OK;
  fco_group_start();
  for (int r = 0; r < ctx->nranks; r++) {
    fco_result_t e = fco_embedding_alltoall(
        st->solo[r], at(ctx, r, st->off_w), st->trows, st->solo_tpr, st->solo_bpr, st->w.D, st->dt,
        at(ctx, r, st->off_o), at(ctx, r, st->off_i[set]), st->nidx[r], FCO_EMB_INDEX_I64, NULL,
        FCO_EMB_POOL_SUM, at(ctx, r, st->off_scr), 0, bench_stream(ctx, r));
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  fco_result_t e = fco_group_end();
  if (first == FCO_OK) first = e;
  if (first != FCO_OK) bench_fail(ctx, first, "lookup alone: %s", fco_last_error(NULL));
  return first;
}

#ifdef FCO_HAVE_CUDA
/* The All-to-All alone: scratch [B, tpg, D] block [bstart_q, +b_q) of rank r → rank q's recv at
 * b_q · toff_r rows (the byte counts of impl 0). */
static fco_result_t a2a_issue(bench_ctx_t* ctx, void* arg, int iter) {
  ea_state_t* st = (ea_state_t*)arg;
  (void)iter;
  const int P = ctx->nranks;
  const size_t vec = st->vec, tpg = (size_t)st->w.tpg;
  if (ctx->transport == FCO_TRANSPORT_NCCL) {
    ncclResult_t nr = ncclGroupStart();
    for (int r = 0; r < P && nr == ncclSuccess; r++) {
      cudaStream_t s = (cudaStream_t)bench_stream(ctx, r);
      for (int q = 0; q < P && nr == ncclSuccess; q++) {
        size_t sb = (size_t)st->bpr[q] * tpg * vec, rb = (size_t)st->bpr[r] * (size_t)st->tpr[q] * vec;
        if (sb)
          nr = ncclSend(at(ctx, r, st->off_scr) + (size_t)st->bstart[q] * tpg * vec, sb, ncclInt8, q,
                        st->nccl[r], s);
        if (rb && nr == ncclSuccess)
          nr = ncclRecv(at(ctx, r, st->off_recv) + (size_t)st->bpr[r] * (size_t)st->toff[q] * vec,
                        rb, ncclInt8, q, st->nccl[r], s);
      }
    }
    ncclResult_t ne = ncclGroupEnd();
    if (nr == ncclSuccess) nr = ne;
    if (nr != ncclSuccess)
      return bench_fail(ctx, FCO_ERR_NCCL, "all-to-all alone: %s", ncclGetErrorString(nr));
    return FCO_OK;
  }
  cudaStream_t s = (cudaStream_t)bench_stream(ctx, 0);
  for (int r = 0; r < P; r++)
    for (int q = 0; q < P; q++) {
      size_t b = (size_t)st->bpr[q] * tpg * vec;
      if (!b) continue;
      cudaError_t ce = cudaMemcpyAsync(
          at(ctx, q, st->off_recv) + (size_t)st->bpr[q] * (size_t)st->toff[r] * vec,
          at(ctx, r, st->off_scr) + (size_t)st->bstart[q] * tpg * vec, b, cudaMemcpyDeviceToDevice, s);
      if (ce != cudaSuccess)
        return bench_fail(ctx, FCO_ERR_CUDA, "all-to-all alone: %s", cudaGetErrorString(ce));
    }
  return FCO_OK;
}
#endif

static void store_elem(void* dst, fco_dtype_t dt, size_t i, float v) {
  if (dt == FCO_F32) ((float*)dst)[i] = v;
  else if (dt == FCO_F16) ((unsigned short*)dst)[i] = bench_float_to_half(v);
  else ((unsigned short*)dst)[i] = bench_float_to_bf16(v);
}
static float load_elem(const void* src, fco_dtype_t dt, size_t i) {
  if (dt == FCO_F32) return ((const float*)src)[i];
  if (dt == FCO_F16) return bench_half_to_float(((const unsigned short*)src)[i]);
  return bench_bf16_to_float(((const unsigned short*)src)[i]);
}
static float round_dt(fco_dtype_t dt, float v) {
  unsigned short h[1];
  if (dt == FCO_F32) return v;
  store_elem(h, dt, 0, v);
  return load_elem(h, dt, 0);
}

static int64_t draw_index(const ea_wl_t* w, uint64_t h) {
  if (w->dist != EA_ZIPF) return (int64_t)(h % (uint64_t)w->rows);
  /* Zipf(1) by inversion of the continuous law ∝ 1/(x+1); hot rows scattered by a bijection. */
  double u = (double)(h >> 11) / 9007199254740992.0;
  int64_t x = (int64_t)floor(exp(u * log((double)w->rows + 1.0))) - 1;
  if (x < 0) x = 0;
  if (x >= w->rows) x = w->rows - 1;
  const uint64_t m = 1000003ull; /* prime: a bijection unless rows is a multiple of it */
  return w->rows % (int64_t)m ? (int64_t)(((uint64_t)x * m) % (uint64_t)w->rows) : x;
}

static fco_result_t ea_setup(bench_ctx_t* ctx, size_t id, fco_dtype_t dtype, bench_row_t* row,
                             void** state) {
  /* The issue's dtypes (f32, bf16) without -d; any -d naming f16 (a list, all) adds it (a
   * full list once dropped f16 too, unsaid). */
  if (dtype == FCO_F16 && !ctx->opt.dtype_given)
    return id ? FCO_ERR_UNSUPPORTED
              : bench_fail(ctx, FCO_ERR_UNSUPPORTED, "embedding_alltoall runs the issue's f32 "
                           "and bf16 by default; -d f16 (or a list with it, or all) adds f16");
  ea_state_t* st = (ea_state_t*)calloc(1, sizeof *st);
  if (!st) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  *state = st;
  const int P = ctx->nranks;
  st->w = g_wl[id];
  st->dt = dtype;
  st->es = fco_dtype_size(dtype);
  st->vec = (size_t)st->w.D * st->es;
  st->P = P;
  for (int r = 0; r < P; r++) {
    st->tpr[r] = st->w.tpg;
    st->bpr[r] = st->w.B / P + (r < st->w.B % P);
    st->toff[r + 1] = st->toff[r] + st->tpr[r];
    st->bstart[r + 1] = st->bstart[r] + st->bpr[r];
  }
  st->T = st->toff[P];
  /* Each rank's offsets over its tables × the whole batch: every bag L long, or (ragged) a
   * length uniform in 0..2L drawn from a hash of (workload, rank, bag). */
  const size_t nbags = (size_t)st->w.tpg * (size_t)st->w.B;
  st->most_idx = 0;
  for (int r = 0; r < P; r++) {
    int64_t* o = (int64_t*)malloc((nbags + 1) * sizeof(int64_t));
    if (!o) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
    st->h_off[r] = o;
    o[0] = 0;
    const uint64_t seed = mix(((uint64_t)r << 32) ^ (uint64_t)id ^ 0xba65ull);
    for (size_t k = 0; k < nbags; k++)
      o[k + 1] = o[k] + (st->w.dist == EA_RAGGED ? (int64_t)(mix(seed + k) % (uint64_t)(2 * st->w.L + 1))
                                                 : st->w.L);
    st->nidx[r] = o[nbags];
    if (st->nidx[r] > st->most_idx) st->most_idx = st->nidx[r];
  }
  st->solo_tpr[0] = st->w.tpg;
  st->solo_bpr[0] = st->w.B;
  st->trows = (int64_t*)malloc((size_t)st->w.tpg * sizeof(int64_t));
  if (!st->trows) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  for (int t = 0; t < st->w.tpg; t++) st->trows[t] = st->w.rows;

  /* Per-rank layout in ctx->pool[r] (every rank the same, sized for rank 0's batch, the largest). */
  const size_t tpg = (size_t)st->w.tpg, B = (size_t)st->w.B;
  size_t off = 0;
#define EA_TAKE(field, bytes) (st->field = off, off += ((bytes) + 255) / 256 * 256)
  EA_TAKE(off_w, tpg * (size_t)st->w.rows * st->vec);
  EA_TAKE(off_o, (tpg * B + 1) * 8);
  for (int s = 0; s < EA_SETS; s++) EA_TAKE(off_i[s], (size_t)st->most_idx * 8);
  for (int s = 0; s < EA_SETS; s++) EA_TAKE(off_out[s], (size_t)st->bpr[0] * (size_t)st->T * st->vec);
  EA_TAKE(off_scr, B * tpg * st->vec);
  EA_TAKE(off_recv, (size_t)st->bpr[0] * (size_t)st->T * st->vec);
#undef EA_TAKE
  st->total = off;
  fco_result_t r = bench_pool_reserve(ctx, st->total);
  if (r != FCO_OK) return r;
  st->out_set_bytes = ((size_t)st->bpr[0] * (size_t)st->T * st->vec + 255) / 256 * 256;
  if (fco_env_flag("FCO_BENCH_SYM", 0))
    for (int rk = 0; rk < P; rk++)
      if ((r = fco_mem_alloc(ctx->comms[rk], EA_SETS * st->out_set_bytes, &st->sym[rk])) != FCO_OK)
        return bench_fail(ctx, r, "fco_mem_alloc on rank %d: %s", rk, fco_last_error(ctx->comms[rk]));

  /* Tables: EA_PERIOD rows of the pattern, then doubled in place up to every packed row. */
  const int64_t nrows = (int64_t)tpg * st->w.rows;
  const int64_t blk = nrows < EA_PERIOD ? nrows : EA_PERIOD;
  size_t hbytes = (size_t)blk * st->vec;
  size_t ibytes = (size_t)st->most_idx * 8, obytes = (tpg * B + 1) * 8;
  size_t hmax = hbytes > ibytes ? hbytes : ibytes;
  char* host = (char*)malloc(hmax);
  if (!host) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "cannot allocate %zu B", hmax);
  for (int64_t g = 0; g < blk; g++)
    for (int d = 0; d < st->w.D; d++)
      store_elem(host, dtype, (size_t)g * (size_t)st->w.D + (size_t)d, (float)(val_a(g) + val_c(d)));
  for (int rk = 0; rk < P && r == FCO_OK; rk++) {
    char* wt = at(ctx, rk, st->off_w);
    r = bench_upload(ctx, rk, wt, host, hbytes);
    for (int64_t have = blk; have < nrows && r == FCO_OK; have *= 2) {
      int64_t n = have < nrows - have ? have : nrows - have;
      r = bench_copy(ctx, rk, wt + (size_t)have * st->vec, wt, (size_t)n * st->vec);
    }
  }
  for (int rk = 0; rk < P && r == FCO_OK; rk++) r = bench_upload(ctx, rk, at(ctx, rk, st->off_o), st->h_off[rk], obytes);
  /* Indices per set and rank; set 0 kept for the check. */
  for (int s = 0; s < EA_SETS && r == FCO_OK; s++)
    for (int rk = 0; rk < P && r == FCO_OK; rk++) {
      int64_t* ix = (int64_t*)host;
      uint64_t seed = mix(((uint64_t)s << 40) ^ ((uint64_t)rk << 32) ^ (uint64_t)id ^ 0x5eedull);
      const size_t nb = (size_t)st->nidx[rk] * 8;
      for (int64_t j = 0; j < st->nidx[rk]; j++) ix[j] = draw_index(&st->w, mix(seed + (uint64_t)j));
      r = bench_upload(ctx, rk, at(ctx, rk, st->off_i[s]), ix, nb);
      if (s == 0 && r == FCO_OK) {
        st->h_idx[rk] = (int64_t*)malloc(nb ? nb : 1);
        if (!st->h_idx[rk]) r = bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "cannot allocate %zu B", nb);
        else memcpy(st->h_idx[rk], ix, nb);
      }
    }
  free(host);
  if (r != FCO_OK) return r;
  for (int rk = 0; rk < P && r == FCO_OK; rk++)
    for (int s = 0; s < EA_SETS && r == FCO_OK; s++)
      r = bench_poison(ctx, rk, out_at(ctx, st, rk, s), (size_t)st->bpr[0] * (size_t)st->T * st->vec);
  if (r != FCO_OK) return r;

  /* One-rank communicators (lookup alone) and, on nccl, our own NCCL ones (a2a alone). */
  fco_config_t cfg;
  fco_config_init(&cfg);
  cfg.transport = ctx->transport;
  for (int rk = 0; rk < P; rk++) {
    fco_result_t e = fco_comm_init_all(&st->solo[rk], 1, ctx->on_gpu ? &ctx->devs[rk] : NULL, &cfg);
    if (e != FCO_OK) return bench_fail(ctx, e, "one-rank communicator: %s", fco_last_error(NULL));
  }
#ifdef FCO_HAVE_CUDA
  if (ctx->transport == FCO_TRANSPORT_NCCL) {
    ncclResult_t nr = ncclCommInitAll(st->nccl, P, ctx->devs);
    if (nr != ncclSuccess)
      return bench_fail(ctx, FCO_ERR_NCCL, "ncclCommInitAll: %s", ncclGetErrorString(nr));
    st->have_nccl = 1;
  }
#endif
  row->bytes = (size_t)st->most_idx * st->vec; /* gathered by the busiest rank */
  row->count = id;
  snprintf(row->shape_json, sizeof row->shape_json,
           "{\"B\":%lld,\"tables_per_gpu\":%d,\"D\":%d,\"L\":%d,\"rows\":%lld,\"dist\":\"%s\"}",
           st->w.B, st->w.tpg, st->w.D, st->w.L, st->w.rows, kDistName[st->w.dist]);
  return FCO_OK;
}

static fco_result_t ea_time(bench_ctx_t* ctx, void* state, int impl, double* us) {
  ea_state_t* st = (ea_state_t*)state;
  size_t ws = 0;
  fco_result_t r = fco_embedding_alltoall_workspace(ctx->comms[0], st->tpr, st->bpr, st->w.D,
                                                    st->dt, impl, &ws);
  if (r != FCO_OK) {
    ctx->err_rank = 0;
    return r;
  }
  if ((r = bench_reserve(ctx, ws)) != FCO_OK) return r;
  st->impl = impl;
  return bench_time(ctx, ea_issue, st, EA_SETS, us);
}

static fco_result_t ea_check(bench_ctx_t* ctx, void* state, int impl, long long* wrong) {
  ea_state_t* st = (ea_state_t*)state;
  const size_t vec = st->vec, D = (size_t)st->w.D, B = (size_t)st->w.B;
  fco_result_t r;
  for (int rk = 0; rk < ctx->nranks; rk++)
    if ((r = bench_poison(ctx, rk, out_at(ctx, st, rk, 0), (size_t)st->bpr[rk] * (size_t)st->T * vec)) != FCO_OK)
      return r;
  st->impl = impl;
  if ((r = ea_issue(ctx, st, 0)) != FCO_OK) return r;
  if ((r = bench_sync(ctx)) != FCO_OK) return r;
  if ((r = bench_poll(ctx)) != FCO_OK) return r;
  long long bad = 0;
  size_t obytes = (size_t)st->bpr[0] * (size_t)st->T * vec;
  char* host = (char*)malloc(obytes ? obytes : 1);
  if (!host) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "cannot allocate %zu B", obytes);
  for (int s = 0; s < ctx->nranks; s++) {
    size_t nb = (size_t)st->bpr[s] * (size_t)st->T * vec;
    if ((r = bench_download(ctx, s, host, out_at(ctx, st, s, 0), nb)) != FCO_OK) break;
    for (int64_t i = 0; i < st->bpr[s]; i++) {
      const size_t b = (size_t)(st->bstart[s] + i);
      for (int64_t tg = 0; tg < st->T; tg++) {
        int q = 0;
        while (tg >= st->toff[q + 1]) q++;
        const size_t t = (size_t)(tg - st->toff[q]);
        const int64_t* o = st->h_off[q] + t * B + b;
        const int64_t* ix = st->h_idx[q] + o[0];
        const size_t L = (size_t)(o[1] - o[0]);
        long long A = 0;
        for (size_t l = 0; l < L; l++) A += val_a((int64_t)t * st->w.rows + ix[l]);
        for (size_t d = 0; d < D; d++) {
          float want = round_dt(st->dt, (float)(A + (long long)L * val_c((int64_t)d)));
          float got = load_elem(host, st->dt, ((size_t)i * (size_t)st->T + (size_t)tg) * D + d);
          if (got == want) continue;
          static int told;
          if (bad++ < 3 && told++ < 24)
            fprintf(stderr, "fco-bench: embedding_alltoall %s impl %s: rank %d out[%lld][%lld][%zu] = %g, want %g\n",
                    fco_dtype_name(st->dt), impl == FCO_IMPL_AUTO ? "auto" : ea_impl_name(ctx, impl),
                    s, (long long)i, (long long)tg, d, (double)got, (double)want);
        }
      }
    }
  }
  free(host);
  *wrong = bad;
  return r;
}

static fco_result_t ea_finish_row(bench_ctx_t* ctx, void* state, bench_row_t* row) {
  ea_state_t* st = (ea_state_t*)state;
  fco_result_t r = bench_time(ctx, lookup_issue, st, EA_SETS, &row->compute_us);
  if (r != FCO_OK) return r;
  row->comm_us = -1;
#ifdef FCO_HAVE_CUDA
  if (ctx->on_gpu && ctx->nranks > 1 && (r = bench_time(ctx, a2a_issue, st, EA_SETS, &row->comm_us)) != FCO_OK)
    return r;
  /* both at once: only the time counts (the buffers may overlap; nothing here is checked) */
  if (ctx->on_gpu && ctx->nranks > 1 &&
      (r = bench_time_both(ctx, lookup_issue, a2a_issue, st, EA_SETS, &row->both_us)) != FCO_OK)
    return r;
#endif
  const double gathered = (double)row->bytes;
  const double sent = (double)(st->w.B - st->bpr[ctx->nranks - 1]) * st->w.tpg * (double)st->vec;
  double hbm = ctx->hbm_gbps;
  const double link = ctx->opt.link_gbps > 0 ? ctx->opt.link_gbps : BENCH_NVLINK_GBPS;
  if (ctx->transport == FCO_TRANSPORT_NCCL) {
    double a = gathered / (hbm * 1e3), b = ctx->nranks > 1 ? sent / (link * 1e3) : 0;
    row->floor_us = a > b ? a : b;
  } else if (ctx->transport == FCO_TRANSPORT_LOCAL) { /* -L: the HBM's GB/s here */
    if (ctx->opt.link_gbps > 0) hbm = ctx->opt.link_gbps;
    row->floor_us = ctx->nranks * gathered / (hbm * 1e3);
  } else {
    row->floor_us = -1;
  }
  return FCO_OK;
}

static void ea_teardown(bench_ctx_t* ctx, void* state) {
  ea_state_t* st = (ea_state_t*)state;
  if (!st) return;
  bench_sync(ctx);
  for (int r = 0; r < BENCH_MAX_RANKS; r++) {
    if (st->solo[r]) fco_comm_destroy(st->solo[r]);
    free(st->h_idx[r]);
    free(st->h_off[r]);
    if (st->sym[r]) (void)fco_mem_free(ctx->comms[r], st->sym[r]);
  }
#ifdef FCO_HAVE_CUDA
  if (st->have_nccl)
    for (int r = 0; r < st->P; r++) ncclCommDestroy(st->nccl[r]);
#endif
  free(st->trows);
  free(st);
}

static void put(FILE* f, int w, double v) {
  if (v < 0 || !isfinite(v)) fprintf(f, " %*s", w, "-");
  else fprintf(f, " %*.1f", w, v);
}

static void ea_print_table(FILE* f, bench_ctx_t* ctx, const bench_row_t* rows, int nrows) {
  const bench_op_t* op = rows[0].op;
  int fused = -1, ac = -1;
  for (int j = 0; j < ctx->nimpls; j++) {
    if (ctx->impls[j] == 1) fused = j;
    if (ctx->impls[j] == FCO_IMPL_AUTO) ac = j;
  }
  /* The fused kernel's knobs (src/cuda/embedding_alltoall.cu), as the environment sets them. */
  static const char* const knobs[] = {"FCO_EA_SIGNAL_EVERY", "FCO_EA_LAND_KB", "FCO_EA_LAND_POLL",
                                      "FCO_EA_BAGS",         "FCO_EA_STREAM",  "FCO_EA_MIX",
                                      "FCO_EA_DECODE",       "FCO_EA_LEAN",    "FCO_EA_LEAN_BLOCKS",
                                      "FCO_EA_LEAN_MIX",     "FCO_EA_LEAN_TABLES", "FCO_EA_LEAN_DYN",
                                      "FCO_EA_LEAN_SPLIT",   "FCO_EA_LEAN_STAGES", "FCO_EA_LEAN_CHUNKS",
                                      "FCO_EA_LOOKUP_DYN"};
  bench_print_knobs(f, knobs, sizeof knobs / sizeof knobs[0]);
  fprintf(f, "# lookup: ours alone (compute_us); a2a: %s alone (comm_us); speedup = %s / fused; "
          "both = the two issued at once on two streams per rank; ovl = max(lookup, a2a) + 0.2 "
          "min; hbm%% = gathered bytes / lookup / %.0f GB/s\n",
          ctx->transport == FCO_TRANSPORT_NCCL ? "ncclSend/Recv" : "copies", bench_impl_label(ctx, op, 0),
          ctx->hbm_gbps);
  fprintf(f, "#%7s %4s %4s %3s %8s %4s %5s %9s %9s %9s", "B", "T/g", "D", "L", "rows", "dist",
          "dtype", "lookup", "a2a", "both");
  for (int j = 0; j < ctx->nimpls; j++) fprintf(f, " %9s", bench_impl_label(ctx, op, j));
  fprintf(f, " %9s %9s %7s %7s %5s %7s\n", "floor", "ovl", "speedup", "auto_x", "hbm%", "#wrong");
  fprintf(f, "#%7s %4s %4s %3s %8s %4s %5s %9s %9s %9s", "", "", "", "", "", "", "", "(us)", "(us)",
          "(us)");
  for (int j = 0; j < ctx->nimpls; j++) fprintf(f, " %9s", "(us)");
  fprintf(f, " %9s %9s %7s %7s %5s %7s\n", "(us)", "(us)", "(x)", "(x)", "", "");
  for (int i = 0; i < nrows; i++) {
    const bench_row_t* r = &rows[i];
    const ea_wl_t* w = &g_wl[r->count];
    fprintf(f, "%8lld %4d %4d %3d %8lld %4s %5s", w->B, w->tpg, w->D, w->L, w->rows,
            kDistCol[w->dist], fco_dtype_name(r->dtype));
    put(f, 9, r->compute_us);
    put(f, 9, r->comm_us);
    put(f, 9, r->both_us);
    for (int j = 0; j < ctx->nimpls; j++) put(f, 9, r->time_us[j]);
    put(f, 9, r->floor_us);
    double lo = r->compute_us, cm = r->comm_us;
    put(f, 9, lo > 0 && cm > 0 ? (lo > cm ? lo : cm) + 0.2 * (lo < cm ? lo : cm) : -1);
    double t0 = r->time_us[0];
    if (fused >= 0 && t0 > 0 && r->time_us[fused] > 0) fprintf(f, " %7.2f", t0 / r->time_us[fused]);
    else fprintf(f, " %7s", "-");
    if (ac >= 0 && t0 > 0 && r->time_us[ac] > 0) fprintf(f, " %7.2f", t0 / r->time_us[ac]);
    else fprintf(f, " %7s", "-");
    if (lo > 0 && ctx->on_gpu)
      fprintf(f, " %5.0f", 100.0 * (double)r->bytes / (lo * 1e-6) / (ctx->hbm_gbps * 1e9) *
                               (ctx->transport == FCO_TRANSPORT_LOCAL ? ctx->nranks : 1));
    else fprintf(f, " %5s", "-");
    bench_print_wrong(f, ctx, r);
  }
}

const bench_op_t bench_op_embedding_alltoall = {
    .name = "embedding_alltoall",
    .num_impls = FCO_EMBEDDING_ALLTOALL_NUM_IMPLS,
    .impl_name = ea_impl_name,
    .setup = ea_setup,
    .time = ea_time,
    .check = ea_check,
    .finish_row = ea_finish_row,
    .teardown = ea_teardown,
    .print_table = ea_print_table,
    .shapes = ea_shapes,
    .shapes_env = "FCO_BENCH_EA_WORKLOADS",
};
