/*
 * op_gemv_allreduce.c — the gemv_allreduce op of fco-bench: y [M, N] = Σ_r x_r · W_r^T on every
 * rank, the row-parallel linear of tensor-parallel decode.
 *
 *   fco-bench gemv_allreduce -t nccl -g 2 -d bf16 [-G 1] [-J out.json]
 *
 * Shapes (not the -b/-e byte sweep): N×K (K before the split) 8192×8192, 8192×28672, 4096×14336,
 * 16384×16384, each with M ∈ {1, 4, 16, 64}; rank r holds K_r = K/P columns (the remainder to
 * the first ranks). Env FCO_BENCH_GEMV_NK="8192x8192,4096x14336" and FCO_BENCH_GEMV_M="1,8"
 * replace the lists (M ≤ 64, N and K < 2^31, N·K ≤ 2^40: more is refused, exit 2). On the cpu
 * transport the default N and K are divided by 16 (CPU times).
 * One iteration = one fco_group with fco_gemv_allreduce on every rank; inputs rotate over sets
 * (x, W, y per rank) whose footprint exceeds 2× L2, as op_allreduce.c.
 *
 * Columns: gemv = cuBLAS GEMM alone on every rank, no communication (compute_us);
 * allreduce = fco_allreduce (AUTO: our best all-reduce) of the M×N output alone (comm_us);
 * then impl 0 (cuBLAS + ncclAllReduce / copy), oneshot, twophase, cublas_oneshot,
 * oneshot_ll, oneshot_ll_pdl, auto. oneshot_ll is a bench-only column (impl_id 4 in the JSON,
 * -D oneshot_ll): impl 1 with FCO_GEMV_AR_LL=1 (partials as LL words, src/core/internal.h "LL
 * area"), while the oneshot column runs with FCO_GEMV_AR_LL=0, so one run A/Bs the knob; "-"
 * where the LL one-shot does not apply (cpu, P = 1, M > 16, more than 16 MiB of LL words).
 * oneshot_ll runs with FCO_GEMV_PDL=0 and oneshot_ll_pdl (impl_id 5, -D oneshot_ll_pdl) with
 * FCO_GEMV_PDL=1 (programmatic dependent launch + W prefetch, src/cuda/gemv_allreduce.cu
 * "PDL"; the library's default): the two A/B PDL in one run. The other columns (auto
 * included) see FCO_GEMV_AR_LL and FCO_GEMV_PDL as the caller set them (run twice, with and
 * without FCO_GEMV_PDL=0, to A/B PDL on those).
 * Floor: max(bytes of W_r / HBM, bytes a rank must send / 364 GB/s) on nccl, where a rank must
 * send at least 2·(P−1)/P·M·N·esize (reduce-scatter + all-gather of y in the dtype; = M·N·esize
 * for P = 2); local: (P · W_r + 2·P·M·N·esize) bytes over HBM (one HBM). HBM: the copy rate
 * measured at start (ctx->hbm_gbps; 4300 GB/s on an H200, ~3000 on an H100).
 *
 * Check (#wrong), exact: x[m][k] ∈ {−1, 0, 1} and W sparse, W[n][k] = ±1 where
 * (k + 7n) mod S = 0 (k global), else 0, S = 128 · ⌈K / 32768⌉ (the stride; 128 up to K =
 * 32768): every partial and total sum is an integer of magnitude ≤ ⌈K / S⌉ ≤ 256, exact in
 * bf16 / f16 / f32 and in any summation order (with S fixed at 128, K = 2^25 summed to several
 * hundred, which bf16 rounds: correct results were counted wrong), so every impl (cuBLAS +
 * NCCL included) must produce exactly the host's integer sum,
 * computed independently on the host. Timing does not depend on the values (every byte of W
 * is streamed either way).
 * The table header echoes the FCO_GEMV_* kernel and AUTO knobs (as the environment sets them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef FCO_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif

#define GAR_MAX_NK 16
#define GAR_MAX_M 16

typedef struct {
  size_t M, N, K;      /* K before the split */
  size_t stride;       /* S of the check's sparse W (file comment) */
  fco_dtype_t dtype;
  size_t Kr[BENCH_MAX_RANKS], koff[BENCH_MAX_RANKS];
  size_t x_off[BENCH_MAX_RANKS], w_off, y_off; /* offsets in a set (per rank: same layout) */
  size_t set_bytes;
  int nsets;
  int impl;
  void* host;          /* scratch: largest of x, W, y of a rank */
  float* expect;       /* [M][N], computed on first check */
  int ar_impl;         /* for the all-reduce-alone timing */
} gar_state_t;

