/*
 * test_embedding_alltoall_bad.c — fco_embedding_alltoall on bad input (its semantics:
 * test_embedding_alltoall.c; the fixture both share: tests/common/ea_fixture.h).
 *   P = 1..4 ranks (random problems as there: uneven tables and batch splits, ragged bags).
 *   Bad arguments on rank 0 (bad_args): every argument refused with FCO_ERR_INVALID_ARGUMENT and
 *   a message naming it (each bound also at its edge), out (and its guard) untouched; and
 *   (P > 1) ranks that disagree on dim, on the batch or tables split, or on pooling; the
 *   kernels' discrete launch knobs (FCO_EA_LEAN_DYN, ...) at values no kernel exists for.
 *   Bad data on one rank (bad_data, impls 0 and 1): an index outside its table (= rows, or
 *   negative; its per-sample weight NaN or Inf), decreasing offsets, offsets past num_indices —
 *   FCO_ERR_INVALID_ARGUMENT naming the table and position (on GPUs the comm's async error), the
 *   bad entries skipped (bad bags empty), nothing written past out; on the element path (f32
 *   D = 3), the lean kernels (bf16 D = 16: 32-byte rows) and for impl 1 also the previous fused
 *   kernel's streaming lookup (FCO_EA_LEAN=0 FCO_EA_STREAM=1), the lean fused kernel's
 *   multi-table warp tiles (FCO_EA_LEAN_TABLES=4) and its static order (FCO_EA_LEAN_DYN=0), for
 *   impl 0 also the lookup's claimed order (FCO_EA_LOOKUP_DYN=1); on cpu also the bad value in
 *   the message, and every kind in the other index type (negative int32 indices). After each
 *   bad-data call the world is destroyed and made again (GPU errors are sticky).
 *   Every transport runs both parts, with the FCO_EA_* knobs as the caller set them (as when
 *   these parts ran at the end of test_embedding_alltoall's rounds: its parts reset every knob
 *   they set, t_knob_reset).
 *   make test   or   build/tests/test_embedding_alltoall_bad   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run (FCO_TEST_QUICK changes nothing here).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ea_fixture.h"

/* Bad data on one rank (the first, over up to 100 fresh problems, that has an entry to spoil):
 * the documented error naming table and position, the bad entries skipped (the reference skips
 * them too), nothing written past out. `kind`: 0 index = rows, 1 negative index, 2 decreasing
 * offsets, 3 offsets past num_indices. D, dt: the kernel path
 * (3 f32: the element path; 16 bf16: 32-byte rows, the lean kernels); stream: NULL the
 * defaults, "T<n>" the lean kernels with FCO_EA_LEAN_TABLES = n, "S" the lean fused kernel's
 * static order (FCO_EA_LEAN_DYN=0), "C" impl 0's claimed lookup (FCO_EA_LOOKUP_DYN=1), else the
 * previous kernels (FCO_EA_LEAN=0) with
 * FCO_EA_STREAM = stream. Destroys the world (GPU errors are sticky) and
 * makes a new one. */
static int g_other_index_type; /* bad_data: 1 takes the other index type than kind's own */

