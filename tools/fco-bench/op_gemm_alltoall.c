/*
 * op_gemm_alltoall.c — the gemm_alltoall op of fco-bench: MoE expert down-projection + combine.
 *
 *   fco-bench gemm_alltoall -t nccl -g 2 -d bf16 [-G 1] [-J out.json]
 *
 * Workloads (tokens per rank, K, N, experts, top-k; the shape ids replace the -b/-e sweep):
 *   0  4096, 14336, 4096,  8, 2  balanced   (Mixtral-like)
 *   1  1024, 14336, 4096,  8, 2  balanced
 *   2   512,  2048, 7168, 32, 8  balanced   (fine-grained experts)
 *   3  1024, 14336, 4096,  8, 2  skewed: expert 0 gets 4× the average rows (skew 4)
 *   4   128,  2048, 7168, 32, 8  balanced   (decode)
 * Env FCO_BENCH_GA_SHAPES="tokens,K,N,E,topk[,skew];..." replaces the list (skew: expert 0's
 * rows as a multiple of the average tokens·topk / E, 0..E; 1 = balanced; "r" = random routing:
 * each token's top-k distinct experts drawn uniformly from a seed of the workload, route_random;
 * the table shows "r", the JSON skew −1). On the cpu transport
 * the default list's tokens, K and N are divided by 64 (CPU times); FCO_BENCH_GA_SHAPES is taken
 * as given.
 * Routing: every source rank sends tokens·topk rows: skew × tokens·topk / E to expert 0, the rest
 * split evenly over the other E − 1 experts, largest remainder (E = 8, skew 4: half the rows go
 * to expert 0, 1/14 to each other expert); experts are split evenly over the P ranks
 * (E % P == 0), expert g on rank g / (E/P).
 * So counts_r[e][s] = rows source s sends to expert r·E/P + e; a_rows = the most any rank
 * receives, out_rows = tokens·topk. W is [E/P, N, K] (torch Linear layout, FCO_W_NK).
 * One iteration = one fco_group with fco_gemm_alltoall on every rank, host hints passed (so -G 1
 * can capture impls 0 and 2; an impl the op refuses to capture shows "-"). No input rotation:
 * A and W of a rank exceed L2 by far (decode: W). A stuck peer cannot hang the bench: every wait
 * of the fused kernels ends after FCO_TIMEOUT_MS with FCO_ERR_TIMEOUT (reported, bench stops).
 *
 * Env FCO_BENCH_SYM=1: every rank's out is a symmetric buffer (fco_mem_alloc), so the fused
 * impls store peers' rows straight into it (no staging, no landing copy; FCO_GA_DIRECT=0 turns
 * that off with the same buffers); the a2a column then receives into an ordinary buffer.
 * Columns: gemm = impl 0's cuBLAS GEMMs alone, every rank (compute_us: one strided batched call
 * where every expert has the same rows, else one call per expert); a2a = the all-to-all
 * alone (nccl: grouped ncclSend/ncclRecv of the same rows on communicators of the bench's own;
 * local: the same rows by cudaMemcpyAsync) (comm_us); both = the two alone issued at once on
 * two streams per rank, nothing ordering one after the other (both_us, P > 1, bench_time_both:
 * what two streams give without fusion, power and SM sharing included) — next to the overlap
 * bound max + 0.2·min, which assumes each part keeps its speed; impl 0, tiles, chunks, auto; best;
 * speedup = impl 0 / best; floor = max(FLOPs / peak, bytes sent to peers / 364 GB/s or -L) per
 * rank on nccl (the busiest rank); local: all ranks' FLOPs / peak and 2× all bytes moved over
 * HBM (the copy rate measured at start) or -L; peak = the dense GEMM rate of device 0 in the dtype, measured in the
 * same run (cuBLAS, best of 10 calls at three large shapes; the table's "# floor's GEMM rate"
 * line) or given by FCO_BENCH_PEAK_TFLOPS, or the row's gemm column's rate where that is higher
 * (the JSON's peak_tflops: the rate the row's floor used); TFLOP/s of the best impl (all ranks'
 * FLOPs / time on local).
 * Check (#wrong): inputs are a fixed pseudo-random table (values in [−1, 1), exact in the
 * dtype) indexed by (rank, tensor, element) mod a prime; after one run on poisoned outputs,
 * every output element must be finite (every row written), and 32 rows × 64 columns per rank
 * (first and last row of every source's block, the rest spread) are compared with a float64
 * host reference: |got − ref| ≤ rtol·|ref| + atol·Σ|a·w| with (rtol, atol) = f32 (1e-5, 1e-5),
 * f16 (2e-3, 1e-3), bf16 (1e-2, 4e-3).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef FCO_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#define GA_MAXW 64
#define GA_MAXP 8
#define GA_TABLE 1000003u /* prime: no row of A or W repeats another */

typedef struct {
  int tokens, k, n, experts, topk;
  double skew; /* -1: random routing (the skew field "r") */
} ga_work_t;

static ga_work_t g_work[GA_MAXW];
static double g_flops[GA_MAXW]; /* all ranks' FLOPs per workload */
static int g_nwork;

typedef struct {
  ga_work_t w;
  fco_dtype_t dtype;
  int P, E; /* experts per rank */
  size_t es;
  int32_t* counts[GA_MAXP];  /* host [E][P] */
  int32_t recv[GA_MAXP][GA_MAXP]; /* recv[s][r]: rows s gets from r (row s = s's recv_rows_host) */
  int64_t rows[GA_MAXP];     /* rows rank r computes */
  int64_t a_rows, out_rows;
  void *a[GA_MAXP], *wt[GA_MAXP], *out[GA_MAXP], *dcounts[GA_MAXP], *scratch[GA_MAXP];
  /* FCO_BENCH_SYM=1: out comes from fco_mem_alloc (peers store into it directly) and the
   * all-to-all column receives into plain_out (NCCL's send/recv wants both sides registered
   * alike: src/ops/gemm_alltoall.h); else plain_out is NULL and that column uses out */
  int sym;
  void* plain_out[GA_MAXP];
  int impl;
  double flops_max, flops_all, bytes_max, bytes_all; /* per rank max / all ranks */
} ga_state_t;