static size_t g_nk[GAR_MAX_NK][2], g_ms[GAR_MAX_M];
static int g_num_nk, g_num_m;

/* fco_gemv_allreduce's limits (check_common in src/ops/gemv_allreduce.c): M <= 64 (more is
 * FCO_ERR_UNSUPPORTED for every impl, auto included: a GEMM), N and K_r below 2^31, N·K_r at
 * most 2^40 elements of W; the bench bounds K before the split alike. Beyond them it refuses
 * the entry (exit 2; 4611686018427387904 wrapped its size products, a heap overflow); within
 * them every size product it forms (x, W, y per rank, times the element size and the sets)
 * fits a size_t. */
#define GAR_MAX_DIM ((1ull << 31) - 1)
#define GAR_MAX_W (1ull << 40)

/* The lists from the env; -1: an entry out of range (said on stderr; a usage error). */
static int parse_lists(const bench_ctx_t* ctx) {
  const char* nk = getenv("FCO_BENCH_GEMV_NK");
  const char* ms = getenv("FCO_BENCH_GEMV_M");
  size_t div = ctx->transport == FCO_TRANSPORT_CPU ? 16 : 1;
  int refused = 0;
  g_num_nk = g_num_m = 0;
  if (nk && *nk) {
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", nk) >= (int)sizeof buf)
      fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_NK longer than %zu bytes: cut there\n",
              sizeof buf - 1);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
      if (g_num_nk == GAR_MAX_NK) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_NK: more than %d shapes; '%s' and the rest "
                "ignored\n", GAR_MAX_NK, t);
        break;
      }
      /* digits x digits, then blanks only: "-72x40" was a 2^64-byte N, "8x8junk" taken as 8x8
       * silently, 4611686018427387904x40 wrapped the bench's size products */
      unsigned long long n = 0, k = 0;
      const char* q = t + strspn(t, " ");
      const char* e = NULL;
      const int big_n = bench_parse_dec(q, &e, GAR_MAX_DIM, &n);
      int big_k = -1;
      if (big_n >= 0 && *e == 'x') big_k = bench_parse_dec(e + 1, &e, GAR_MAX_DIM, &k);
      if (big_k < 0 || e[strspn(e, " ")] || n == 0 || k == 0) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_NK: '%s' is not NxK, ignored\n", t);
      } else if (big_n || big_k) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_NK: '%s': N and K must be below 2^31 "
                "(fco_gemv_allreduce takes N, K_r < 2^31): refused\n", t);
        refused = 1;
      } else if (n > GAR_MAX_W / k) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_NK: '%s': shape too large (N x K more than "
                "2^40 elements of W; fco_gemv_allreduce takes N x K_r <= 2^40): refused\n", t);
        refused = 1;
      } else {
        g_nk[g_num_nk][0] = (size_t)n;
        g_nk[g_num_nk][1] = (size_t)k;
        g_num_nk++;
      }
    }
  }
  if (g_num_nk == 0) {
    static const size_t dflt[4][2] = {{8192, 8192}, {8192, 28672}, {4096, 14336}, {16384, 16384}};
    for (int i = 0; i < 4; i++) {
      g_nk[i][0] = dflt[i][0] / div;
      g_nk[i][1] = dflt[i][1] / div;
    }
    g_num_nk = 4;
  }
  if (ms && *ms) {
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", ms) >= (int)sizeof buf)
      fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_M longer than %zu bytes: cut there\n",
              sizeof buf - 1);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
      if (g_num_m == GAR_MAX_M) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_M: more than %d values; '%s' and the rest "
                "ignored\n", GAR_MAX_M, t);
        break;
      }
      char* end = NULL;
      errno = 0;
      long m = strtol(t, &end, 10);
      if (end == t || *end != 0 || m < 1) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_M: '%s' is not a count >= 1, ignored\n", t);
      } else if (errno == ERANGE || m > FCO_GEMV_ALLREDUCE_MAX_M) { /* was clamped, then ran */
        fprintf(stderr, "fco-bench: FCO_BENCH_GEMV_M: '%s' is more than %d (fco_gemv_allreduce "
                "takes M <= %d; a larger M is a GEMM): refused\n", t,
                FCO_GEMV_ALLREDUCE_MAX_M, FCO_GEMV_ALLREDUCE_MAX_M);
        refused = 1;
      } else {
        g_ms[g_num_m++] = (size_t)m;
      }
    }
  }
  if (g_num_m == 0) {
    static const size_t dflt[4] = {1, 4, 16, 64};
    for (int i = 0; i < 4; i++) g_ms[i] = dflt[i];
    g_num_m = 4;
  }
  return refused ? -1 : 0;
}

