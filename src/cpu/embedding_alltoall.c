/*
 * embedding_alltoall.c — fco_embedding_alltoall on the CPU backend: the reference semantics
 * (include/fco.h) CI checks against. Pooling is fp32 in bag order; weighted terms are fused
 * multiply-adds (fmaf) and mean divides once, as the GPU kernels do, so f32 results are
 * bit-identical across backends.
 *
 * impl 0 "copy" (lookup, All-to-All, permute): each rank pools all its bags into its own
 *   workspace as [B, T_me, D] (sample-major: the send buffer of all_to_all_single), signals
 *   every peer (slot 0), waits for all, then pulls block [bstart_me, +b_me) of every source's
 *   send buffer into its tables' columns of out.
 * impl 1 "fused": each rank pools the samples of remote destinations first, storing each pooled
 *   vector straight into the destination's workspace laid out as that rank's out [b_s, T, D],
 *   signals it, pools its own samples into out, then waits for every source and lands the
 *   source's columns from its workspace into out.
 * One workspace buffer suffices (no epoch halves): the cpu transport's per-call agreement is a
 * barrier, so no rank starts call e+1 before every rank finished call e.
 * P == 1: bags are pooled straight into out. Bad data (an index outside its table, offsets that
 * decrease or leave [0, num_indices]) is skipped / treated as an empty bag, the protocol is
 * completed so peers never wait in vain, and the call returns FCO_ERR_INVALID_ARGUMENT naming
 * the bad table (global id) and position it met first (fco.h leaves unspecified which bad entry
 * is named when there are several).
 */
#include <math.h>
#include <stdlib.h>

#include "../ops/embedding_alltoall.h"
#include "cpu.h"

typedef struct {
  int kind;      /* 0 none, FCO_EA_BAD_INDEX, FCO_EA_BAD_OFFSETS */
  int table;     /* global table id */
  int64_t pos;   /* position in indices / offsets */
  int64_t value; /* the bad index / the offsets pair */
  int64_t value2;
} bad_t;

typedef struct {
  const fco_ea_args_t* a;
  int64_t row_base[FCO_EMBEDDING_MAX_TABLES + 1]; /* first row of each local table */
  int32_t toff_me;                                /* global id of local table 0 */
  size_t es;
  bad_t bad;
} ctx_t;

static int64_t ld_index(const void* p, fco_emb_index_t it, int64_t i) {
  return it == FCO_EMB_INDEX_I64 ? ((const int64_t*)p)[i] : (int64_t)((const int32_t*)p)[i];
}

static float ld_elem(const void* p, fco_dtype_t dt, size_t i) {
  switch (dt) {
    case FCO_F32: return ((const float*)p)[i];
    case FCO_F16: return fco_f16_to_f32(((const uint16_t*)p)[i]);
    default: return fco_bf16_to_f32(((const uint16_t*)p)[i]);
  }
}

static void st_row(void* dst, fco_dtype_t dt, const float* acc, int64_t n) {
  switch (dt) {
    case FCO_F32: memcpy(dst, acc, (size_t)n * sizeof(float)); break;
    case FCO_F16:
      for (int64_t d = 0; d < n; d++) ((uint16_t*)dst)[d] = fco_f32_to_f16(acc[d]);
      break;
    default:
      for (int64_t d = 0; d < n; d++) ((uint16_t*)dst)[d] = fco_f32_to_bf16(acc[d]);
      break;
  }
}

static void note_bad(ctx_t* c, int kind, int t, int64_t pos, int64_t v, int64_t v2) {
  if (c->bad.kind) return; /* the first one is reported */
  c->bad.kind = kind;
  c->bad.table = c->toff_me + t;
  c->bad.pos = pos;
  c->bad.value = v;
  c->bad.value2 = v2;
}

/* Pool bag (local table t, global sample b) into acc[D], then store it at dst in dtype. */
static void pool_bag(ctx_t* c, int t, int64_t b, float* acc, void* dst) {
  const fco_ea_args_t* a = c->a;
  const int64_t D = a->dim, k = (int64_t)t * a->batch + b;
  const int64_t rows = c->row_base[t + 1] - c->row_base[t];
  for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
  const int64_t lo = ld_index(a->offsets, a->index_type, k);
  const int64_t hi = ld_index(a->offsets, a->index_type, k + 1);
  if (lo < 0 || hi < lo || hi > a->num_indices) {
    note_bad(c, FCO_EA_BAD_OFFSETS, t, k, lo, hi);
  } else {
    for (int64_t j = lo; j < hi; j++) {
      const int64_t idx = ld_index(a->indices, a->index_type, j);
      if (idx < 0 || idx >= rows) {
        note_bad(c, FCO_EA_BAD_INDEX, t, j, idx, rows);
        continue;
      }
      const char* row = (const char*)a->weight + (size_t)(c->row_base[t] + idx) * (size_t)D * c->es;
      if (a->per_sample_weights) {
        const float w = a->per_sample_weights[j];
        for (int64_t d = 0; d < D; d++) acc[d] = fmaf(w, ld_elem(row, a->dtype, (size_t)d), acc[d]);
      } else {
        for (int64_t d = 0; d < D; d++) acc[d] += ld_elem(row, a->dtype, (size_t)d);
      }
    }
    if (a->pooling == FCO_EMB_POOL_MEAN && hi > lo) {
      const float n = (float)(hi - lo);
      for (int64_t d = 0; d < D; d++) acc[d] = acc[d] / n;
    }
  }
  st_row(dst, a->dtype, acc, D);
}