static float* g_table;

static void table_init(void) {
  if (g_table) return;
  g_table = (float*)malloc(GA_TABLE * sizeof(float));
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (unsigned i = 0; i < GA_TABLE; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    /* multiples of 1/64 in [-1, 1): exact in bf16, f16 and f32 */
    g_table[i] = (float)((int)(x % 128) - 64) / 64.0f;
  }
}

/* Element i of tensor t (0 = A, 1 = W) of rank r. */
static float val(int r, int t, size_t i) {
  return g_table[(i + (size_t)r * 7919u + (size_t)t * 104729u) % GA_TABLE];
}

static const char* ga_impl_name(bench_ctx_t* ctx, int impl) {
  return fco_gemm_alltoall_impl_name(ctx->comms[0], impl);
}

/* Bounds of FCO_BENCH_GA_SHAPES's fields. Each of tokens, K, N, E, top-k is an int (1..2^31 − 1:
 * sscanf's %d wrapped 4294967336 to 40); tokens · top-k rows must fit the int32 counts; E at
 * most 256 a rank (FCO_GEMM_ALLTOALL_MAX_EXPERTS, fco_gemm_alltoall's local experts); and every
 * buffer of a rank (A: a_rows ≤ P · tokens · top-k rows of K, W: E · N · K, out: tokens · top-k
 * rows of N, the scratch: a_rows rows of N) at most 2^40 elements, so no size product wraps. */
#define GA_MAX_FIELD 2147483647ull
#define GA_MAX_ELEMS 1099511627776.0 /* 2^40 */

/* One field of an entry at *p: blanks, decimal digits, blanks → *v (*p past them). 0 read,
 * -1 no number (the entry names nothing), 1 more than 2^31 − 1 (not clamped: refused). */
static int ga_field(const char** p, int* v) {
  unsigned long long x = 0;
  const char* q = *p + strspn(*p, " ");
  const int big = bench_parse_dec(q, &q, GA_MAX_FIELD, &x);
  *p = q + strspn(q, " ");
  *v = (int)x;
  return big;
}

/* The list from FCO_BENCH_GA_SHAPES (or the default); -2: an entry out of range (said). */
static int ga_shapes(bench_ctx_t* ctx, size_t** ids) {
  const char* env = getenv("FCO_BENCH_GA_SHAPES");
  const int P = ctx->nranks;
  int refused = 0;
  g_nwork = 0;
  if (env && *env) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", env) >= (int)sizeof buf)
      fprintf(stderr, "fco-bench: FCO_BENCH_GA_SHAPES longer than %zu bytes: cut there\n",
              sizeof buf - 1);
    for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok;
         tok = strtok_r(NULL, ";", &save)) {
      if (g_nwork == GA_MAXW) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GA_SHAPES: more than %d workloads; '%s' and the "
                "rest ignored\n", GA_MAXW, tok);
        break;
      }
      ga_work_t w = {0, 0, 0, 0, 0, 1.0};
      /* skew: expert 0's rows / the average, 0..E (E: every row to expert 0), 1 when E == 1;
       * or "r": random routing (route(), top-k distinct experts per token, topk <= E) */
      int* const field[5] = {&w.tokens, &w.k, &w.n, &w.experts, &w.topk};
      const char* f = tok;
      int ok = 1, big = 0;
      for (int i = 0; i < 5 && ok; i++) {
        const int e = ga_field(&f, field[i]);
        ok = e >= 0 && (i == 4 || *f == ',');
        if (ok && i < 4) f++;
        big |= e > 0;
      }
      if (ok && *f == ',') {
        f++;
        while (*f == ' ') f++;
        if (f[0] == 'r' || f[0] == 'R') {
          w.skew = -1;
          f++;
        } else {
          char* end = NULL;
          w.skew = strtod(f, &end);
          ok = end != f && w.skew >= 0;
          f = end;
        }
        while (*f == ' ') f++;
        ok = ok && !*f; /* "r" or the number, then blanks only */
      } else if (ok) {
        ok = !*f; /* blanks only after top-k ("16,64,64,4,2 3" was taken as its first five
                   * fields, the rest dropped silently) */
      }
      if (ok && big) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GA_SHAPES entry '%s': a field is more than "
                "2^31 - 1: refused\n", tok);
        refused = 1;
        continue;
      }
      ok = ok && w.tokens > 0 && w.k > 0 && w.n > 0 && w.experts > 0 && w.topk > 0 &&
           (w.skew < 0 ? w.topk <= w.experts
                       : w.skew <= w.experts && (w.experts > 1 || w.skew == 1));
      if (!ok) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GA_SHAPES entry '%s' ignored (want "
                "tokens,K,N,E,topk[,skew], each > 0, then blanks only; skew in 0..E, 1 when "
                "E = 1, or r with top-k <= E)\n", tok);
        continue;
      }
      const double rows = (double)w.tokens * w.topk, K = w.k, N = w.n;
      const char* why = NULL;
      if (rows > (double)GA_MAX_FIELD)
        why = "tokens x top-k rows more than 2^31 - 1 (the counts are int32)";
      else if (w.experts > FCO_GEMM_ALLTOALL_MAX_EXPERTS * P)
        why = "more than 256 experts a rank (fco_gemm_alltoall's most) at these ranks";
      else if (P * rows * K > GA_MAX_ELEMS || (double)w.experts * N * K > GA_MAX_ELEMS ||
               P * rows * N > GA_MAX_ELEMS)
        why = "shape too large (a buffer of a rank could exceed 2^40 elements at these ranks)";
      if (why) {
        fprintf(stderr, "fco-bench: FCO_BENCH_GA_SHAPES entry '%s': %s: refused\n", tok, why);
        refused = 1;
        continue;
      }
      g_work[g_nwork++] = w;
    }
  } else {
    const ga_work_t d[] = {{4096, 14336, 4096, 8, 2, 1}, {1024, 14336, 4096, 8, 2, 1},
                           {512, 2048, 7168, 32, 8, 1},  {1024, 14336, 4096, 8, 2, 4},
                           {128, 2048, 7168, 32, 8, 1}};
    for (int i = 0; i < 5; i++) {
      g_work[g_nwork] = d[i];
      if (!ctx->on_gpu) {
        g_work[g_nwork].tokens = d[i].tokens / 64 > 2 ? d[i].tokens / 64 : 2;
        g_work[g_nwork].k /= 64;
        g_work[g_nwork].n /= 64;
      }
      g_nwork++;
    }
  }
  if (refused) return -2;
  *ids = (size_t*)malloc((size_t)(g_nwork > 0 ? g_nwork : 1) * sizeof(size_t));
  for (int i = 0; i < g_nwork && *ids; i++) (*ids)[i] = (size_t)i;
  return *ids ? g_nwork : -1;
}