static int gar_shapes(bench_ctx_t* ctx, size_t** ids) {
  if (parse_lists(ctx)) return -2;
  int n = g_num_nk * g_num_m;
  size_t* v = (size_t*)malloc((size_t)n * sizeof *v);
  if (!v) return -1;
  for (int i = 0; i < n; i++) v[i] = (size_t)i;
  *ids = v;
  return n;
}

static char* set_base(bench_ctx_t* ctx, const gar_state_t* st, int rank, int set) {
  return (char*)ctx->pool[rank] + (size_t)set * st->set_bytes;
}
static char* x_ptr(bench_ctx_t* ctx, const gar_state_t* st, int r, int s) {
  return set_base(ctx, st, r, s) + st->x_off[r];
}
static char* w_ptr(bench_ctx_t* ctx, const gar_state_t* st, int r, int s) {
  return set_base(ctx, st, r, s) + st->w_off;
}
static char* y_ptr(bench_ctx_t* ctx, const gar_state_t* st, int r, int s) {
  return set_base(ctx, st, r, s) + st->y_off;
}

static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/* x[m][k] ∈ {-1, 0, 1}; W[n][k] = ±1 on the sparse pattern (k global). */
static int x_val(unsigned seed, size_t m, size_t k) {
  return (int)(mix(((uint64_t)seed << 56) ^ (m << 40) ^ k) % 3) - 1;
}
static int w_val(unsigned seed, size_t n, size_t k) {
  return (mix(((uint64_t)seed << 56) ^ 0x5555ull << 40 ^ (n << 20) ^ k) & 1) ? 1 : -1;
}

static void put_elem(void* buf, fco_dtype_t dt, size_t i, float v) {
  switch (dt) {
    case FCO_F32: ((float*)buf)[i] = v; break;
    case FCO_F16: ((unsigned short*)buf)[i] = bench_float_to_half(v); break;
    default: ((unsigned short*)buf)[i] = bench_float_to_bf16(v); break;
  }
}
static float get_elem(const void* buf, fco_dtype_t dt, size_t i) {
  switch (dt) {
    case FCO_F32: return ((const float*)buf)[i];
    case FCO_F16: return bench_half_to_float(((const unsigned short*)buf)[i]);
    default: return bench_bf16_to_float(((const unsigned short*)buf)[i]);
  }
}

/* The bench-only columns: impl 1 with FCO_GEMV_AR_LL=1 and FCO_GEMV_PDL=0, and the same with
 * FCO_GEMV_PDL=1. */
#define GAR_IMPL_LL FCO_GEMV_ALLREDUCE_NUM_IMPLS
#define GAR_IMPL_LL_PDL (FCO_GEMV_ALLREDUCE_NUM_IMPLS + 1)

static const char* gar_impl_name(bench_ctx_t* ctx, int impl) {
  if (impl == GAR_IMPL_LL) return "oneshot_ll";
  if (impl == GAR_IMPL_LL_PDL) return "oneshot_ll_pdl";
  return fco_gemv_allreduce_impl_name(ctx->comms[0], impl);
}
static int is_ll_column(int impl) { return impl == GAR_IMPL_LL || impl == GAR_IMPL_LL_PDL; }

/* fco_gemv_ar_ll_applies (src/ops/gemv_allreduce.h), repeated: the library silently runs the
 * plain one-shot where it does not apply, which this column must not report as LL. */
static int ll_applies(const bench_ctx_t* ctx, size_t M, size_t N) {
  size_t sl = ((N + 15) / 16 * 16 * M * 8 + 255) / 256 * 256;
  return ctx->transport != FCO_TRANSPORT_CPU && ctx->nranks > 1 && M <= 16 &&
         2 * (size_t)ctx->nranks * sl <= ((size_t)16 << 20);
}