/* Rows i of [nrows, T_src, D] (src) → out[i][toff .. toff + T_src) (row width T·D). */
static void land(const fco_ea_args_t* a, size_t es, const char* src, int64_t T_src, int32_t toff,
                 int64_t nrows) {
  const size_t seg = (size_t)T_src * (size_t)a->dim * es;
  const size_t out_row = (size_t)a->num_tables * (size_t)a->dim * es;
  for (int64_t i = 0; i < nrows; i++)
    memcpy((char*)a->out + (size_t)i * out_row + (size_t)toff * (size_t)a->dim * es,
           src + (size_t)i * seg, seg);
}

static fco_result_t report(const fco_cpu_peers_t* t, const ctx_t* c) {
  const bad_t* b = &c->bad;
  if (b->kind == FCO_EA_BAD_INDEX)
    return fco_set_error(t->comm, FCO_ERR_INVALID_ARGUMENT,
                         "fco_embedding_alltoall: rank %d: indices[%lld] = %lld is outside table "
                         "%d (global id; %lld rows): skipped", t->rank, (long long)b->pos,
                         (long long)b->value, b->table, (long long)b->value2);
  return fco_set_error(t->comm, FCO_ERR_INVALID_ARGUMENT,
                       "fco_embedding_alltoall: rank %d: offsets[%lld] = %lld, offsets[%lld] = "
                       "%lld of table %d (global id) decrease or leave [0, num_indices = %lld]: "
                       "the bag was treated as empty", t->rank, (long long)b->pos,
                       (long long)b->value, (long long)b->pos + 1, (long long)b->value2, b->table,
                       (long long)c->a->num_indices);
}

fco_result_t fco_cpu_embedding_alltoall(const fco_cpu_peers_t* t, const fco_op_t* op) {
  const fco_ea_args_t* a = fco_ea_args(op);
  const int P = t->nranks, me = t->rank;
  const int64_t D = a->dim, T = a->num_tables, Tme = a->tables_per_rank[me];
  const int64_t bme = a->batch_per_rank[me];
  ctx_t* c = (ctx_t*)malloc(sizeof *c);
  float* acc = (float*)malloc((size_t)D * sizeof(float));
  if (!c || !acc) {
    free(c);
    free(acc);
    return fco_set_error(t->comm, FCO_ERR_OUT_OF_MEMORY, "fco_embedding_alltoall: out of memory");
  }
  memset(&c->bad, 0, sizeof c->bad);
  c->a = a;
  c->es = fco_dtype_size(a->dtype);
  c->toff_me = fco_ea_table_off(a, me);
  c->row_base[0] = 0;
  for (int64_t i = 0; i < Tme; i++) c->row_base[i + 1] = c->row_base[i] + a->table_rows[i];
  const size_t es = c->es, vec = (size_t)D * es, out_row = (size_t)T * vec;
  const size_t need = fco_ea_workspace(FCO_TRANSPORT_CPU, op->impl, a->tables_per_rank,
                                       a->batch_per_rank, P, D, es);
  fco_result_t r = FCO_OK;
  if (need > t->ws_bytes) {
    r = fco_set_error(t->comm, FCO_ERR_INTERNAL,
                      "fco_embedding_alltoall: workspace of %zu bytes per rank, %zu needed",
                      t->ws_bytes, need);
    goto done;
  }
  if (P == 1) {
    for (int64_t i = 0; i < bme; i++)
      for (int64_t tt = 0; tt < Tme; tt++)
        pool_bag(c, (int)tt, i, acc, (char*)a->out + (size_t)i * out_row + (size_t)tt * vec);
  } else if (op->impl == 0) {
    char* send = t->peer_data[me];
    for (int64_t b = 0; b < a->batch; b++)
      for (int64_t tt = 0; tt < Tme; tt++)
        pool_bag(c, (int)tt, b, acc, send + ((size_t)b * (size_t)Tme + (size_t)tt) * vec);
    for (int p = 1; p < P; p++) fco_cpu_signal(t, (me + p) % P, 0);
    const int64_t bstart = fco_ea_batch_off(a, me);
    for (int k = 0; k < P && r == FCO_OK; k++) {
      const int src = (me + k) % P;
      if (src != me) r = fco_cpu_wait(t, src, 0, "fco_embedding_alltoall (copy)");
      if (r != FCO_OK) break;
      const int64_t Ts = a->tables_per_rank[src];
      land(a, es, t->peer_data[src] + (size_t)bstart * (size_t)Ts * vec, Ts,
           fco_ea_table_off(a, src), bme);
    }
  } else {
    /* Remote destinations first (me+1, me+2, ...), then this rank's own samples. */
    for (int k = 1; k <= P; k++) {
      const int dst = (me + k) % P;
      const int64_t b0 = fco_ea_batch_off(a, dst), bs = a->batch_per_rank[dst];
      char* base = dst == me ? (char*)a->out : t->peer_data[dst];
      for (int64_t i = 0; i < bs; i++)
        for (int64_t tt = 0; tt < Tme; tt++)
          pool_bag(c, (int)tt, b0 + i, acc,
                   base + (size_t)i * out_row + (size_t)(c->toff_me + tt) * vec);
      if (dst != me) fco_cpu_signal(t, dst, 0);
    }
    for (int k = 1; k < P && r == FCO_OK; k++) {
      const int src = (me + k) % P;
      r = fco_cpu_wait(t, src, 0, "fco_embedding_alltoall (fused)");
      if (r != FCO_OK) break;
      const int32_t toff = fco_ea_table_off(a, src);
      const int64_t Ts = a->tables_per_rank[src];
      for (int64_t i = 0; i < bme && Ts > 0; i++)
        memcpy((char*)a->out + (size_t)i * out_row + (size_t)toff * vec,
               t->peer_data[me] + (size_t)i * out_row + (size_t)toff * vec, (size_t)Ts * vec);
    }
  }
  if (r == FCO_OK && c->bad.kind) r = report(t, c);
done:
  free(acc);
  free(c);
  return r;
}
