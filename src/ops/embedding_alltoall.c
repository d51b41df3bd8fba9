/*
 * embedding_alltoall.c — fco_embedding_alltoall: argument checks, impl choice (AUTO),
 * workspace need, the shape every rank must agree on, submit. Kernels: src/cuda/
 * embedding_alltoall.cu; CPU reference: src/cpu/embedding_alltoall.c. Semantics: include/fco.h.
 *
 * op.shape (compared across ranks by the transports):
 *   [0] tables T   [1] dim D   [2] batch B   [3] dtype   [4] pooling
 *   [5] hash of tables_per_rank[0..P)   [6] hash of batch_per_rank[0..P)
 * index_type, num_indices and per_sample_weights are per rank (they only shape local input).
 */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "embedding_alltoall.h"
#include "embedding_alltoall_plan.h" /* FCO_EA_LEAN_STAGES */

/* AUTO: the fused kernel wherever there is something to exchange. It writes every pooled
 * vector once (NVLink for remote samples) and lands it locally, where impl 0 writes the send
 * buffer, moves it, and permutes it (three passes over the output bytes). Measured on 2×H200
 * (run 7912d0f: both impls on the lean lookup): faster than impl 0 on all 14 fco-bench
 * workloads, 1.06–2.02×. On the local transport (one GPU) it can be slower where bags are long
 * (docs/embedding_alltoall.md, Known limits). One rank on a GPU has nothing to exchange: impl 0
 * (the lookup alone, straight into out), which the fused kernel only matched or lost to there —
 * 0.83–1.02× of impl 0 on the 7 bf16 workloads (run 931887a, one H200; 0.83 at L = 1, 0.88 at
 * 262144/4/16/2). The cpu transport keeps 1 (both impls are its reference). */
int fco_ea_auto_impl(fco_comm_t comm) {
  return comm->nranks == 1 && comm->transport != FCO_TRANSPORT_CPU ? 0 : 1;
}

static int resolve_impl(fco_comm_t comm, int impl) {
  return impl != FCO_IMPL_AUTO ? impl : fco_ea_auto_impl(comm);
}

/* FNV-1a over the values (as int64): ranks compare the splits through one shape field. */
static int64_t split_hash(const void* a, int n, int is64) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) {
    uint64_t v = is64 ? (uint64_t)((const int64_t*)a)[i] : (uint64_t)(int64_t)((const int32_t*)a)[i];
    for (int k = 0; k < 8; k++) {
      h ^= (v >> (8 * k)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return (int64_t)(h >> 1); /* non-negative: prints as a plain number */
}

/* Checks of what the workspace query needs too; on success *T and *B are the totals. */
static fco_result_t check_splits(fco_comm_t comm, const int32_t* tables_per_rank,
                                 const int64_t* batch_per_rank, int64_t dim, fco_dtype_t dtype,
                                 int impl, const char* fn, int64_t* T, int64_t* B) {
  if (!comm) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "%s: comm is NULL", fn);
  if (!tables_per_rank)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: tables_per_rank is NULL", fn);
  if (!batch_per_rank)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: batch_per_rank is NULL", fn);
  int64_t t = 0, b = 0;
  for (int q = 0; q < comm->nranks; q++) {
    if (tables_per_rank[q] < 0)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: tables_per_rank[%d] = %d is negative",
                           fn, q, (int)tables_per_rank[q]);
    if (batch_per_rank[q] < 0)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: batch_per_rank[%d] = %lld is negative", fn, q,
                           (long long)batch_per_rank[q]);
    t += tables_per_rank[q];
    /* each entry checked before it is added: a huge one must not wrap the sum back to a
     * legal B (b < 2^31 here, so the difference cannot overflow) */
    if (batch_per_rank[q] >= ((int64_t)1 << 31) - b)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: batch_per_rank[%d] = %lld takes the global batch to 2^31 or "
                           "more (%lld before it)", fn, q, (long long)batch_per_rank[q],
                           (long long)b);
    b += batch_per_rank[q];
    if (t > FCO_EMBEDDING_MAX_TABLES)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: tables_per_rank sums to %lld or more, over "
                           "FCO_EMBEDDING_MAX_TABLES (%d)", fn, (long long)t,
                           FCO_EMBEDDING_MAX_TABLES);
  }
  if (t < 1)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: tables_per_rank sums to 0 (no table on any rank)", fn);
  if (b < 1)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: batch_per_rank sums to 0 (empty global batch)", fn);
  if (dim < 1 || dim > FCO_EMBEDDING_MAX_DIM)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: dim %lld is not in 1..%d", fn,
                         (long long)dim, FCO_EMBEDDING_MAX_DIM);
  if (fco_dtype_size(dtype) == 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: dtype %d is not FCO_F32, FCO_F16 or FCO_BF16", fn, (int)dtype);
  if (impl != FCO_IMPL_AUTO && (impl < 0 || impl >= FCO_EMBEDDING_ALLTOALL_NUM_IMPLS))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: impl %d is not 0..%d or FCO_IMPL_AUTO (-1)", fn, impl,
                         FCO_EMBEDDING_ALLTOALL_NUM_IMPLS - 1);
  *T = t;
  *B = b;
  return FCO_OK;
}