static void bad_data(t_world_t* w, int impl, int kind, int64_t D, fco_dtype_t dt,
                     const char* stream) {
  ea_prob_t p;
  uint64_t seed = t_next_seed();
  int found = 0, r = 0;
  int64_t pos = 0, table = 0, value = 0; /* value: the bad index / the bag's end offset */
  const fco_emb_index_t it = (kind + g_other_index_type) % 2 ? FCO_EMB_INDEX_I64
                                                             : FCO_EMB_INDEX_I32;
  for (int attempt = 0; attempt < 100 && !found; attempt++) {
    if (attempt) ea_prob_free(w, &p);
    ea_prob_make(&p, w->n, D, dt, it, 1, FCO_EMB_POOL_SUM, 0, seed + (uint64_t)attempt);
    /* kinds 0 and 2 look from the last rank down (its tables' global ids start past 0, so the
     * message must add the rank's table offset), 1 and 3 from rank 0 up */
    for (int i = 0; i < p.P && !found; i++) {
      r = kind % 2 ? i : p.P - 1 - i;
      int64_t nb = (int64_t)p.tpr[r] * p.B;
      if (kind <= 1 && p.nnz[r] > 0) {
        pos = (int64_t)(ea_rnd() % (uint64_t)p.nnz[r]);
        int64_t k = 0;
        while (p.offsets[r][k + 1] <= pos) k++;
        table = ea_toff(&p, r) + k / p.B;
        p.indices[r][pos] = kind == 0 ? p.rows[r][k / p.B] : -1 - (int64_t)(ea_rnd() % 5);
        value = p.indices[r][pos];
        /* its own weight NaN / Inf: a skipped row adds nothing whatever its weight (the lean
         * tile copies it as a zero row with a zero weight; a product with it would poison the bag) */
        if (p.weighted) p.psw[r][pos] = kind == 0 ? NAN : INFINITY;
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
            value = p.offsets[r][k + 1];
            pos = k;
            table = ea_toff(&p, r) + k / p.B;
            found = 1;
          }
        }
      } else if (kind == 3 && nb > 0) {
        p.offsets[r][nb] = p.nnz[r] + 3; /* the last bag leaves [0, num_indices] */
        value = p.offsets[r][nb];
        pos = nb - 1;
        table = ea_toff(&p, r) + (nb - 1) / p.B;
        found = 1;
      }
      if (found) break;
    }
  }
  if (!found) t_fail(__FILE__, __LINE__, "bad_data: no problem with a place for kind %d", kind);
  ea_describe(&p, impl, seed, "bad data");
  ea_prob_upload(w, &p);
  if (stream && stream[0] == 'T') {
    t_knob_set("FCO_EA_LEAN_TABLES", stream + 1);
  } else if (stream && stream[0] == 'S') {
    t_knob_set("FCO_EA_LEAN_DYN", "0");
  } else if (stream && stream[0] == 'C') {
    t_knob_set("FCO_EA_LOOKUP_DYN", "1");
  } else if (stream) {
    t_knob_set("FCO_EA_LEAN", "0");
    t_knob_set("FCO_EA_STREAM", stream);
  }
  fco_result_t res = ea_prob_run(w, &p, impl, NULL);
  t_knob_reset("FCO_EA_LEAN");
  t_knob_reset("FCO_EA_STREAM");
  t_knob_reset("FCO_EA_LEAN_TABLES");
  t_knob_reset("FCO_EA_LEAN_DYN");
  t_knob_reset("FCO_EA_LOOKUP_DYN");
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
  /* a whole word: "table 1" must not match "table 12" */
  if (!t_contains_word(msg, want_table) || !t_contains(msg, want_pos))
    t_fail(__FILE__, __LINE__, "message does not name %s and position %s: \"%s\"", want_table,
           want_pos, msg);
  /* cpu: also the bad value as read ("= -3": an int32 index read unsigned, or the bag's start
   * offset given for its end, passed the checks above). GPU messages carry it too, unchecked. */
  char want_value[32];
  snprintf(want_value, sizeof want_value, "= %lld", (long long)value);
  if (w->transport == FCO_TRANSPORT_CPU && !t_contains_word(msg, want_value))
    t_fail(__FILE__, __LINE__, "message does not name the bad value (%s): \"%s\"", want_value,
           msg);
  /* cpu: fco_group_end's failure is rank r's; its message is also the thread's and every rank's
   * of the failed group (src/core/group.c fco_ops_execute), whichever rank r was */
  if (w->transport == FCO_TRANSPORT_CPU) {
    ASSERT_STR_EQ(fco_last_error(NULL), msg);
    for (int q = 0; q < w->n; q++) ASSERT_STR_EQ(fco_last_error(w->comms[q]), msg);
  }
  ASSERT_EQ(ea_prob_check(w, &p), 0);
  ea_prob_free(w, &p);
  int n = w->n;
  fco_transport_t t = w->transport;
  t_world_destroy(w, 0);
  ASSERT_OK(t_world_init(w, t, n, NULL));
}