/* The env of one column: FCO_GEMV_AR_LL "1" (oneshot_ll, oneshot_ll_pdl), "0" (oneshot), the
 * caller's value (others); FCO_GEMV_PDL "0" (oneshot_ll), "1" (oneshot_ll_pdl), the caller's
 * value (others: PDL is on by default since run 63585a1, so oneshot_ll is the A/B's "off").
 * Set before the workspace query and the issue (the library reads both at every call); a
 * captured CUDA graph keeps the kernel and launch chosen at capture. */
typedef struct {
  const char* name;
  char saved[32];
  int had, pushed;
} gar_env_t;
static gar_env_t g_env[2] = {{"FCO_GEMV_AR_LL", "", 0, 0}, {"FCO_GEMV_PDL", "", 0, 0}};
static void env_set(gar_env_t* e, const char* v) {
  const char* old = getenv(e->name);
  e->had = old != NULL;
  snprintf(e->saved, sizeof e->saved, "%s", old ? old : "");
  setenv(e->name, v, 1);
  e->pushed = 1;
}
static void ll_push(int impl) {
  if (impl == 1 || is_ll_column(impl)) env_set(&g_env[0], impl == 1 ? "0" : "1");
  if (is_ll_column(impl)) env_set(&g_env[1], impl == GAR_IMPL_LL_PDL ? "1" : "0");
}
static void ll_pop(void) {
  for (int i = 0; i < 2; i++) {
    gar_env_t* e = &g_env[i];
    if (!e->pushed) continue;
    if (e->had) setenv(e->name, e->saved, 1);
    else unsetenv(e->name);
    e->pushed = 0;
  }
}

static fco_result_t gar_issue(bench_ctx_t* ctx, void* arg, int iter) {
  gar_state_t* st = (gar_state_t*)arg;
  int set = iter % st->nsets;
  fco_result_t first = FCO_OK;
  fco_group_start();
  for (int r = 0; r < ctx->nranks; r++) {
    fco_result_t e = fco_gemv_allreduce(ctx->comms[r], x_ptr(ctx, st, r, set), w_ptr(ctx, st, r, set),
                                        NULL, y_ptr(ctx, st, r, set), st->M, st->N, st->Kr[r],
                                        st->dtype, st->impl, bench_stream(ctx, r));
    if (e != FCO_OK && first == FCO_OK) {
      first = e;
      ctx->err_rank = r;
    }
  }
  return bench_group_end(ctx, first);
}

