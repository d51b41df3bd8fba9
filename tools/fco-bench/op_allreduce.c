/*
 * op_allreduce.c — the allreduce op of fco-bench: out[i] = Σ_r in_r[i] on every rank.
 *
 * One iteration = fco_group_start(); fco_allreduce(comms[r], ...) for every rank r;
 * fco_group_end(). Rotating sets: per rank, set s holds [in | out], each rounded up to 256 B;
 * iteration i uses set i % nsets, so the inputs of consecutive iterations are not cache-hot.
 *
 * Check: inputs v(seed, rank, i) = ((seed·31 + rank·7 + i) mod 9) − 4 are small integers, exact
 * in bf16, and so is every partial sum (|sum| ≤ 4·64), so outputs must equal the sum exactly.
 *
 * Floor: bytes one rank must move at least, over the bandwidth (-L overrides it):
 *   nccl   2·(P−1)/P·S over NVLink, 364 GB/s per direction (DESIGN.md); none for P = 1
 *   local  2·P·S over HBM (the copy rate measured at start): the virtual ranks share one GPU
 *   cpu    none
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct {
  fco_dtype_t dtype;
  size_t count, bytes;
  size_t stride;    /* bytes rounded up to 256: offset of out in a set */
  size_t set_bytes; /* in + out */
  int nsets;
  int impl;         /* impl being timed or checked */
  void* host;       /* scratch of `bytes` */
} ar_state_t;

static char* in_ptr(bench_ctx_t* ctx, const ar_state_t* st, int rank, int set) {
  return (char*)ctx->pool[rank] + (size_t)set * st->set_bytes;
}
static char* out_ptr(bench_ctx_t* ctx, const ar_state_t* st, int rank, int set) {
  return in_ptr(ctx, st, rank, set) + st->stride;
}

/* Small integers (exact in every dtype, as are their sums). Rank 0 adds 9 · (i mod 9 − 4), so
 * the nine expected sums differ at every P ≤ 64 (before session 55 the rank term alone cancelled
 * at P = 9, 18, ...: every expected value was 0 and an impl writing zeros passed). */
static int value(unsigned seed, int rank, size_t i) {
  const int j = (int)(i % 9);
  return (int)((seed * 31u + (unsigned)rank * 7u + (unsigned)j) % 9) - 4 +
         (rank == 0 ? 9 * (j - 4) : 0);
}

static void fill(void* dst, fco_dtype_t dtype, size_t count, unsigned seed, int rank) {
  /* v depends on i only through i mod 9: encode the 9 values once. */
  float f[9];
  unsigned short h[9];
  for (int m = 0; m < 9; m++) {
    f[m] = (float)value(seed, rank, (size_t)m);
    h[m] = dtype == FCO_F16 ? bench_float_to_half(f[m]) : bench_float_to_bf16(f[m]);
  }
  if (dtype == FCO_F32) {
    float* p = (float*)dst;
    for (size_t i = 0; i < count; i++) p[i] = f[i % 9];
  } else {
    unsigned short* p = (unsigned short*)dst;
    for (size_t i = 0; i < count; i++) p[i] = h[i % 9];
  }
}

static float load(const void* src, fco_dtype_t dtype, size_t i) {
  switch (dtype) {
    case FCO_F32: return ((const float*)src)[i];
    case FCO_F16: return bench_half_to_float(((const unsigned short*)src)[i]);
    default: return bench_bf16_to_float(((const unsigned short*)src)[i]);
  }
}

static const char* ar_impl_name(bench_ctx_t* ctx, int impl) {
  return fco_allreduce_impl_name(ctx->comms[0], impl);
}

static fco_result_t ar_issue(bench_ctx_t* ctx, void* arg, int iter) {
  ar_state_t* st = (ar_state_t*)arg;
  int set = iter % st->nsets;
  fco_result_t first = FCO_OK;
  fco_group_start();
  for (int r = 0; r < ctx->nranks; r++) {
    fco_result_t e = fco_allreduce(ctx->comms[r], in_ptr(ctx, st, r, set), out_ptr(ctx, st, r, set),
                                   st->count, st->dtype, st->impl, bench_stream(ctx, r));
    if (e != FCO_OK && first == FCO_OK) {
      first = e;
      ctx->err_rank = r;
    }
  }
  return bench_group_end(ctx, first);
}