/* Rows each source sends to each global expert: expert 0 gets skew × the average
 * (tokens·topk / E), the other E − 1 experts share the rest evenly; floors, then one more row
 * to the largest remainders (ties: the lower expert). bench/gemm_alltoall_torch.py's route()
 * computes the same numbers (same float operations). */
static uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Random routing (skew "r"): every token picks top-k distinct experts uniformly, by a partial
 * Fisher-Yates shuffle of one permutation of the experts kept from token to token (its picks
 * are uniform whatever it holds), draws from splitmix64 seeded by the workload — the
 * multinomial imbalance of a router with random logits, the same on every run and in
 * bench/gemm_alltoall_torch.py's route() (the same integer operations). Every source routes
 * alike, as in the skew mode. */
static int route_random(const ga_work_t* w, int64_t* per_expert) {
  const int E = w->experts;
  int* perm = (int*)malloc((size_t)E * sizeof(int));
  if (!perm) return -1;
  for (int g = 0; g < E; g++) {
    perm[g] = g;
    per_expert[g] = 0;
  }
  uint64_t x = 0x5EEDull + (uint64_t)w->tokens * 1000003u + (uint64_t)E * 1009u + (uint64_t)w->topk;
  for (int t = 0; t < w->tokens; t++)
    for (int j = 0; j < w->topk; j++) {
      const int i = j + (int)(splitmix64(&x) % (uint64_t)(E - j));
      const int tmp = perm[j];
      perm[j] = perm[i];
      perm[i] = tmp;
      per_expert[perm[j]]++;
    }
  free(perm);
  return 0;
}

/* Rows per expert of the workload's routing; -1: out of host memory. */
static int route(const ga_work_t* w, int64_t* per_expert) {
  if (w->skew < 0) return route_random(w, per_expert);
  const int E = w->experts;
  const int64_t total = (int64_t)w->tokens * w->topk;
  double* rem = (double*)malloc((size_t)E * sizeof(double));
  if (!rem) return -1;
  int64_t given = 0;
  for (int g = 0; g < E; g++) {
    double x = g == 0 ? (double)total * w->skew / E
                      : (double)total * (E - w->skew) / ((double)E * (E - 1));
    per_expert[g] = (int64_t)floor(x);
    rem[g] = x - floor(x);
    given += per_expert[g];
  }
  while (given < total) {
    int best = 0;
    for (int g = 1; g < E; g++)
      if (rem[g] > rem[best]) best = g;
    per_expert[best]++;
    rem[best] = -1;
    given++;
  }
  free(rem);
  return 0;
}

static void free_state(bench_ctx_t* ctx, ga_state_t* st) {
  for (int r = 0; r < st->P; r++) {
    free(st->counts[r]);
    if (st->sym && st->out[r]) {
      (void)fco_mem_free(ctx->comms[r], st->out[r]);
      st->out[r] = NULL;
    }
    void* p[] = {st->a[r], st->wt[r], st->out[r], st->dcounts[r], st->scratch[r], st->plain_out[r]};
    for (int i = 0; i < 6; i++) {
      if (!p[i]) continue;
#ifdef FCO_HAVE_CUDA
      if (ctx->on_gpu) {
        cudaSetDevice(ctx->devs[r]);
        cudaFree(p[i]);
        continue;
      }
#endif
      free(p[i]);
    }
  }
  free(st);
}

static fco_result_t alloc_buf(bench_ctx_t* ctx, int r, size_t bytes, void** p) {
  if (bytes == 0) bytes = 16;
#ifdef FCO_HAVE_CUDA
  if (ctx->on_gpu) {
    if (cudaSetDevice(ctx->devs[r]) != cudaSuccess || cudaMalloc(p, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "cudaMalloc(%zu) on rank %d", bytes, r);
    }
    return FCO_OK;
  }
#endif
  *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  return *p ? FCO_OK : bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "malloc(%zu)", bytes);
}

static void put_elem(void* buf, size_t i, float v, fco_dtype_t dt) {
  if (dt == FCO_F32) ((float*)buf)[i] = v;
  else if (dt == FCO_F16) ((unsigned short*)buf)[i] = bench_float_to_half(v);
  else ((unsigned short*)buf)[i] = bench_float_to_bf16(v);
}

static float get_elem(const void* buf, size_t i, fco_dtype_t dt) {
  if (dt == FCO_F32) return ((const float*)buf)[i];
  if (dt == FCO_F16) return bench_half_to_float(((const unsigned short*)buf)[i]);
  return bench_bf16_to_float(((const unsigned short*)buf)[i]);
}

/* Fill a device tensor of n elements with val(r, t, .) through a host staging chunk. */
static fco_result_t fill(bench_ctx_t* ctx, int r, int t, void* dst, size_t n, fco_dtype_t dt) {
  const size_t chunk = (size_t)8 << 20;
  size_t es = fco_dtype_size(dt);
  void* h = malloc((n < chunk ? n : chunk) * es + 16);
  if (!h) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "host staging");
  fco_result_t res = FCO_OK;
  for (size_t i0 = 0; i0 < n && res == FCO_OK; i0 += chunk) {
    size_t m = n - i0 < chunk ? n - i0 : chunk;
    for (size_t i = 0; i < m; i++) put_elem(h, i, val(r, t, i0 + i), dt);
    res = bench_upload(ctx, r, (char*)dst + i0 * es, h, m * es);
  }
  free(h);
  return res;
}