fco_result_t fco_embedding_alltoall_workspace(fco_comm_t comm, const int32_t* tables_per_rank,
                                              const int64_t* batch_per_rank, int64_t dim,
                                              fco_dtype_t dtype, int impl, size_t* bytes) {
  const char* fn = "fco_embedding_alltoall_workspace";
  int64_t T, B;
  FCO_CHECK(check_splits(comm, tables_per_rank, batch_per_rank, dim, dtype, impl, fn, &T, &B));
  if (!bytes) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: bytes is NULL", fn);
  *bytes = fco_ea_workspace(comm->transport, resolve_impl(comm, impl), tables_per_rank,
                            batch_per_rank, comm->nranks, dim, fco_dtype_size(dtype));
  return FCO_OK;
}

const char* fco_embedding_alltoall_impl_name(fco_comm_t comm, int impl) {
  if (!comm) return NULL;
  if (impl == FCO_IMPL_AUTO) return "auto";
  return fco_op_impl_name(FCO_OP_EMBEDDING_ALLTOALL, comm->transport, impl);
}

static int misaligned(const void* p, size_t a) { return p && ((uintptr_t)p % a) != 0; }

/* [a, a + na) and [b, b + nb) overlap (NULL or empty never does). */
static int overlap(const void* a, size_t na, const void* b, size_t nb) {
  if (!a || !b || !na || !nb) return 0;
  const char *x = (const char*)a, *y = (const char*)b;
  return x < y + nb && y < x + na;
}

/* The GPU kernels' knobs (fco_ea_knobs_t; src/cuda/embedding_alltoall.cu's header, the docs'
 * knob table), read once here, on every transport, into the call's record: the launchers read
 * no environment (until session 53 they read it again at every launch, after this check). The
 * discrete ones at a value no kernel exists for are refused before anything is issued (as
 * fco_gemv_allreduce's knobs) — until session 52 such values were taken silently as another
 * setting (e.g. FCO_EA_LEAN_DYN=2 as 0, FCO_EA_LEAN_BLOCKS=5 as 3). The ranged ones
 * (FCO_EA_LEAN_SPLIT, _MIX, _TABLES, FCO_EA_LAND_KB, FCO_EA_SIGNAL_EVERY, FCO_EA_MIX) are clamped
 * by the launchers, _CHUNKS here; FCO_EA_LEAN, _DIRECT, _LAND_POLL and _DECODE at another value
 * are said on stderr and taken as unset. */