static fco_result_t gar_setup(bench_ctx_t* ctx, size_t id, fco_dtype_t dtype, bench_row_t* row,
                              void** state) {
  if ((int)id >= g_num_nk * g_num_m) return FCO_ERR_UNSUPPORTED;
  gar_state_t* st = (gar_state_t*)calloc(1, sizeof *st);
  if (!st) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  *state = st;
  const int P = ctx->nranks;
  st->N = g_nk[id / (size_t)g_num_m][0];
  st->K = g_nk[id / (size_t)g_num_m][1];
  st->M = g_ms[id % (size_t)g_num_m];
  st->dtype = dtype;
  if (st->K < (size_t)P) /* a rank would hold K_r = 0 columns (the op wants K >= 1 each) */
    return bench_fail(ctx, FCO_ERR_UNSUPPORTED, "gemv_allreduce: K = %zu does not split over %d "
                      "ranks (each rank needs K_r >= 1)", st->K, P);
  const size_t es = fco_dtype_size(dtype);
  st->stride = 128 * ((st->K + 32767) / 32768);
  size_t off = 0, kmax = 0;
  for (int r = 0; r < P; r++) {
    st->Kr[r] = st->K / (size_t)P + ((size_t)r < st->K % (size_t)P ? 1 : 0);
    st->koff[r] = off;
    off += st->Kr[r];
    if (st->Kr[r] > kmax) kmax = st->Kr[r];
  }
  /* One layout for every rank (sized for the largest K_r): [x | W | y], 256-byte aligned. */
  size_t xb = (st->M * kmax * es + 255) / 256 * 256, wb = (st->N * kmax * es + 255) / 256 * 256;
  size_t yb = (st->M * st->N * es + 255) / 256 * 256;
  for (int r = 0; r < P; r++) st->x_off[r] = 0;
  st->w_off = xb;
  st->y_off = xb + wb;
  st->set_bytes = xb + wb + yb;
  st->nsets = bench_num_sets(ctx, st->set_bytes);
  size_t hb = xb > wb ? xb : wb;
  st->host = malloc(hb > yb ? hb : yb);
  if (!st->host) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "cannot allocate %zu B", hb);
  fco_result_t r = bench_pool_reserve(ctx, (size_t)st->nsets * st->set_bytes);
  if (r != FCO_OK) return r;
  for (int rk = 0; rk < P; rk++)
    if ((r = bench_poison(ctx, rk, ctx->pool[rk], (size_t)st->nsets * st->set_bytes)) != FCO_OK)
      return r;
  for (int s = 0; s < st->nsets; s++) {
    unsigned seed = (unsigned)s + 1;
    for (int rk = 0; rk < P; rk++) {
      size_t Kr = st->Kr[rk], k0 = st->koff[rk];
      for (size_t m = 0; m < st->M; m++)
        for (size_t k = 0; k < Kr; k++) put_elem(st->host, dtype, m * Kr + k, (float)x_val(seed, m, k0 + k));
      if ((r = bench_upload(ctx, rk, x_ptr(ctx, st, rk, s), st->host, st->M * Kr * es)) != FCO_OK)
        return r;
      memset(st->host, 0, st->N * Kr * es); /* 0 is all-zero bits in every dtype */
      for (size_t n = 0; n < st->N; n++) {
        const size_t S = st->stride; /* smallest k with (k0 + k + 7n) % S == 0, then every S */
        for (size_t k = (S - (k0 + 7 * n) % S) % S; k < Kr; k += S)
          put_elem(st->host, dtype, n * Kr + k, (float)w_val(seed, n, k0 + k));
      }
      if ((r = bench_upload(ctx, rk, w_ptr(ctx, st, rk, s), st->host, st->N * Kr * es)) != FCO_OK)
        return r;
    }
  }
  row->bytes = st->N * st->Kr[0] * es; /* W_r */
  row->count = st->M * st->N;
  snprintf(row->shape_json, sizeof row->shape_json,
           "{\"M\":%zu,\"N\":%zu,\"K\":%zu,\"K_r\":%zu,\"P\":%d,\"bias\":false}", st->M, st->N,
           st->K, st->Kr[0], P);
  return FCO_OK;
}

static fco_result_t gar_time(bench_ctx_t* ctx, void* state, int impl, double* us) {
  gar_state_t* st = (gar_state_t*)state;
  if (is_ll_column(impl) && !ll_applies(ctx, st->M, st->N))
    return bench_fail(ctx, FCO_ERR_UNSUPPORTED,
                      "the LL one-shot (FCO_GEMV_AR_LL=1) runs on GPU transports with P > 1, "
                      "M <= 16 and at most 16 MiB of LL words");
  ll_push(impl);
  const int lib_impl = is_ll_column(impl) ? 1 : impl;
  size_t ws = 0;
  fco_result_t r = fco_gemv_allreduce_workspace(ctx->comms[0], st->M, st->N, st->Kr[0], st->dtype,
                                                lib_impl, &ws);
  if (r != FCO_OK) ctx->err_rank = 0;
  if (r == FCO_OK) r = bench_reserve(ctx, ws);
  if (r == FCO_OK) {
    st->impl = lib_impl;
    r = bench_time(ctx, gar_issue, st, st->nsets, us);
  }
  ll_pop();
  return r;
}

static void compute_expect(gar_state_t* st) {
  const unsigned seed = 1; /* set 0 */
  for (size_t m = 0; m < st->M; m++)
    for (size_t n = 0; n < st->N; n++) {
      int s = 0;
      for (size_t k = (st->stride - (7 * n) % st->stride) % st->stride; k < st->K;
           k += st->stride)
        s += x_val(seed, m, k) * w_val(seed, n, k);
      st->expect[m * st->N + n] = (float)s;
    }
}