static fco_result_t ar_setup(bench_ctx_t* ctx, size_t bytes, fco_dtype_t dtype, bench_row_t* row,
                             void** state) {
  size_t es = fco_dtype_size(dtype);
  if (bytes < es) /* no element fits: skip the row, said under the metadata (was silent) */
    return bench_fail(ctx, FCO_ERR_UNSUPPORTED, "allreduce: sizes below %zu B (from %zu B) hold "
                      "no whole %s element", es, bytes, fco_dtype_name(dtype));
  ar_state_t* st = (ar_state_t*)calloc(1, sizeof *st);
  if (!st) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  *state = st;
  st->dtype = dtype;
  st->count = bytes / es;
  st->bytes = st->count * es;
  st->stride = (st->bytes + 255) / 256 * 256;
  st->set_bytes = 2 * st->stride;
  st->nsets = bench_num_sets(ctx, st->set_bytes);
  st->host = malloc(st->bytes);
  if (!st->host) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "cannot allocate %zu B", st->bytes);
  fco_result_t r = bench_pool_reserve(ctx, (size_t)st->nsets * st->set_bytes);
  if (r != FCO_OK) return r;
  /* Poisoning every set also touches fresh host pages, so no page fault lands in a timing. */
  for (int rk = 0; rk < ctx->nranks; rk++)
    if ((r = bench_poison(ctx, rk, ctx->pool[rk], (size_t)st->nsets * st->set_bytes)) != FCO_OK)
      return r;
  for (int s = 0; s < st->nsets; s++)
    for (int rk = 0; rk < ctx->nranks; rk++) {
      fill(st->host, dtype, st->count, (unsigned)s + 1, rk);
      if ((r = bench_upload(ctx, rk, in_ptr(ctx, st, rk, s), st->host, st->bytes)) != FCO_OK)
        return r;
    }
  row->bytes = st->bytes;
  row->count = st->count;
  snprintf(row->shape_json, sizeof row->shape_json, "{\"count\":%zu,\"bytes\":%zu}", st->count,
           st->bytes);
  return FCO_OK;
}

static fco_result_t ar_time(bench_ctx_t* ctx, void* state, int impl, double* us) {
  ar_state_t* st = (ar_state_t*)state;
  size_t ws = 0;
  fco_result_t r = fco_allreduce_workspace(ctx->comms[0], st->count, st->dtype, impl, &ws);
  if (r != FCO_OK) {
    ctx->err_rank = 0;
    return r;
  }
  if ((r = bench_reserve(ctx, ws)) != FCO_OK) return r;
  st->impl = impl;
  return bench_time(ctx, ar_issue, st, st->nsets, us);
}

static fco_result_t ar_check(bench_ctx_t* ctx, void* state, int impl, long long* wrong) {
  ar_state_t* st = (ar_state_t*)state;
  const unsigned seed = 1; /* set 0 */
  fco_result_t r;
  for (int rk = 0; rk < ctx->nranks; rk++)
    if ((r = bench_poison(ctx, rk, out_ptr(ctx, st, rk, 0), st->bytes)) != FCO_OK) return r;
  st->impl = impl;
  if ((r = ar_issue(ctx, st, 0)) != FCO_OK) return r;
  if ((r = bench_sync(ctx)) != FCO_OK) return r;
  if ((r = bench_poll(ctx)) != FCO_OK) return r;
  float expect[9]; /* the sum depends on i only through i mod 9 */
  for (int j = 0; j < 9; j++) {
    int s = 0;
    for (int rk = 0; rk < ctx->nranks; rk++) s += value(seed, rk, (size_t)j);
    expect[j] = (float)s;
  }
  long long bad = 0;
  for (int rk = 0; rk < ctx->nranks; rk++) {
    if ((r = bench_download(ctx, rk, st->host, out_ptr(ctx, st, rk, 0), st->bytes)) != FCO_OK)
      return r;
    for (size_t i = 0; i < st->count; i++) {
      float got = load(st->host, st->dtype, i), want = expect[i % 9];
      if (got == want) continue;
      static int told; /* a few examples in all, not thousands of lines */
      if (bad++ < 3 && told++ < 24)
        fprintf(stderr, "fco-bench: allreduce %s count %zu impl %s: rank %d out[%zu] = %g, want %g\n",
                fco_dtype_name(st->dtype), st->count,
                impl == FCO_IMPL_AUTO ? "auto" : ar_impl_name(ctx, impl), rk, i, (double)got,
                (double)want);
    }
  }
  *wrong = bad;
  return FCO_OK;
}

static fco_result_t ar_finish_row(bench_ctx_t* ctx, void* state, bench_row_t* row) {
  (void)state;
  double P = ctx->nranks, S = (double)row->bytes, moved = -1, gbps = ctx->opt.link_gbps;
  if (ctx->transport == FCO_TRANSPORT_NCCL && ctx->nranks > 1) {
    moved = 2.0 * (P - 1) / P * S;
    if (gbps <= 0) gbps = BENCH_NVLINK_GBPS;
  } else if (ctx->transport == FCO_TRANSPORT_LOCAL) {
    moved = 2.0 * P * S;
    if (gbps <= 0) gbps = ctx->hbm_gbps;
  }
  row->floor_us = moved >= 0 ? moved / (gbps * 1e3) : -1;
  row->compute_us = -1;          /* a collective alone has no compute part */
  row->comm_us = row->time_us[0]; /* column 0 is always the baseline (impl 0) */
  return FCO_OK;
}

static void ar_teardown(bench_ctx_t* ctx, void* state) {
  (void)ctx;
  ar_state_t* st = (ar_state_t*)state;
  if (!st) return;
  free(st->host);
  free(st);
}

const bench_op_t bench_op_allreduce = {
    .name = "allreduce",
    .num_impls = FCO_ALLREDUCE_NUM_IMPLS,
    .impl_name = ar_impl_name,
    .setup = ar_setup,
    .time = ar_time,
    .check = ar_check,
    .finish_row = ar_finish_row,
    .teardown = ar_teardown,
    .print_table = bench_print_table,
};