static fco_result_t read_knobs(fco_comm_t comm, const char* fn, fco_ea_knobs_t* k) {
  static const struct {
    const char* name;
    long long dflt, ok[3]; /* ok: the values a kernel exists for (dflt among them) */
    const char* says;
    size_t field;
  } kDiscrete[] = {
      {"FCO_EA_LOOKUP_DYN", -1, {-1, 0, 1}, "0 or 1 (unset or -1: automatic)",
       offsetof(fco_ea_knobs_t, lookup_dyn)},
      {"FCO_EA_LEAN_DYN", -1, {-1, 0, 1}, "0 or 1 (unset or -1: automatic)",
       offsetof(fco_ea_knobs_t, lean_dyn)},
      {"FCO_EA_LEAN_BLOCKS", -1, {-1, 3, 4}, "3 or 4 (unset or -1: automatic)",
       offsetof(fco_ea_knobs_t, lean_blocks)},
      {"FCO_EA_LEAN_STAGES", FCO_EA_LEAN_STAGES, {3, 4, 4}, "3 or 4 (unset: 3)",
       offsetof(fco_ea_knobs_t, lean_stages)},
      {"FCO_EA_PROFILE", 0, {0, 1, 2}, "0, 1 or 2 (unset: 0)", offsetof(fco_ea_knobs_t, profile)},
      {"FCO_EA_STREAM", -1, {-1, 0, 1}, "0 or 1 (unset or -1: automatic)",
       offsetof(fco_ea_knobs_t, stream)},
      {"FCO_EA_BAGS", 0, {0, 1, 4}, "1 or 4 (unset or 0: automatic)",
       offsetof(fco_ea_knobs_t, bags)},
  };
  static const struct {
    const char* name;
    long long dflt;
    size_t field;
  } kRanged[] = {
      {"FCO_EA_LEAN_SPLIT", 60, offsetof(fco_ea_knobs_t, lean_split)},
      {"FCO_EA_LEAN_MIX", 0, offsetof(fco_ea_knobs_t, lean_mix)},
      {"FCO_EA_LEAN_TABLES", 1, offsetof(fco_ea_knobs_t, lean_tables)},
      {"FCO_EA_LAND_KB", 64, offsetof(fco_ea_knobs_t, land_kb)},
      {"FCO_EA_SIGNAL_EVERY", FCO_EA_SIGNAL_EVERY_DEFAULT, offsetof(fco_ea_knobs_t, signal_every)},
      {"FCO_EA_MIX", -1, offsetof(fco_ea_knobs_t, mix)},
  };
  memset(k, 0, sizeof *k);
  for (size_t i = 0; i < sizeof kDiscrete / sizeof kDiscrete[0]; i++) {
    const long long v = fco_env_int(kDiscrete[i].name, kDiscrete[i].dflt);
    if (v != kDiscrete[i].ok[0] && v != kDiscrete[i].ok[1] && v != kDiscrete[i].ok[2])
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: %s=%lld is not %s", fn,
                           kDiscrete[i].name, v, kDiscrete[i].says);
    *(int64_t*)((char*)k + kDiscrete[i].field) = v;
  }
  for (size_t i = 0; i < sizeof kRanged / sizeof kRanged[0]; i++)
    *(int64_t*)((char*)k + kRanged[i].field) = fco_env_int(kRanged[i].name, kRanged[i].dflt);
  const long long chunks = fco_env_int("FCO_EA_LEAN_CHUNKS", LLONG_MIN); /* unset: 0 (rule) */
  k->lean_chunks = chunks == LLONG_MIN ? 0 : chunks < 1 ? 1 : chunks > 64 ? 64 : chunks;
  k->lean = fco_env_flag("FCO_EA_LEAN", 1);
  k->direct = fco_env_flag("FCO_EA_DIRECT", 1);
  k->land_poll = fco_env_flag("FCO_EA_LAND_POLL", 0);
  static const char* const kDecode[] = {"old", "0", "cursor", "1", NULL};
  k->decode = fco_env_choice("FCO_EA_DECODE", kDecode, -1);
  /* test hook (not an API): rank r's odd blocks of the lean fused kernel fail their symmetric
   * out resolve (src/cuda/embedding_alltoall_fused_lean.cu, test_embedding_alltoall_direct) */
  k->fault_resolve = fco_env_int("FCO_FAULT_EA_RESOLVE", -1);
  return FCO_OK;
}