static fco_result_t gar_check(bench_ctx_t* ctx, void* state, int impl, long long* wrong) {
  gar_state_t* st = (gar_state_t*)state;
  const size_t es = fco_dtype_size(st->dtype), yb = st->M * st->N * es;
  fco_result_t r;
  if (!st->expect) {
    st->expect = (float*)malloc(st->M * st->N * sizeof(float));
    if (!st->expect) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
    compute_expect(st);
  }
  for (int rk = 0; rk < ctx->nranks; rk++)
    if ((r = bench_poison(ctx, rk, y_ptr(ctx, st, rk, 0), yb)) != FCO_OK) return r;
  st->impl = is_ll_column(impl) ? 1 : impl;
  ll_push(impl);
  r = gar_issue(ctx, st, 0);
  ll_pop();
  if (r != FCO_OK) return r;
  if ((r = bench_sync(ctx)) != FCO_OK) return r;
  if ((r = bench_poll(ctx)) != FCO_OK) return r;
  long long bad = 0;
  for (int rk = 0; rk < ctx->nranks; rk++) {
    if ((r = bench_download(ctx, rk, st->host, y_ptr(ctx, st, rk, 0), yb)) != FCO_OK) return r;
    for (size_t i = 0; i < st->M * st->N; i++) {
      float got = get_elem(st->host, st->dtype, i), want = st->expect[i];
      if (got == want) continue;
      static int told;
      if (bad++ < 3 && told++ < 24)
        fprintf(stderr, "fco-bench: gemv_allreduce %s M %zu N %zu K %zu impl %s: rank %d "
                "y[%zu][%zu] = %g, want %g\n", fco_dtype_name(st->dtype), st->M, st->N, st->K,
                impl == FCO_IMPL_AUTO ? "auto" : gar_impl_name(ctx, impl), rk, i / st->N,
                i % st->N, (double)got, (double)want);
    }
  }
  *wrong = bad;
  return FCO_OK;
}

/* ---- parts alone: cuBLAS GEMM (compute_us) and fco_allreduce of y (comm_us) --------------- */
#ifdef FCO_HAVE_CUDA
#define GAR_BLAS_WS ((size_t)32 << 20)
static cublasHandle_t g_blas[BENCH_MAX_RANKS];
static void* g_blas_ws[BENCH_MAX_RANKS];

static fco_result_t gemm_issue(bench_ctx_t* ctx, void* arg, int iter) {
  gar_state_t* st = (gar_state_t*)arg;
  int set = iter % st->nsets;
  cudaDataType_t t = st->dtype == FCO_F32 ? CUDA_R_32F : st->dtype == FCO_F16 ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1.f, beta = 0.f;
  for (int r = 0; r < ctx->nranks; r++) {
    if (cudaSetDevice(ctx->devs[r]) != cudaSuccess) return bench_fail(ctx, FCO_ERR_CUDA, "cudaSetDevice");
    if (!g_blas[r]) {
      if (cublasCreate(&g_blas[r]) != CUBLAS_STATUS_SUCCESS)
        return bench_fail(ctx, FCO_ERR_CUDA, "cublasCreate (rank %d)", r);
      if (cudaMalloc(&g_blas_ws[r], GAR_BLAS_WS) != cudaSuccess)
        return bench_fail(ctx, FCO_ERR_CUDA, "cudaMalloc of a cuBLAS workspace");
    }
    /* cublasSetStream resets the workspace: set ours after it (graph capture needs it). */
    if (cublasSetStream(g_blas[r], (cudaStream_t)bench_stream(ctx, r)) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g_blas[r], g_blas_ws[r], GAR_BLAS_WS) != CUBLAS_STATUS_SUCCESS)
      return bench_fail(ctx, FCO_ERR_CUDA, "cublasSetStream/Workspace (rank %d)", r);
    cublasStatus_t s = cublasGemmEx(g_blas[r], CUBLAS_OP_T, CUBLAS_OP_N, (int)st->N, (int)st->M,
                                    (int)st->Kr[r], &alpha, w_ptr(ctx, st, r, set), t, (int)st->Kr[r],
                                    x_ptr(ctx, st, r, set), t, (int)st->Kr[r], &beta,
                                    y_ptr(ctx, st, r, set), t, (int)st->N, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
      return bench_fail(ctx, FCO_ERR_CUDA, "cublasGemmEx: status %d", (int)s);
  }
  return FCO_OK;
}

