/*
 * ea_fixture.h — the fixture of the fco_embedding_alltoall tests (test_embedding_alltoall.c: the
 * operator's semantics; test_embedding_alltoall_bad.c: bad data and bad arguments): a random
 * problem (uneven tables and batch splits, ragged bags) and its host copy, its rank buffers
 * (ordinary, shifted off alignment or symmetric outs: the layout state below), every rank's
 * call in one group, and the reference check (exact, or float64 by relative error). Every test
 * program links it (tests/common); only those two include this header.
 */
#ifndef FCO_EA_FIXTURE_H_
#define FCO_EA_FIXTURE_H_

#include "test.h"

#define EA_MAX_P 8 /* the largest world (FCO_TEST_MAX_RANKS ≤ 8) */

typedef struct {
  int P;
  int32_t tpr[EA_MAX_P];
  int64_t bpr[EA_MAX_P];
  int64_t D, T, B;
  fco_dtype_t dt;
  fco_emb_index_t it;
  int weighted, real;
  fco_emb_pooling_t pool;
  /* host data per rank */
  int64_t* rows[EA_MAX_P];
  int64_t total_rows[EA_MAX_P];
  float* weight[EA_MAX_P]; /* values as stored (already rounded to dt) */
  int64_t* offsets[EA_MAX_P];
  int64_t* indices[EA_MAX_P];
  int64_t nnz[EA_MAX_P];
  float* psw[EA_MAX_P];
  /* rank buffers (device on GPU transports) */
  void *d_weight[EA_MAX_P], *d_offsets[EA_MAX_P], *d_indices[EA_MAX_P], *d_psw[EA_MAX_P],
      *d_out[EA_MAX_P];
  size_t out_bytes[EA_MAX_P];
  size_t shift[EA_MAX_P]; /* d_weight and d_out lie this many bytes past their allocations */
  void* d_sym[EA_MAX_P];  /* fco_mem_alloc'd buffers (ea_sym_mask != 0), NULL otherwise */
} ea_prob_t;

/* ---- the layout state ea_prob_upload reads (a test sets it around its calls and resets it) -- */
/* Symmetric outputs (fco_mem_alloc): when ea_sym_mask != 0 every rank allocates a symmetric
 * buffer (collective, the same bytes: the largest out) and rank r's out lies in it, 256·(r + 1)
 * bytes in (offsets differ: each rank announces its own), iff bit r is set; the others keep an
 * ordinary out. Peers then store straight into the symmetric outs (the fused lean kernel).
 * ea_prob_free reads it too: set it before the upload, reset it after the free. Default 0. */
extern unsigned ea_sym_mask;
/* Bytes by which ea_prob_upload shifts rank ea_shift_rank's weight and out off 16-byte
 * alignment (default 0: none); ea_shift_rank < 0 (the default, -1): every rank's. */
extern size_t ea_shift_bytes;
extern int ea_shift_rank;
/* ea_long_bags > 0 (default 0): one bag in 8 that ea_prob_make* draws holds
 * [ea_long_bags / 4, ea_long_bags] rows (a bag that spans several lane groups of a lean warp
 * tile); the others as below. */
extern int64_t ea_long_bags;
/* ea_even_len ≥ 0 (default -1: off): every bag of the even-numbered tables of a rank that
 * ea_prob_make* draws holds exactly ea_even_len rows (tiles of equal bags: the lean warp tile's
 * other path), the odd-numbered tables' bags as below. */
extern int64_t ea_even_len;

/* ---- random values: one generator, seeded by ea_prob_make* (and by a test that redraws) ---- */
extern uint64_t ea_rng;
uint64_t ea_rnd(void);
int64_t ea_rnd_in(int64_t lo, int64_t hi); /* uniform in [lo, hi] */
float ea_round_to(fco_dtype_t dt, float v); /* v as stored in dtype dt */

/* First global table of rank r (Σ of the ranks before it). */
int64_t ea_toff(const ea_prob_t* p, int r);

/* A random problem (ea_prob_make): T_r ∈ [0, 3] (T ≥ 1), b_s ∈ [0, 6] (B ≥ 1), rows ∈ [1, 40],
 * bags of 0..6 (a quarter empty); exact values (small integers, weights multiples of 1/2) or,
 * with real, uniform in [-1, 1). ea_prob_make_shape with bmax > 0, a big one: T_r ∈ [2, 3],
 * b_s ∈ [bmax/2, bmax]; and the given T_r and b_s where tpr / bpr are not NULL (T ≥ 1, B ≥ 1).
 * Both seed ea_rng with seed. */
void ea_prob_make_shape(ea_prob_t* p, int P, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                        int weighted, fco_emb_pooling_t pool, int real, uint64_t seed,
                        int64_t bmax, const int32_t* tpr, const int64_t* bpr);
void ea_prob_make(ea_prob_t* p, int P, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                  int weighted, fco_emb_pooling_t pool, int real, uint64_t seed);
void ea_prob_free(const t_world_t* w, ea_prob_t* p);

/* Upload rank r's inputs (converted to dt / index type); ea_poison_out: poison its out + guard. */
void ea_upload_inputs(const t_world_t* w, ea_prob_t* p, int r);
void ea_poison_out(const t_world_t* w, ea_prob_t* p, int r);
/* Every rank's buffers (as the layout state says), inputs uploaded, outs poisoned. */
void ea_prob_upload(const t_world_t* w, ea_prob_t* p);

/* Every rank's call in one group; the first failure. */
fco_result_t ea_prob_run(const t_world_t* w, const ea_prob_t* p, int impl, void* stream);
/* Rank r's call alone (outside a group: a thread per rank). */
fco_result_t ea_prob_run_rank(const t_world_t* w, const ea_prob_t* p, int r, int impl,
                              void* stream);

/* Compare every rank's out (and its guard) with the reference; returns wrong elements (prints
 * a few). Exact problems bit for bit; real ones by relative error (f32 1e-5, f16 2e-3,
 * bf16 1e-2) against float64, but bit for bit on the cpu transport (its backend is the
 * reference: fp32 in bag order, fmaf, one division). Bad bags count as empty and bad indices
 * are skipped, as the library does. */
size_t ea_prob_check(const t_world_t* w, const ea_prob_t* p);

/* Upload, every rank's call (impl, the default stream), sync: no error on any rank and
 * ea_prob_check() == 0. The caller frees the problem. */
void ea_run_checked(const t_world_t* w, ea_prob_t* p, int impl);
/* t_context: what, the problem's shape and options, impl and seed. */
void ea_describe(const ea_prob_t* p, int impl, uint64_t seed, const char* what);

#endif /* FCO_EA_FIXTURE_H_ */