static fco_result_t embedding_alltoall_call(fco_comm_t comm, const void* weight,
                                            const int64_t* table_rows,
                                            const int32_t* tables_per_rank,
                                            const int64_t* batch_per_rank, int64_t dim,
                                            fco_dtype_t dtype, const void* offsets,
                                            const void* indices, int64_t num_indices,
                                            fco_emb_index_t index_type,
                                            const float* per_sample_weights,
                                            fco_emb_pooling_t pooling, void* out, int impl,
                                            void* stream) {
  const char* fn = "fco_embedding_alltoall";
  int64_t T, B;
  FCO_CHECK(check_splits(comm, tables_per_rank, batch_per_rank, dim, dtype, impl, fn, &T, &B));
  if (comm->async_error != FCO_OK) return fco_async_refuse(comm, fn);
  const int me = comm->rank;
  const int64_t Tme = tables_per_rank[me], bme = batch_per_rank[me];
  const size_t es = fco_dtype_size(dtype);
  if ((int)index_type < 0 || index_type >= FCO_EMB_NUM_INDEX_TYPES)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: index_type %d is not FCO_EMB_INDEX_I32 or FCO_EMB_INDEX_I64", fn,
                         (int)index_type);
  if ((int)pooling < 0 || pooling >= FCO_EMB_NUM_POOLINGS)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: pooling %d is not FCO_EMB_POOL_SUM or FCO_EMB_POOL_MEAN", fn,
                         (int)pooling);
  if (num_indices < 0 || num_indices > ((int64_t)1 << 40))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: num_indices %lld is negative or absurd (> 2^40)", fn,
                         (long long)num_indices);
  const size_t is = index_type == FCO_EMB_INDEX_I64 ? 8 : 4;
  int64_t total_rows = 0;
  if (Tme > 0) {
    if (!table_rows)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: table_rows is NULL but rank %d owns %lld tables", fn, me,
                           (long long)Tme);
    for (int64_t t = 0; t < Tme; t++) {
      if (table_rows[t] < 0 || table_rows[t] > ((int64_t)1 << 40))
        return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                             "%s: table_rows[%lld] = %lld is negative or absurd (> 2^40)", fn,
                             (long long)t, (long long)table_rows[t]);
      total_rows += table_rows[t];
    }
    if (!weight && total_rows > 0)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: weight is NULL but rank %d owns %lld tables", fn, me,
                           (long long)Tme);
    if (!offsets)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: offsets is NULL but rank %d owns %lld tables", fn, me,
                           (long long)Tme);
  }
  if (num_indices > 0 && !indices)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: indices is NULL with num_indices = %lld", fn, (long long)num_indices);
  if (bme > 0 && !out)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: out is NULL but rank %d owns %lld samples", fn, me, (long long)bme);
  if (misaligned(weight, es) || misaligned(out, es))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: %s %p is not aligned to the dtype size %zu", fn,
                         misaligned(weight, es) ? "weight" : "out",
                         misaligned(weight, es) ? weight : (const void*)out, es);
  if (misaligned(offsets, is) || misaligned(indices, is))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: %s %p is not aligned to the index size %zu", fn,
                         misaligned(offsets, is) ? "offsets" : "indices",
                         misaligned(offsets, is) ? offsets : indices, is);
  if (misaligned(per_sample_weights, 4))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: per_sample_weights %p is not 4-byte aligned", fn,
                         (const void*)per_sample_weights);
  const size_t out_bytes = (size_t)bme * (size_t)T * (size_t)dim * es;
  /* The host arrays too: the cpu reference reads them while it writes out (until session 55
   * an out holding tables_per_rank was accepted, and crashed it). */
  const void* ins[7] = {weight, offsets, indices, per_sample_weights, tables_per_rank,
                        batch_per_rank, table_rows};
  const size_t in_bytes[7] = {(size_t)total_rows * (size_t)dim * es,
                              Tme > 0 ? ((size_t)Tme * (size_t)B + 1) * is : 0,
                              (size_t)num_indices * is,
                              per_sample_weights ? (size_t)num_indices * 4 : 0,
                              (size_t)comm->nranks * sizeof *tables_per_rank,
                              (size_t)comm->nranks * sizeof *batch_per_rank,
                              table_rows ? (size_t)Tme * sizeof *table_rows : 0};
  static const char* const in_names[7] = {"weight", "offsets", "indices", "per_sample_weights",
                                          "tables_per_rank", "batch_per_rank", "table_rows"};
  for (int i = 0; i < 7; i++)
    if (overlap(out, out_bytes, ins[i], in_bytes[i]))
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: out overlaps %s", fn,
                           in_names[i]);
  fco_ea_knobs_t knobs;
  FCO_CHECK(read_knobs(comm, fn, &knobs));

  fco_op_t op;
  memset(&op, 0, sizeof op);
  op.kind = FCO_OP_EMBEDDING_ALLTOALL;
  op.comm = comm;
  op.impl = resolve_impl(comm, impl);
  op.stream = stream;
  op.ws_bytes = fco_ea_workspace(comm->transport, op.impl, tables_per_rank, batch_per_rank,
                                 comm->nranks, dim, es);
  fco_ea_args_t a;
  memset(&a, 0, sizeof a);
  a.weight = weight;
  a.table_rows = table_rows;
  a.tables_per_rank = tables_per_rank;
  a.batch_per_rank = batch_per_rank;
  a.offsets = offsets;
  a.indices = indices;
  a.per_sample_weights = per_sample_weights;
  a.out = out;
  a.dim = dim;
  a.batch = B;
  a.num_indices = num_indices;
  a.num_tables = (int32_t)T;
  a.nranks = comm->nranks;
  a.rank = me;
  a.dtype = dtype;
  a.index_type = index_type;
  a.pooling = pooling;
  a.knobs = knobs;
  memcpy(op.u.raw, &a, sizeof a);
  op.shape[0] = T;
  op.shape[1] = dim;
  op.shape[2] = B;
  op.shape[3] = (int64_t)dtype;
  op.shape[4] = (int64_t)pooling;
  op.shape[5] = split_hash(tables_per_rank, comm->nranks, 0);
  op.shape[6] = split_hash(batch_per_rank, comm->nranks, 1);
  return fco_op_submit(&op);
}

/* The public entry: a refusal inside a group is noted (fco_op_call_result). */
fco_result_t fco_embedding_alltoall(fco_comm_t comm, const void* weight, const int64_t* table_rows,
                                    const int32_t* tables_per_rank, const int64_t* batch_per_rank,
                                    int64_t dim, fco_dtype_t dtype, const void* offsets,
                                    const void* indices, int64_t num_indices,
                                    fco_emb_index_t index_type, const float* per_sample_weights,
                                    fco_emb_pooling_t pooling, void* out, int impl, void* stream) {
  return fco_op_call_result(comm, embedding_alltoall_call(comm, weight, table_rows, tables_per_rank,
                                                          batch_per_rank, dim, dtype, offsets,
                                                          indices, num_indices, index_type,
                                                          per_sample_weights, pooling, out, impl,
                                                          stream));
}