/* The all-reduce of y alone (the comm_us column: GPU transports). */
static fco_result_t ar_issue(bench_ctx_t* ctx, void* arg, int iter) {
  gar_state_t* st = (gar_state_t*)arg;
  int set = iter % st->nsets;
  fco_result_t first = FCO_OK;
  fco_group_start();
  for (int r = 0; r < ctx->nranks; r++) {
    char* y = y_ptr(ctx, st, r, set);
    fco_result_t e = fco_allreduce(ctx->comms[r], y, y, st->M * st->N, st->dtype, st->ar_impl,
                                   bench_stream(ctx, r));
    if (e != FCO_OK && first == FCO_OK) {
      first = e;
      ctx->err_rank = r;
    }
  }
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}
#endif

static fco_result_t gar_finish_row(bench_ctx_t* ctx, void* state, bench_row_t* row) {
  gar_state_t* st = (gar_state_t*)state;
  const double P = ctx->nranks, es = (double)fco_dtype_size(st->dtype);
  const double wr = (double)st->N * (double)st->Kr[0] * es, y = (double)st->M * st->N * es;
  double link = ctx->opt.link_gbps > 0 ? ctx->opt.link_gbps : BENCH_NVLINK_GBPS;
  row->floor_us = -1;
  if (ctx->transport == FCO_TRANSPORT_NCCL) {
    double hbm = wr / (ctx->hbm_gbps * 1e3), net = P > 1 ? 2 * (P - 1) / P * y / (link * 1e3) : 0;
    row->floor_us = hbm > net ? hbm : net;
  } else if (ctx->transport == FCO_TRANSPORT_LOCAL) {
    double gbps = ctx->opt.link_gbps > 0 ? ctx->opt.link_gbps : ctx->hbm_gbps;
    row->floor_us = (P * wr + 2 * P * y) / (gbps * 1e3);
  }
  row->compute_us = row->comm_us = -1;
  if (!ctx->on_gpu) return FCO_OK;
#ifdef FCO_HAVE_CUDA
  fco_result_t r = bench_time(ctx, gemm_issue, st, st->nsets, &row->compute_us);
  if (r != FCO_OK) return r;
  if (ctx->nranks > 1) {
    size_t ws = 0;
    st->ar_impl = FCO_IMPL_AUTO;
    if ((r = fco_allreduce_workspace(ctx->comms[0], st->M * st->N, st->dtype, st->ar_impl, &ws)) !=
        FCO_OK) {
      ctx->err_rank = 0;
      return r;
    }
    if ((r = bench_reserve(ctx, ws)) != FCO_OK) return r;
    if ((r = bench_time(ctx, ar_issue, st, st->nsets, &row->comm_us)) != FCO_OK) return r;
    /* the all-reduce sums the y the GEMMs write: a race on values nobody checks */
    if ((r = bench_time_both(ctx, gemm_issue, ar_issue, st, st->nsets, &row->both_us)) != FCO_OK)
      return r;
  }
#endif
  return FCO_OK;
}

static void gar_teardown(bench_ctx_t* ctx, void* state) {
  (void)ctx;
  gar_state_t* st = (gar_state_t*)state;
  if (!st) return;
  free(st->host);
  free(st->expect);
  free(st);
}

/* ---- table ---------------------------------------------------------------------------------- */
static void num(FILE* f, int w, double v) {
  if (v < 0 || v != v) fprintf(f, " %*s", w, "-");
  else fprintf(f, " %*.2f", w, v);
}