static fco_result_t ga_setup(bench_ctx_t* ctx, size_t id, fco_dtype_t dtype, bench_row_t* row,
                             void** state) {
  if ((int)id >= g_nwork) return FCO_ERR_UNSUPPORTED;
  const ga_work_t* w = &g_work[id];
  const int P = ctx->nranks;
  if (P > GA_MAXP) /* the bench's tables (recv, counts, buffers per rank); libfco takes more */
    return bench_fail(ctx, FCO_ERR_UNSUPPORTED, "gemm_alltoall: fco-bench runs this op on at most "
                      "%d ranks, not %d", GA_MAXP, P);
  if (w->experts % P)
    return bench_fail(ctx, FCO_ERR_UNSUPPORTED, "gemm_alltoall: %d experts do not split over %d ranks",
                      w->experts, P);
  table_init();
  ga_state_t* st = (ga_state_t*)calloc(1, sizeof *st);
  if (!st) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  *state = st;
  st->w = *w;
  st->dtype = dtype;
  st->P = P;
  st->sym = fco_env_flag("FCO_BENCH_SYM", 0);
  st->E = w->experts / P;
  st->es = fco_dtype_size(dtype);
  int64_t* per = (int64_t*)calloc((size_t)w->experts, sizeof(int64_t));
  if (!per || route(w, per)) {
    free(per);
    return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  for (int r = 0; r < P; r++) {
    st->counts[r] = (int32_t*)calloc((size_t)st->E * P, sizeof(int32_t));
    if (!st->counts[r]) {
      free(per);
      return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    for (int e = 0; e < st->E; e++)
      for (int s = 0; s < P; s++) {
        int32_t c = (int32_t)per[r * st->E + e]; /* every source routes alike */
        st->counts[r][e * P + s] = c;
        st->recv[s][r] += c;
        st->rows[r] += c;
      }
    if (st->rows[r] > st->a_rows) st->a_rows = st->rows[r];
  }
  free(per);
  st->out_rows = (int64_t)w->tokens * w->topk;
  const double K = w->k, N = w->n;
  for (int r = 0; r < P; r++) {
    double f = 2.0 * (double)st->rows[r] * K * N, b = 0;
    for (int s = 0; s < P; s++)
      if (s != r) b += (double)st->recv[s][r] * N * (double)st->es;
    st->flops_all += f;
    st->bytes_all += b;
    if (f > st->flops_max) st->flops_max = f;
    if (b > st->bytes_max) st->bytes_max = b;
  }
  fco_result_t res = FCO_OK;
  for (int r = 0; r < P && res == FCO_OK; r++) {
    size_t na = (size_t)st->a_rows * w->k, nw = (size_t)st->E * w->k * w->n;
    size_t no = (size_t)st->out_rows * w->n;
    if ((res = alloc_buf(ctx, r, na * st->es, &st->a[r])) != FCO_OK) break;
    if ((res = alloc_buf(ctx, r, nw * st->es, &st->wt[r])) != FCO_OK) break;
    if (st->sym) {
      if ((res = fco_mem_alloc(ctx->comms[r], no * st->es, &st->out[r])) != FCO_OK) {
        bench_fail(ctx, res, "fco_mem_alloc(%zu) on rank %d: %s", no * st->es, r,
                   fco_last_error(ctx->comms[r]));
        break;
      }
      if ((res = alloc_buf(ctx, r, no * st->es, &st->plain_out[r])) != FCO_OK) break;
    } else if ((res = alloc_buf(ctx, r, no * st->es, &st->out[r])) != FCO_OK) {
      break;
    }
    if ((res = alloc_buf(ctx, r, (size_t)st->a_rows * w->n * st->es, &st->scratch[r])) != FCO_OK) break;
    if ((res = alloc_buf(ctx, r, (size_t)st->E * P * 4, &st->dcounts[r])) != FCO_OK) break;
    if ((res = fill(ctx, r, 0, st->a[r], na, dtype)) != FCO_OK) break;
    if ((res = fill(ctx, r, 1, st->wt[r], nw, dtype)) != FCO_OK) break;
    res = bench_upload(ctx, r, st->dcounts[r], st->counts[r], (size_t)st->E * P * 4);
  }
  if (res != FCO_OK) return res;
  row->bytes = (size_t)st->bytes_max;
  g_flops[id] = st->flops_all;
  row->count = id;
  snprintf(row->shape_json, sizeof row->shape_json,
           "{\"tokens\":%d,\"k\":%d,\"n\":%d,\"experts\":%d,\"topk\":%d,\"skew\":%g,"
           "\"ranks\":%d,\"a_rows\":%lld,\"out_rows\":%lld}",
           w->tokens, w->k, w->n, w->experts, w->topk, w->skew, P, (long long)st->a_rows,
           (long long)st->out_rows);
  return FCO_OK;
}

static fco_result_t ga_issue(bench_ctx_t* ctx, void* arg, int iter) {
  (void)iter;
  ga_state_t* st = (ga_state_t*)arg;
  fco_result_t first = FCO_OK;
  fco_group_start();
  for (int r = 0; r < st->P; r++) {
    /* The host hints are read when the group executes (fco_group_end), not here: they must
     * outlive the group, so they live in the state (st->recv[r] = rows r gets from each s). */
    fco_result_t e = fco_gemm_alltoall(ctx->comms[r], st->a[r], st->a_rows, st->wt[r], FCO_W_NK,
                                       st->E, (const int32_t*)st->dcounts[r], st->counts[r],
                                       st->recv[r], st->out[r], st->out_rows, st->w.k, st->w.n,
                                       st->dtype, st->impl, bench_stream(ctx, r));
    if (e != FCO_OK && first == FCO_OK) {
      first = e;
      ctx->err_rank = r;
    }
  }
  return bench_group_end(ctx, first);
}

static fco_result_t ga_time(bench_ctx_t* ctx, void* state, int impl, double* us) {
  ga_state_t* st = (ga_state_t*)state;
  size_t ws = 0;
  fco_result_t r = fco_gemm_alltoall_workspace(ctx->comms[0], st->a_rows, st->out_rows, st->w.k,
                                               st->w.n, st->dtype, impl, &ws);
  if (r != FCO_OK) {
    ctx->err_rank = 0;
    return r;
  }
  if ((r = bench_reserve(ctx, ws)) != FCO_OK) return r;
  st->impl = impl;
  r = bench_time(ctx, ga_issue, st, 1, us);
  if (r == FCO_ERR_INVALID_USAGE && ctx->opt.graph) {
    /* The op refuses this impl in a CUDA graph before issuing anything: "-", not a failure. */
    fprintf(stderr, "fco-bench: gemm_alltoall impl %s cannot be captured: %s\n",
            impl == FCO_IMPL_AUTO ? "auto" : ga_impl_name(ctx, impl),
            fco_last_error(ctx->comms[ctx->err_rank >= 0 ? ctx->err_rank : 0]));
    return FCO_ERR_UNSUPPORTED;
  }
  return r;
}

/* Row `row` appended to the ns rows of `sample` (room 32) unless already there; the new ns. */
static int add_sample(int64_t* sample, int ns, int64_t row) {
  for (int j = 0; j < ns; j++)
    if (sample[j] == row) return ns;
  if (ns < 32) sample[ns++] = row;
  return ns;
}

static fco_result_t ga_check(bench_ctx_t* ctx, void* state, int impl, long long* wrong) {
  ga_state_t* st = (ga_state_t*)state;
  const int P = st->P, K = st->w.k, N = st->w.n;
  const size_t ob = (size_t)st->out_rows * N * st->es;
  fco_result_t r;
  for (int q = 0; q < P; q++)
    if ((r = bench_poison(ctx, q, st->out[q], ob)) != FCO_OK) return r;
  st->impl = impl;
  if ((r = ga_issue(ctx, st, 0)) != FCO_OK) return r;
  if ((r = bench_sync(ctx)) != FCO_OK) return r;
  if ((r = bench_poll(ctx)) != FCO_OK) return r;
  double rtol = st->dtype == FCO_F32 ? 1e-5 : st->dtype == FCO_F16 ? 2e-3 : 1e-2;
  double atol = st->dtype == FCO_F32 ? 1e-5 : st->dtype == FCO_F16 ? 1e-3 : 4e-3;
  void* h = malloc(ob + 16);
  if (!h) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "host copy of out");
  long long bad = 0;
  int shown = 0; /* mismatches printed by this check */
  for (int s = 0; s < P; s++) {
    if ((r = bench_download(ctx, s, h, st->out[s], ob)) != FCO_OK) break;
    int64_t total = 0;
    for (int q = 0; q < P; q++) total += st->recv[s][q];
    for (size_t i = 0; i < (size_t)total * N; i++) {
      float x = get_elem(h, i, st->dtype);
      if (!isfinite(x)) bad++;
    }
    /* Sampled rows: the first and last row of every source's block, then spread; each row once
     * (a spread pick can land on a block's first / last row or repeat on small outputs, and a
     * repeated row counted its wrong elements twice). */
    int64_t sample[32];
    int ns = 0;
    for (int q = 0, off = 0; q < P; off += st->recv[s][q], q++)
      if (st->recv[s][q] > 0 && ns + 2 <= 16) {
        ns = add_sample(sample, ns, off);
        ns = add_sample(sample, ns, off + st->recv[s][q] - 1);
      }
    for (int k = 0; total > 0 && k < 32; k++)
      ns = add_sample(sample, ns, (int64_t)((total - 1) * (k + 1) / 17) % total);
    for (int j = 0; j < ns; j++) {
      int64_t o = sample[j], rem = o;
      int q = 0;
      while (q < P && rem >= st->recv[s][q]) rem -= st->recv[s][q++];
      if (q >= P) continue;
      int e = 0;
      while (e < st->E && rem >= st->counts[q][e * P + s]) {
        rem -= st->counts[q][e * P + s];
        e++;
      }
      if (e >= st->E) continue;
      int64_t arow = 0; /* q's A row of this output row */
      for (int i = 0; i < e * P + s; i++) arow += st->counts[q][i];
      arow += rem;
      int ncols = N < 64 ? N : 64;
      for (int c = 0; c < ncols; c++) {
        int n = ncols == N ? c : (int)((int64_t)(N - 1) * c / (ncols - 1));
        double ref = 0, mag = 0;
        for (int k = 0; k < K; k++) {
          double x = (double)val(q, 0, (size_t)arow * K + k) *
                     (double)val(q, 1, ((size_t)e * N + n) * K + k);
          ref += x;
          mag += fabs(x);
        }
        double got = get_elem(h, (size_t)o * N + n, st->dtype);
        const int finite = isfinite(got);
        if (finite && fabs(got - ref) <= rtol * fabs(ref) + atol * mag) continue;
        bad += finite; /* a non-finite element is counted by the scan above already */
        static int told;
        if (shown++ < 3 && told++ < 24)
          fprintf(stderr, "fco-bench: gemm_alltoall %s impl %s: rank %d out[%lld][%d] = %g, want %g\n",
                  fco_dtype_name(st->dtype), impl == FCO_IMPL_AUTO ? "auto" : ga_impl_name(ctx, impl),
                  s, (long long)o, n, got, ref);
      }
    }
  }
  free(h);
  *wrong = bad;
  return r;
}

/* ---- parts alone: cuBLAS GEMM (compute_us) and the all-to-all (comm_us) -------------------- */
#ifdef FCO_HAVE_CUDA
#define GA_BLAS_WS ((size_t)32 << 20)
static cublasHandle_t g_blas[GA_MAXP];
static void* g_blas_ws[GA_MAXP];
static ncclComm_t g_nccl[GA_MAXP];
static int g_have_nccl;

static fco_result_t gemm_issue(bench_ctx_t* ctx, void* arg, int iter) {
  (void)iter;
  ga_state_t* st = (ga_state_t*)arg;
  const int P = st->P, K = st->w.k, N = st->w.n;
  cudaDataType_t t = st->dtype == FCO_F32 ? CUDA_R_32F : st->dtype == FCO_F16 ? CUDA_R_16F : CUDA_R_16BF;
  const float one = 1.f, zero = 0.f;
  for (int r = 0; r < P; r++) {
    if (cudaSetDevice(ctx->devs[r]) != cudaSuccess)
      return bench_fail(ctx, FCO_ERR_CUDA, "cudaSetDevice(%d)", ctx->devs[r]);
    if (!g_blas[r]) {
      if (cublasCreate(&g_blas[r]) != CUBLAS_STATUS_SUCCESS || cudaMalloc(&g_blas_ws[r], GA_BLAS_WS) != cudaSuccess)
        return bench_fail(ctx, FCO_ERR_CUDA, "cublasCreate / workspace (rank %d)", r);
    }
    /* cublasSetStream resets the workspace: set ours after it (graph capture needs it). */
    if (cublasSetStream(g_blas[r], (cudaStream_t)bench_stream(ctx, r)) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g_blas[r], g_blas_ws[r], GA_BLAS_WS) != CUBLAS_STATUS_SUCCESS)
      return bench_fail(ctx, FCO_ERR_CUDA, "cublasSetStream/Workspace (rank %d)", r);
    /* impl 0's GEMMs (src/cuda/gemm_alltoall.cu, gemm_all): one strided batched call where
     * libfco's rule says so (every expert the same small rows, FCO_GA_BLAS not "loop"), else one
     * call per expert */
    static const char* const kBlas[] = {"batched", "loop", NULL};
    const int loop = fco_env_choice("FCO_GA_BLAS", kBlas, 0) == 1;
    const int64_t same = fco_ga_batched_rows(st->counts[r], st->E, P, N, loop);
    if (same > 0) {
      cublasStatus_t bs = cublasGemmStridedBatchedEx(
          g_blas[r], CUBLAS_OP_T, CUBLAS_OP_N, N, (int)same, K, &one, st->wt[r], t, K,
          (long long)K * N, st->a[r], t, K, (long long)same * K, &zero, st->scratch[r], t, N,
          (long long)same * N, st->E, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (bs != CUBLAS_STATUS_SUCCESS)
        return bench_fail(ctx, FCO_ERR_CUDA, "cublasGemmStridedBatchedEx: status %d", (int)bs);
      continue;
    }
    int64_t row = 0;
    for (int e = 0; e < st->E; e++) {
      int64_t m = 0;
      for (int s = 0; s < P; s++) m += st->counts[r][e * P + s];
      if (m == 0) continue;
      cublasStatus_t bs = cublasGemmEx(
          g_blas[r], CUBLAS_OP_T, CUBLAS_OP_N, N, (int)m, K, &one,
          (const char*)st->wt[r] + (size_t)e * K * N * st->es, t, K,
          (const char*)st->a[r] + (size_t)row * K * st->es, t, K, &zero,
          (char*)st->scratch[r] + (size_t)row * N * st->es, t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (bs != CUBLAS_STATUS_SUCCESS) return bench_fail(ctx, FCO_ERR_CUDA, "cublasGemmEx: status %d", (int)bs);
      row += m;
    }
  }
  return FCO_OK;
}

/* The combine's data movement alone: rank r's rows for s (from scratch, expert-major) into s's
 * out. nccl: grouped send/recv per destination; local: one cudaMemcpyAsync per segment. */
static fco_result_t a2a_issue(bench_ctx_t* ctx, void* arg, int iter) {
  (void)iter;
  ga_state_t* st = (ga_state_t*)arg;
  const int P = st->P;
  const size_t rb = (size_t)st->w.n * st->es;
  if (ctx->transport == FCO_TRANSPORT_NCCL) {
    ncclDataType_t t = st->dtype == FCO_F32 ? ncclFloat32 : st->dtype == FCO_F16 ? ncclFloat16 : ncclBfloat16;
    if (ncclGroupStart() != ncclSuccess) return bench_fail(ctx, FCO_ERR_NCCL, "ncclGroupStart");
    ncclResult_t bad = ncclSuccess;
    for (int r = 0; r < P && bad == ncclSuccess; r++) {
      int64_t soff = 0, roff = 0;
      for (int s = 0; s < P && bad == ncclSuccess; s++) {
        int64_t send = st->recv[s][r], recv = st->recv[r][s];
        cudaStream_t sr = (cudaStream_t)bench_stream(ctx, r);
        if (send > 0)
          bad = ncclSend((char*)st->scratch[r] + soff * rb, (size_t)send * st->w.n, t, s, g_nccl[r], sr);
        if (recv > 0 && bad == ncclSuccess)
          bad = ncclRecv((char*)(st->plain_out[r] ? st->plain_out[r] : st->out[r]) + roff * rb, (size_t)recv * st->w.n, t, s, g_nccl[r], sr);
        soff += send;
        roff += recv;
      }
    }
    ncclResult_t ge = ncclGroupEnd(); /* always: balances the group */
    if (bad != ncclSuccess || ge != ncclSuccess)
      return bench_fail(ctx, FCO_ERR_NCCL, "all-to-all column: %s",
                        ncclGetErrorString(bad != ncclSuccess ? bad : ge));
    return FCO_OK;
  }
  cudaStream_t s0 = (cudaStream_t)bench_stream(ctx, 0);
  for (int s = 0; s < P; s++) {
    int64_t drow = 0;
    for (int r = 0; r < P; r++) {
      int64_t arow = 0;
      for (int e = 0; e < st->E; e++)
        for (int q = 0; q < P; q++) {
          int64_t n = st->counts[r][e * P + q];
          if (q == s && n > 0) {
            if (cudaMemcpyAsync((char*)(st->plain_out[s] ? st->plain_out[s] : st->out[s]) + drow * rb, (char*)st->scratch[r] + arow * rb,
                                (size_t)n * rb, cudaMemcpyDeviceToDevice, s0) != cudaSuccess)
              return bench_fail(ctx, FCO_ERR_CUDA, "cudaMemcpyAsync");
            drow += n;
          }
          arow += n;
        }
    }
  }
  return FCO_OK;
}

#endif

#ifdef FCO_HAVE_CUDA
/* The floor's GEMM rate (TFLOP/s) per dtype: FCO_BENCH_PEAK_TFLOPS when set (> 0), else measured
 * once per dtype in this run (ga_peak_measure), after the first row's columns (a warm GPU). */
static double g_peak[FCO_NUM_DTYPES];
static int g_peak_given;

static double peak_given(void) {
  const char* v = getenv("FCO_BENCH_PEAK_TFLOPS");
  if (!v || !*v) return 0;
  char* end = NULL;
  double x = strtod(v, &end);
  if (end == v || *end || !(x > 0)) {
    static int said;
    if (!said++)
      fprintf(stderr, "fco-bench: FCO_BENCH_PEAK_TFLOPS=\"%s\" is not a positive number: "
              "ignored, the peak is measured\n", v);
    return 0;
  }
  return x;
}

/* The dense GEMM rate of device devs[0] in the row's dtype, as impl 0 computes it (cublasGemmEx,
 * fp32 compute, no TF32): the best of GA_PEAK_ITERS timed calls at each probe shape, the highest
 * over the shapes. Inputs: the bench's pseudo-random table (values in [−1, 1), not zeros, which
 * would draw less power than real data), one buffer read as both operands. */
#define GA_PEAK_ITERS 10
static fco_result_t ga_peak_measure(bench_ctx_t* ctx, fco_dtype_t dt, double* tflops) {
  static const int shapes16[][3] = {{8192, 8192, 8192}, {4096, 4096, 14336}, {16384, 4096, 4096}};
  static const int shapes32[][3] = {{4096, 4096, 4096}, {8192, 4096, 2048}};
  const int (*sh)[3] = dt == FCO_F32 ? shapes32 : shapes16;
  const int nsh = dt == FCO_F32 ? 2 : 3;
  const size_t es = dt == FCO_F32 ? 4 : 2;
  size_t n_in = 0, n_out = 0;
  for (int i = 0; i < nsh; i++) {
    size_t a = (size_t)sh[i][0] * sh[i][2], b = (size_t)sh[i][1] * sh[i][2];
    size_t in = a > b ? a : b, out = (size_t)sh[i][0] * sh[i][1];
    if (in > n_in) n_in = in;
    if (out > n_out) n_out = out;
  }
  fco_result_t r = FCO_OK;
  void *in = NULL, *out = NULL, *ws = NULL, *host = NULL;
  cublasHandle_t h = NULL;
  cudaStream_t s = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  *tflops = 0;
  if (cudaSetDevice(ctx->devs[0]) != cudaSuccess || cudaMalloc(&in, n_in * es) != cudaSuccess ||
      cudaMalloc(&out, n_out * es) != cudaSuccess || cudaMalloc(&ws, GA_BLAS_WS) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess ||
      !(host = malloc(n_in * es))) {
    r = bench_fail(ctx, FCO_ERR_CUDA, "peak GEMM probe: %zu MiB of device memory, stream, events",
                   (n_in + n_out) * es >> 20);
    goto done;
  }
  table_init();
  for (size_t i = 0; i < n_in; i++) {
    const float v = g_table[i % GA_TABLE];
    if (dt == FCO_F32) ((float*)host)[i] = v;
    else if (dt == FCO_F16) ((unsigned short*)host)[i] = bench_float_to_half(v);
    else ((unsigned short*)host)[i] = bench_float_to_bf16(v);
  }
  if (cudaMemcpy(in, host, n_in * es, cudaMemcpyHostToDevice) != cudaSuccess) {
    r = bench_fail(ctx, FCO_ERR_CUDA, "peak GEMM probe: upload");
    goto done;
  }
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(h, ws, GA_BLAS_WS) != CUBLAS_STATUS_SUCCESS) {
    r = bench_fail(ctx, FCO_ERR_CUDA, "peak GEMM probe: cuBLAS handle");
    goto done;
  }
  const cudaDataType_t t = dt == FCO_F32 ? CUDA_R_32F : dt == FCO_F16 ? CUDA_R_16F : CUDA_R_16BF;
  const float one = 1.f, zero = 0.f;
  for (int i = 0; i < nsh; i++) {
    const int m = sh[i][0], n = sh[i][1], k = sh[i][2];
    float best_ms = 0;
    for (int it = 0; it < 3 + GA_PEAK_ITERS; it++) { /* 3 untimed */
      cudaEventRecord(e0, s);
      cublasStatus_t bs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, in, t, k, in,
                                       t, k, &zero, out, t, n, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT);
      cudaEventRecord(e1, s);
      float ms = 0;
      if (bs != CUBLAS_STATUS_SUCCESS || cudaEventSynchronize(e1) != cudaSuccess ||
          cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
        r = bench_fail(ctx, FCO_ERR_CUDA, "peak GEMM probe: cublasGemmEx %dx%dx%d (status %d)", m,
                       n, k, (int)bs);
        goto done;
      }
      if (it >= 3 && ms > 0 && (best_ms == 0 || ms < best_ms)) best_ms = ms;
    }
    const double rate = 2.0 * m * n * k / (best_ms * 1e-3) / 1e12;
    if (rate > *tflops) *tflops = rate;
  }
done:
  if (h) cublasDestroy(h);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (s) cudaStreamDestroy(s);
  cudaFree(in);
  cudaFree(out);
  cudaFree(ws);
  free(host);
  return r;
}
#endif