/* Argument errors on rank 0 of a world: code, a message naming the argument, out untouched. */
static void bad_args(const t_world_t* w) {
  ea_prob_t p;
  uint64_t seed = t_next_seed();
  do { /* rank 0 needs a table and a sample */
    ea_prob_make(&p, w->n, 4, FCO_F32, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, seed++);
    if (p.tpr[0] > 0 && p.bpr[0] > 0 && p.nnz[0] > 0) break;
    ea_prob_free(w, &p);
  } while (1);
  ea_describe(&p, 0, seed, "bad arguments");
  ea_prob_upload(w, &p);
  fco_comm_t c = w->comms[0];
  const fco_result_t E = FCO_ERR_INVALID_ARGUMENT;
  /* the impl names fco.h gives: impl 0 the transport's baseline (nccl, or the copy), 1 fused */
  ASSERT_STR_EQ(fco_embedding_alltoall_impl_name(c, 0),
                w->transport == FCO_TRANSPORT_NCCL ? "nccl" : "copy");
  ASSERT_STR_EQ(fco_embedding_alltoall_impl_name(c, 1), "fused");
  ASSERT_STR_EQ(fco_embedding_alltoall_impl_name(c, FCO_IMPL_AUTO), "auto");
  ASSERT_NULL(fco_embedding_alltoall_impl_name(c, FCO_EMBEDDING_ALLTOALL_NUM_IMPLS));
  ASSERT_NULL(fco_embedding_alltoall_impl_name(c, -2));
  void *wt = p.d_weight[0], *of = p.d_offsets[0], *ix = p.d_indices[0], *out = p.d_out[0];
  int64_t* rows = p.rows[0];
  int32_t tpr[EA_MAX_P];
  int64_t bpr[EA_MAX_P], neg_rows[4] = {-1, 1, 1, 1};
  memcpy(tpr, p.tpr, sizeof tpr);
  memcpy(bpr, p.bpr, sizeof bpr);
  int32_t tpr_neg[EA_MAX_P], tpr_big[EA_MAX_P], tpr_zero[EA_MAX_P] = {0};
  int64_t bpr_zero[EA_MAX_P] = {0}, bpr_wrap[EA_MAX_P];
  /* huge entries after rank 0's: an unchecked int64 sum wraps (back to a legal B at P >= 4) */
  memcpy(bpr_wrap, bpr, sizeof bpr);
  for (int q = 1; q < w->n; q++) bpr_wrap[q] = INT64_MAX;
  if (w->n >= 4) bpr_wrap[w->n - 1] = 2;
  if (w->n == 1) bpr_wrap[0] = INT64_MAX;
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
  BAD("2^31", c, wt, rows, tpr, bpr_wrap, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  { /* the limit itself: a global batch of exactly 2^31 is refused, 2^31 - 1 passes the query */
    int64_t edge[EA_MAX_P] = {0};
    size_t ws = 0;
    edge[0] = w->n > 1 ? (int64_t)1 << 30 : (int64_t)1 << 31;
    if (w->n > 1) edge[w->n - 1] = (int64_t)1 << 30;
    t_context("batch_per_rank summing to 2^31");
    ASSERT_RES(fco_embedding_alltoall_workspace(c, tpr, edge, D, FCO_F32, 0, &ws), E);
    ASSERT_MSG(c, "2^31");
    BAD("2^31", c, wt, rows, tpr, edge, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
        FCO_EMB_POOL_SUM, out, 0);
    edge[w->n - 1] -= 1;
    t_context("batch_per_rank summing to 2^31 - 1 (the workspace query only)");
    ASSERT_OK(fco_embedding_alltoall_workspace(c, tpr, edge, D, FCO_F32, 0, &ws));
  }
  {
    size_t ws = 7;
    t_context("batch_per_rank over 2^31 in the workspace query");
    for (int impl = FCO_IMPL_AUTO; impl < FCO_EMBEDDING_ALLTOALL_NUM_IMPLS; impl++) {
      ASSERT_RES(fco_embedding_alltoall_workspace(c, tpr, bpr_wrap, D, FCO_F32, impl, &ws), E);
      ASSERT_MSG(c, "2^31");
    }
    ASSERT_EQ(ws, (size_t)7);
  }
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
  /* Each bound at its edge. */
  { /* tables: FCO_EMBEDDING_MAX_TABLES in all passes the query, one more is refused */
    int32_t edge[EA_MAX_P];
    size_t ws = 0;
    for (int q = 0; q < w->n; q++) edge[q] = 1;
    edge[0] = FCO_EMBEDDING_MAX_TABLES - (w->n - 1);
    t_context("tables_per_rank summing to FCO_EMBEDDING_MAX_TABLES (the workspace query)");
    ASSERT_OK(fco_embedding_alltoall_workspace(c, edge, bpr, D, FCO_F32, 0, &ws));
    edge[0] += 1;
    ASSERT_RES(fco_embedding_alltoall_workspace(c, edge, bpr, D, FCO_F32, 0, &ws), E);
    ASSERT_MSG(c, "FCO_EMBEDDING_MAX_TABLES");
  }
  BAD("num_indices", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, ((int64_t)1 << 40) + 1,
      FCO_EMB_INDEX_I32, NULL, FCO_EMB_POOL_SUM, out, 0);
  BAD("pooling", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
      FCO_EMB_NUM_POOLINGS, out, 0);
  {
    int64_t rows_big[64], rows_one[64], bpr_one[EA_MAX_P];
    ASSERT_LE(p.tpr[0], 64);
    for (int t = 0; t < p.tpr[0]; t++) {
      rows_big[t] = t ? rows[t] : ((int64_t)1 << 40) + 1;
      rows_one[t] = t ? 0 : 1; /* one row in all: weight NULL is still refused */
    }
    BAD("table_rows", c, wt, rows_big, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
        FCO_EMB_POOL_SUM, out, 0);
    BAD("weight", c, NULL, rows_one, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
        FCO_EMB_POOL_SUM, out, 0);
    memcpy(bpr_one, bpr, sizeof bpr_one);
    bpr_one[0] = 1; /* one sample on rank 0: out NULL is still refused */
    BAD("out", c, wt, rows, tpr, bpr_one, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
        FCO_EMB_POOL_SUM, NULL, 0);
  }
  /* offsets and indices of int64 at a 4-byte (not 8-byte) boundary; the per-sample weights at a
   * 2-byte one (inside indices: apart from out) */
  BAD("offsets", c, wt, rows, tpr, bpr, D, FCO_F32, (char*)of + 4, ix, n, FCO_EMB_INDEX_I64, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("indices", c, wt, rows, tpr, bpr, D, FCO_F32, of, (char*)ix + 4, n, FCO_EMB_INDEX_I64, NULL,
      FCO_EMB_POOL_SUM, out, 0);
  BAD("per_sample_weights", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32,
      (const float*)((char*)ix + 2), FCO_EMB_POOL_SUM, out, 0);
  /* out over the per-sample weights, or starting at offsets' last entry (T_r · B + 1 of them):
   * offsets and out in an allocation of their own, so that out overlaps the offsets and nothing
   * else (out placed after the fixture's offsets ran into whatever the allocator put there — the
   * weight, reported first — with some seeds: session 48's CI) */
  BAD("per_sample_weights", c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32,
      (const float*)out, FCO_EMB_POOL_SUM, out, 0);
  {
    const size_t ob = ((size_t)p.tpr[0] * (size_t)p.B + 1) * 4;
    const int dev = t_rank_device(w->transport, 0);
    char* both = (char*)t_alloc(w->transport, dev, ob + p.out_bytes[0]);
    BAD("overlaps offsets", c, wt, rows, tpr, bpr, D, FCO_F32, both, ix, n, FCO_EMB_INDEX_I32, NULL,
        FCO_EMB_POOL_SUM, both + ob - 4, 0);
    t_free(w->transport, dev, both);
  }
  /* out holding a host array (cpu only, where out is host memory): refused — before session 55
   * the cpu reference read tables_per_rank after its own rows had overwritten it (a crash) */
  if (w->transport == FCO_TRANSPORT_CPU && p.out_bytes[0] >= 8 * EA_MAX_P &&
      p.out_bytes[0] >= 8 * (size_t)p.tpr[0]) {
    int64_t* host = (int64_t*)malloc(p.out_bytes[0]);
    ASSERT_NOT_NULL(host);
    memcpy(host, tpr, sizeof(int32_t) * (size_t)w->n);
    BAD("overlaps tables_per_rank", c, wt, rows, (const int32_t*)host, bpr, D, FCO_F32, of, ix, n,
        FCO_EMB_INDEX_I32, NULL, FCO_EMB_POOL_SUM, host, 0);
    memcpy(host, bpr, sizeof(int64_t) * (size_t)w->n);
    BAD("overlaps batch_per_rank", c, wt, rows, tpr, host, D, FCO_F32, of, ix, n,
        FCO_EMB_INDEX_I32, NULL, FCO_EMB_POOL_SUM, host, 0);
    if (p.tpr[0] > 0) {
      memcpy(host, rows, sizeof(int64_t) * (size_t)p.tpr[0]);
      BAD("overlaps table_rows", c, wt, host, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32,
          NULL, FCO_EMB_POOL_SUM, host, 0);
    }
    free(host);
  }
  /* the kernels' discrete launch knobs at values no kernel exists for (docs/embedding_alltoall.md,
   * the knob table): refused on every transport, for either impl, naming the knob; each knob back
   * at the caller's value after */
  {
    static const char* const kBadKnobs[][2] = {
        {"FCO_EA_LOOKUP_DYN", "2"}, {"FCO_EA_LEAN_DYN", "-2"}, {"FCO_EA_LEAN_DYN", "7"},
        {"FCO_EA_LEAN_BLOCKS", "5"}, {"FCO_EA_LEAN_BLOCKS", "0"}, {"FCO_EA_LEAN_STAGES", "2"},
        {"FCO_EA_PROFILE", "3"},     {"FCO_EA_STREAM", "2"},      {"FCO_EA_BAGS", "2"},
    };
    for (size_t k = 0; k < sizeof kBadKnobs / sizeof kBadKnobs[0]; k++) {
      t_knob_set(kBadKnobs[k][0], kBadKnobs[k][1]);
      BAD(kBadKnobs[k][0], c, wt, rows, tpr, bpr, D, FCO_F32, of, ix, n, FCO_EMB_INDEX_I32, NULL,
          FCO_EMB_POOL_SUM, out, (int)(k % 2));
      t_knob_reset(kBadKnobs[k][0]);
    }
  }
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
    /* The same global batch split differently on rank 0 (one sample moved to the next rank):
     * only the split's hash in shape[] differs; refused on every transport, naming it. */
    int64_t split[EA_MAX_P];
    memcpy(split, p.bpr, sizeof split);
    split[0] -= 1; /* p.bpr[0] >= 1 (ASSERT below): rank 0 keeps its out */
    split[1] += 1;
    ASSERT_GE(p.bpr[0], 1);
    t_context("bad arguments: batch_per_rank split differs on rank 0");
    first = FCO_OK;
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++) {
      fco_result_t e2 = fco_embedding_alltoall(
          w->comms[r], p.d_weight[r], p.rows[r], p.tpr, r == 0 ? split : p.bpr, p.D, p.dt,
          p.d_offsets[r], p.d_indices[r], p.nnz[r], p.it, NULL, p.pool,
          p.bpr[r] ? p.d_out[r] : NULL, 1, NULL);
      if (e2 != FCO_OK && first == FCO_OK) first = e2;
    }
    e = fco_group_end();
    if (first == FCO_OK) first = e;
    ASSERT_RES(first, E);
    ASSERT_MSG(NULL, "batch_per_rank");
    /* cpu (the ranks compare records): the split is named without the table's hash mark and
     * printed as a hash, never as if it were the array (a mutant dropping either passed) */
    if (w->transport == FCO_TRANSPORT_CPU) {
      ASSERT_MSG(NULL, "batch_per_rank differs across ranks");
      ASSERT_MSG(NULL, "an array hashing to");
      if (t_contains(fco_last_error(NULL), "#"))
        t_fail(__FILE__, __LINE__, "the message shows the hash mark: \"%s\"",
               fco_last_error(NULL));
    }
    /* Likewise the tables (one of rank 0's moved to rank 1 in rank 0's split), and pooling. */
    int32_t tsplit[EA_MAX_P];
    memcpy(tsplit, p.tpr, sizeof tsplit);
    tsplit[0] -= 1; /* p.tpr[0] >= 1 (bad_args' problem) */
    tsplit[1] += 1;
    const fco_emb_pooling_t other_pool =
        p.pool == FCO_EMB_POOL_SUM ? FCO_EMB_POOL_MEAN : FCO_EMB_POOL_SUM;
    for (int what = 0; what < 2; what++) {
      t_context("bad arguments: %s differs on rank 0", what ? "pooling" : "tables_per_rank split");
      first = FCO_OK;
      ASSERT_OK(fco_group_start());
      for (int r = 0; r < w->n; r++) {
        const int odd = r == 0;
        fco_result_t e2 = fco_embedding_alltoall(
            w->comms[r], p.d_weight[r], p.rows[r], odd && !what ? tsplit : p.tpr, p.bpr, p.D,
            p.dt, p.d_offsets[r], p.d_indices[r], p.nnz[r], p.it, NULL,
            odd && what ? other_pool : p.pool, p.bpr[r] ? p.d_out[r] : NULL, 1, NULL);
        if (e2 != FCO_OK && first == FCO_OK) first = e2;
      }
      e = fco_group_end();
      if (first == FCO_OK) first = e;
      ASSERT_RES(first, E);
      ASSERT_MSG(NULL, what ? "pooling" : "tables_per_rank");
      if (!what && w->transport == FCO_TRANSPORT_CPU) { /* as batch_per_rank's above */
        ASSERT_MSG(NULL, "tables_per_rank differs across ranks");
        ASSERT_MSG(NULL, "an array hashing to");
      }
    }
  }
  ea_prob_free(w, &p);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int max = t_test_max_ranks(t);
  for (int P = 1; P <= max; P++) {
    t_world_t w;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", P);
    ASSERT_OK(t_world_init(&w, t, P, NULL));
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
        /* impl 0's lookup in its claimed order (the default for bags of >= 8 rows; these are
         * shorter) */
        if (impl == 0) bad_data(&w, impl, kind, 16, FCO_BF16, "C");
      }
    /* cpu: every kind in the other index type too (negative int32 indices, offsets[] past
     * num_indices in int64) */
    g_other_index_type = 1;
    for (int impl = 0; impl < 2 && t == FCO_TRANSPORT_CPU; impl++)
      for (int kind = 0; kind < 4; kind++) bad_data(&w, impl, kind, 3, FCO_F32, NULL);
    g_other_index_type = 0;
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", P, t_now_ms() - t0);
    fflush(stdout);
  }
  return t_pass(t, max, t_test_rank_cap());
}