static void gar_print_table(FILE* f, bench_ctx_t* ctx, const bench_row_t* rows, int nrows) {
  if (nrows <= 0) return;
  const bench_op_t* op = rows[0].op;
  int wt[BENCH_MAX_IMPLS], ac = -1;
  for (int j = 0; j < ctx->nimpls; j++) {
    int l = (int)strlen(bench_impl_label(ctx, op, j));
    wt[j] = l + 1 > 9 ? l + 1 : 9;
    if (ctx->impls[j] == FCO_IMPL_AUTO) ac = j;
  }
  /* The kernel and AUTO knobs (src/cuda/gemv_allreduce.cu, src/ops/gemv_allreduce.c). */
  static const char* const knobs[] = {"FCO_GEMV_PIPE", "FCO_GEMV_WIDE", "FCO_GEMV_PDL",
                                      "FCO_GEMV_PDL_PREFETCH", "FCO_GEMV_AR_FUSED_MAX_N",
                                      "FCO_GEMV_AR_AUTO_MAX_M", "FCO_GEMV_AR_ONESHOT_MAX",
                                      "FCO_GEMV_AR_LOCAL_MAX_W", "FCO_GEMV_LL_FP32", "FCO_GEMV_GROUP",
                                      "FCO_GEMV_GROUP_MMA", "FCO_GEMV_GROUP_TMA", "FCO_GEMV_SPLIT",
                                      "FCO_GEMV_SPLIT_PAIR", "FCO_GEMV_TMA_STAGES",
                                      "FCO_GEMV_GROUP_FP32", "FCO_GEMV_ROUNDS",
                                      "FCO_GEMV_PAIR_FIN"};
  bench_print_knobs(f, knobs, sizeof knobs / sizeof knobs[0]);
  if (ctx->on_gpu)
    fprintf(f, "# gemv = cuBLAS GEMM alone, allreduce = fco_allreduce (auto) of y alone, both = "
            "the two issued at once on two streams per rank, same run\n");
  else /* no cuBLAS, no streams: those columns stay "-" */
    fprintf(f, "# gemv, allreduce, both: measured on the GPU transports only (\"-\" here)\n");
  fprintf(f, "#%6s %6s %3s %5s %9s %9s %9s", "N", "K", "M", "dtype", "gemv", "allreduce", "both");
  for (int j = 0; j < ctx->nimpls; j++) fprintf(f, " %*s", wt[j], bench_impl_label(ctx, op, j));
  fprintf(f, " %9s %8s", "best", "speedup");
  if (ac >= 0) fprintf(f, " %7s", "auto_x");
  fprintf(f, " %9s %6s %7s\n", "floor", "of_flr", "#wrong");
  fprintf(f, "#%6s %6s %3s %5s %9s %9s %9s", "", "", "", "", "(us)", "(us)", "(us)");
  for (int j = 0; j < ctx->nimpls; j++) fprintf(f, " %*s", wt[j], "(us)");
  fprintf(f, " %9s %8s", "", "(x)");
  if (ac >= 0) fprintf(f, " %7s", "(x)");
  fprintf(f, " %9s %6s %7s\n", "(us)", "(x)", "");
  for (int i = 0; i < nrows; i++) {
    const bench_row_t* r = &rows[i];
    /* shape_json holds M, N, K: parse them back rather than keep a second copy. */
    unsigned long long M = 0, N = 0, K = 0;
    sscanf(r->shape_json, "{\"M\":%llu,\"N\":%llu,\"K\":%llu", &M, &N, &K);
    fprintf(f, " %6llu %6llu %3llu %5s", N, K, M, fco_dtype_name(r->dtype));
    num(f, 9, r->compute_us);
    num(f, 9, r->comm_us);
    num(f, 9, r->both_us);
    int best = -1;
    for (int j = 0; j < ctx->nimpls; j++) {
      num(f, wt[j], r->time_us[j]);
      if (ctx->impls[j] >= 1 && r->time_us[j] > 0 && (best < 0 || r->time_us[j] < r->time_us[best]))
        best = j;
    }
    double t0 = r->time_us[0];
    fprintf(f, " %9s", best >= 0 ? bench_impl_label(ctx, op, best) : "-");
    num(f, 8, best >= 0 && t0 > 0 ? t0 / r->time_us[best] : -1);
    if (ac >= 0) num(f, 7, t0 > 0 && r->time_us[ac] > 0 ? t0 / r->time_us[ac] : -1);
    num(f, 9, r->floor_us);
    num(f, 6, best >= 0 && r->floor_us > 0 ? r->time_us[best] / r->floor_us : -1);
    bench_print_wrong(f, ctx, r);
  }
}

const bench_op_t bench_op_gemv_allreduce = {
    .name = "gemv_allreduce",
    .num_impls = FCO_GEMV_ALLREDUCE_NUM_IMPLS + 2, /* + oneshot_ll, oneshot_ll_pdl */
    .impl_name = gar_impl_name,
    .setup = gar_setup,
    .time = gar_time,
    .check = gar_check,
    .finish_row = gar_finish_row,
    .teardown = gar_teardown,
    .print_table = gar_print_table,
    .shapes = gar_shapes,
    .shapes_env = "FCO_BENCH_GEMV_NK / FCO_BENCH_GEMV_M",
};