static fco_result_t ga_finish_row(bench_ctx_t* ctx, void* state, bench_row_t* row) {
  row->compute_us = row->comm_us = row->both_us = -1;
  row->floor_us = -1;
#ifdef FCO_HAVE_CUDA
  ga_state_t* st = (ga_state_t*)state;
  if (!ctx->on_gpu) return FCO_OK;
  fco_result_t r = FCO_OK;
  double* peak = &g_peak[st->dtype];
  if (*peak <= 0) {
    *peak = peak_given();
    g_peak_given = *peak > 0;
    if (!g_peak_given && (r = ga_peak_measure(ctx, st->dtype, peak)) != FCO_OK) return r;
  }
  r = bench_time(ctx, gemm_issue, st, 1, &row->compute_us);
  if (r != FCO_OK) return r;
  /* The floor's rate: the probe's, or the gemm column's own where that is higher (a floor above
   * what the GEMMs alone took would not bound anything). nccl: the busiest rank; local: all. */
  const int nccl = ctx->transport == FCO_TRANSPORT_NCCL;
  const double flops = nccl ? st->flops_max : st->flops_all;
  const double own = row->compute_us > 0 ? flops / (row->compute_us * 1e-6) / 1e12 : 0;
  row->peak_tflops = own > *peak ? own : *peak;
  /* -L: the link's GB/s on nccl, the HBM's on local (as the other ops' floors) */
  const double gbps = ctx->opt.link_gbps > 0 ? ctx->opt.link_gbps
                      : nccl                 ? BENCH_NVLINK_GBPS
                                             : ctx->hbm_gbps;
  const double f = flops / (row->peak_tflops * 1e12),
               b = nccl ? st->bytes_max / (gbps * 1e9) : 2 * st->bytes_all / (gbps * 1e9);
  row->floor_us = 1e6 * (f > b ? f : b);
  if (ctx->transport == FCO_TRANSPORT_NCCL && !g_have_nccl) {
    if (ncclCommInitAll(g_nccl, ctx->nranks, ctx->devs) != ncclSuccess)
      return bench_fail(ctx, FCO_ERR_NCCL, "ncclCommInitAll for the all-to-all column");
    g_have_nccl = 1;
  }
  r = bench_time(ctx, a2a_issue, st, 1, &row->comm_us);
  if (r != FCO_OK) return r;
  /* the all-to-all reads the scratch the GEMMs write: a race on values nobody checks */
  if (ctx->nranks > 1 && (r = bench_time_both(ctx, gemm_issue, a2a_issue, st, 1,
                                              &row->both_us)) != FCO_OK)
    return r;
#else
  (void)ctx;
#endif
  return FCO_OK;
}

