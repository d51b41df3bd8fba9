/*
 * embedding_alltoall.h — the argument record of fco_embedding_alltoall (stored in op.u.raw)
 * and the layout helpers every backend shares (split prefixes, workspace areas). Plain C, also
 * included by src/cuda/embedding_alltoall.cu. Semantics and layouts: include/fco.h.
 *
 * Host arrays (table_rows, tables_per_rank, batch_per_rank) are pointers to caller memory,
 * valid until the call (or fco_group_end) returns: the record must stay small (op.u.raw), and
 * the backends copy what they need (GPU: into kernel parameters) before returning.
 */
#ifndef FCO_OPS_EMBEDDING_ALLTOALL_H_
#define FCO_OPS_EMBEDDING_ALLTOALL_H_

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The GPU kernels' knobs (FCO_EA_*: src/cuda/embedding_alltoall.cu's header, the docs' knob
 * table), read once a call by the op layer (src/ops/embedding_alltoall.c, read_knobs: the discrete
 * ones refused at values no kernel exists for) and carried in the call's record, so the launch —
 * inside a group at fco_group_end — runs what was checked and reads no environment. Each field is
 * the value fco_env_int / _flag / _choice gave, the default where unset; the ranged ones are
 * clamped by the launchers. lean_chunks: 0 where unset (the tile rule's choice by the mean bag
 * length), else 1..64; decode: FCO_EA_DECODE's choice (old / 0 / cursor / 1: 0..3) or -1. */
typedef struct {
  int64_t lean, lean_blocks, lean_dyn, lean_split, lean_mix, lean_stages, lean_chunks;
  int64_t lookup_dyn, lean_tables, land_kb, signal_every, land_poll, stream, bags, mix;
  int64_t decode, profile, direct;
  int64_t fault_resolve; /* test hook FCO_FAULT_EA_RESOLVE (not an API; -1 where unset) */
} fco_ea_knobs_t;
#define FCO_EA_SIGNAL_EVERY_DEFAULT 4 /* remote tiles per counter batch (the older fused kernels) */

typedef struct {
  const void* weight;             /* [Σ rows, D] local tables packed                        */
  const int64_t* table_rows;      /* host [T_me]                                            */
  const int32_t* tables_per_rank; /* host [P]                                               */
  const int64_t* batch_per_rank;  /* host [P]                                               */
  const void* offsets;            /* [T_me·B + 1] of index_type                              */
  const void* indices;            /* [num_indices] of index_type                             */
  const float* per_sample_weights;/* [num_indices] or NULL                                   */
  void* out;                      /* [b_me, T, D]                                            */
  int64_t dim, batch, num_indices;
  int32_t num_tables;             /* T (all ranks)                                           */
  int32_t nranks, rank;
  fco_dtype_t dtype;
  fco_emb_index_t index_type;
  fco_emb_pooling_t pooling;
  fco_ea_knobs_t knobs;           /* GPU transports only                                    */
} fco_ea_args_t;

#if defined(__cplusplus)
static_assert(sizeof(fco_ea_args_t) <= FCO_OP_ARGS_BYTES, "fco_ea_args_t must fit op.u.raw");
#else
_Static_assert(sizeof(fco_ea_args_t) <= FCO_OP_ARGS_BYTES, "fco_ea_args_t must fit op.u.raw");
#endif

static inline const fco_ea_args_t* fco_ea_args(const fco_op_t* op) {
  return (const fco_ea_args_t*)(const void*)op->u.raw;
}

/* Σ_{q<r} tables_per_rank[q] / batch_per_rank[q]. */
static inline int32_t fco_ea_table_off(const fco_ea_args_t* a, int r) {
  int32_t s = 0;
  for (int q = 0; q < r; q++) s += a->tables_per_rank[q];
  return s;
}
static inline int64_t fco_ea_batch_off(const fco_ea_args_t* a, int r) {
  int64_t s = 0;
  for (int q = 0; q < r; q++) s += a->batch_per_rank[q];
  return s;
}

/* Workspace areas (bytes, rounded to 256), from values every rank agrees on:
 *   recv R = max_s b_s · T · D · esize     (a destination's incoming data, laid out as its out)
 *   send S = max_q T_q · B · D · esize     (a source's pooled [B, T_q, D], impl 0)          */
static inline size_t fco_ea_recv_bytes(const int32_t* tables_per_rank,
                                       const int64_t* batch_per_rank, int P, int64_t dim,
                                       size_t esize) {
  int64_t T = 0, bmax = 0;
  for (int q = 0; q < P; q++) {
    T += tables_per_rank[q];
    if (batch_per_rank[q] > bmax) bmax = batch_per_rank[q];
  }
  return fco_round_up((size_t)bmax * (size_t)T * (size_t)dim * esize, 256);
}
static inline size_t fco_ea_send_bytes(const int32_t* tables_per_rank,
                                       const int64_t* batch_per_rank, int P, int64_t dim,
                                       size_t esize) {
  int64_t B = 0, tmax = 0;
  for (int q = 0; q < P; q++) {
    B += batch_per_rank[q];
    if (tables_per_rank[q] > tmax) tmax = tables_per_rank[q];
  }
  return fco_round_up((size_t)tmax * (size_t)B * (size_t)dim * esize, 256);
}

/* Workspace per rank of impl on transport t (see include/fco.h). */
static inline size_t fco_ea_workspace(fco_transport_t t, int impl, const int32_t* tables_per_rank,
                                      const int64_t* batch_per_rank, int P, int64_t dim,
                                      size_t esize) {
  if (P <= 1) return 0;
  size_t R = fco_ea_recv_bytes(tables_per_rank, batch_per_rank, P, dim, esize);
  size_t S = fco_ea_send_bytes(tables_per_rank, batch_per_rank, P, dim, esize);
  if (t == FCO_TRANSPORT_CPU) return impl == 0 ? S : R;
  return impl == 0 ? S + R : 2 * R;
}

/* AUTO's choice (embedding_alltoall.c: the rule and its measurements): impl 0 for one rank on a
 * GPU transport, else the fused impl 1. A host function, exported by libfco (not in fco.h) for
 * the tests. */
int fco_ea_auto_impl(fco_comm_t comm);

/* Bad-data kinds, in the device error record's `slot` (GPU) and in messages. */
#define FCO_EA_BAD_INDEX 1   /* an index outside its table: position in indices          */
#define FCO_EA_BAD_OFFSETS 2 /* offsets decrease or leave [0, num_indices]: position in offsets */

#ifdef __cplusplus
}
#endif
#endif /* FCO_OPS_EMBEDDING_ALLTOALL_H_ */