static void ga_teardown(bench_ctx_t* ctx, void* state) {
  if (state) free_state(ctx, (ga_state_t*)state);
}

static void num(FILE* f, int w, double v) {
  if (v < 0 || !isfinite(v)) fprintf(f, " %*s", w, "-");
  else fprintf(f, " %*.1f", w, v);
}

static void ga_print_table(FILE* f, bench_ctx_t* ctx, const bench_row_t* rows, int nrows) {
  const bench_op_t* op = rows[0].op;
#ifdef FCO_HAVE_CUDA
  if (g_peak[rows[0].dtype] > 0)
    fprintf(f, "# floor's GEMM rate: %.1f TFLOP/s %s (%s), or the row's gemm column's where "
            "higher (the JSON's peak_tflops)\n", g_peak[rows[0].dtype],
            fco_dtype_name(rows[0].dtype),
            g_peak_given ? "given by FCO_BENCH_PEAK_TFLOPS"
                         : "measured in this run: cuBLAS GemmEx, the best of 10 calls at 8192^3, "
                           "4096x4096x14336 and 16384x4096x4096 (f32: 4096^3, 8192x4096x2048), "
                           "device 0");
#endif
  fprintf(f, "# %-26s %9s %9s %9s", "tokens,K,N,E,topk,skew", "gemm", "a2a", "both");
  for (int j = 0; j < ctx->nimpls; j++) fprintf(f, " %9s", bench_impl_label(ctx, op, j));
  fprintf(f, " %7s %8s %7s %9s %8s %7s\n", "best", "speedup", "auto_x", "floor", "TFLOP/s", "#wrong");
  fprintf(f, "# %-26s %9s %9s %9s", "", "(us)", "(us)", "(us)");
  for (int j = 0; j < ctx->nimpls; j++) fprintf(f, " %9s", "(us)");
  fprintf(f, " %7s %8s %7s %9s %8s %7s\n", "", "(x)", "(x)", "(us)", "(best)", "");
  for (int i = 0; i < nrows; i++) {
    const bench_row_t* r = &rows[i];
    const ga_work_t* w = &g_work[r->count < GA_MAXW ? r->count : 0];
    char shape[64];
    if (w->skew < 0)
      snprintf(shape, sizeof shape, "%d,%d,%d,%d,%d,r", w->tokens, w->k, w->n, w->experts,
               w->topk);
    else
      snprintf(shape, sizeof shape, "%d,%d,%d,%d,%d,%g", w->tokens, w->k, w->n, w->experts,
               w->topk, w->skew);
    fprintf(f, "  %-26s", shape);
    num(f, 9, r->compute_us);
    num(f, 9, r->comm_us);
    num(f, 9, r->both_us);
    int best = -1, ac = -1;
    for (int j = 0; j < ctx->nimpls; j++) {
      num(f, 9, r->time_us[j]);
      if (ctx->impls[j] == FCO_IMPL_AUTO) ac = j;
      else if (ctx->impls[j] >= 1 && r->time_us[j] > 0 && (best < 0 || r->time_us[j] < r->time_us[best]))
        best = j;
    }
    double t0 = r->time_us[0];
    fprintf(f, " %7s", best >= 0 ? bench_impl_label(ctx, op, best) : "-");
    if (best >= 0 && t0 > 0) fprintf(f, " %8.2f", t0 / r->time_us[best]);
    else fprintf(f, " %8s", "-");
    if (ac >= 0 && t0 > 0 && r->time_us[ac] > 0) fprintf(f, " %7.2f", t0 / r->time_us[ac]);
    else fprintf(f, " %7s", "-");
    num(f, 9, r->floor_us);
    /* Per GPU: all ranks' FLOPs on local (one GPU), their mean per GPU on nccl. */
    double flops = g_flops[r->count < GA_MAXW ? r->count : 0];
    if (ctx->transport == FCO_TRANSPORT_NCCL) flops /= ctx->nranks;
    double tb = best >= 0 ? r->time_us[best] : t0;
    if (tb > 0) fprintf(f, " %8.1f", flops / (tb * 1e-6) / 1e12);
    else fprintf(f, " %8s", "-");
    bench_print_wrong(f, ctx, r);
  }
}

const bench_op_t bench_op_gemm_alltoall = {
    .name = "gemm_alltoall",
    .num_impls = FCO_GEMM_ALLTOALL_NUM_IMPLS,
    .impl_name = ga_impl_name,
    .setup = ga_setup,
    .time = ga_time,
    .check = ga_check,
    .finish_row = ga_finish_row,
    .teardown = ga_teardown,
    .print_table = ga_print_table,
    .shapes = ga_shapes,
    .shapes_env = "FCO_BENCH_GA_SHAPES",
};
