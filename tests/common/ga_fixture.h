/*
 * ga_fixture.h — the fixture of the fco_gemm_alltoall tests (test_gemm_alltoall.c: the
 * operator's semantics; test_gemm_alltoall_checks.c: bad input and AUTO's rule): cases of ragged
 * counts with inputs rounded to the dtype, per-rank buffers (outputs poisoned, guarded, and in
 * symmetric memory where ga_sym_mask says), one call issued for every rank with or without the
 * host hints, the float64 reference check, and a refused call's check. Every test program links
 * it (tests/common); only those two include this header.
 *
 * Error bound per element (ga_check): |got − ref| ≤ rtol·|ref| + atol·Σ_k |a_k·w_k| with
 * (rtol, atol) = f32 (1e-5, 1e-5), f16 (2e-3, 1e-3), bf16 (1e-2, 4e-3): output rounding
 * (relative) plus fp32 accumulation in any order (bounded by the sum of magnitudes), plus half an
 * f16 subnormal step for f16 (results below 2^-14 round absolutely).
 */
#ifndef FCO_GA_FIXTURE_H_
#define FCO_GA_FIXTURE_H_

#include "test.h"

#define GA_MAXP 8
#define GA_MAXE 3

typedef struct {
  int P, E[GA_MAXP];
  int K, N, layout;
  fco_dtype_t dtype;
  int32_t* counts[GA_MAXP];       /* host [E_r][P] */
  int32_t recv[GA_MAXP][GA_MAXP]; /* recv[s][r]: rows s gets from r */
  int64_t a_rows, out_rows;
  float* a[GA_MAXP];              /* host copies, values exactly representable in dtype */
  float* w[GA_MAXP];
} ga_case_t;

typedef struct {
  void *a[GA_MAXP], *w[GA_MAXP], *out[GA_MAXP];
  int32_t* counts[GA_MAXP]; /* device */
  size_t out_bytes[GA_MAXP];
  void* sym[GA_MAXP]; /* fco_mem_alloc'd buffers (ga_sym_mask != 0), NULL otherwise */
} ga_bufs_t;

/* Symmetric outputs (fco_mem_alloc): when ga_sym_mask != 0 every rank allocates a symmetric
 * buffer (collective) and rank r's out lies in it, 256·(r + 1) bytes in (offsets differ by rank:
 * each header carries its own), iff bit r is set; the others keep an ordinary out. Peers then
 * store straight into the symmetric outs (impls 1 and 2 on the GPU transports). 0 unless a test
 * sets it (test_gemm_alltoall.c does). */
extern unsigned ga_sym_mask;

/* CUDA device of rank r (-1 on cpu). */
int ga_dev_of(const t_world_t* w, int r);

/* An empty case of this shape (no experts, no counts yet). */
void ga_case_init(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt);
/* Counts: ragged, with zero segments; `big` makes some segments span several 128-row tiles. */
void ga_make_case(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt, uint64_t seed,
                  int big, int slack);
/* recv and the capacities from c->counts (+ slack), then the inputs (values from seed s). */
void ga_finish_case(ga_case_t* c, uint64_t s, int slack);
/* A case with 2 experts per rank and zeroed counts [2][P] for the caller to fill (then
 * ga_finish_case). */
void ga_two_expert_case(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt);
void ga_free_case(ga_case_t* c);
/* ga_make_case, drawn again (seed, t_mix(seed), ...) until the case moves rows: for tests that
 * need data pushed (FCO_FAULT_GA_PUSH fails impl 2's first push; a case whose counts are all
 * zero, about one draw in nine at P = 1, pushes nothing and its call succeeds). */
void ga_make_moving_case(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt,
                         uint64_t seed, int big, int slack);

/* Every rank's A, W, out (symmetric where ga_sym_mask says) and device counts, inputs uploaded,
 * every out poisoned and its guard set (ga_poison: fresh device memory is not poison, and a
 * first call's ga_check would report its untouched rows as written). */
void ga_upload(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b);
/* Every out poisoned, its guard set. */
void ga_poison(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b);
void ga_free_bufs(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b);
/* Fresh values (from seed) in every rank's A, host reference and device copy: for graph replays. */
void ga_refill_a(const t_world_t* w, ga_case_t* c, ga_bufs_t* b, uint64_t seed);

/* Host hints of one call (rank r's counts_host / recv_rows_host), NULL = none. The library
 * reads them when the group executes, so they must stay valid until fco_group_end returns. */
typedef struct {
  const int32_t* counts[GA_MAXP];
  const int32_t* recv[GA_MAXP];
  void (*before_end)(void* arg); /* called after the last submit, before fco_group_end */
  void* arg;
} ga_hints_t;

/* Every rank's call in one fco_group_start/end (h: the hints, or NULL); the first failure. */
fco_result_t ga_issue_hints(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b, int impl,
                            const ga_hints_t* h, void* stream);
/* hints: 0 none, 1 counts_host + recv_rows_host (the case's own, right). */
fco_result_t ga_issue(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b, int impl,
                      int hints, void* stream);

/* Rank r's call alone (outside a group: a thread per rank), hints as for ga_issue. */
fco_result_t ga_issue_rank(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b, int r,
                           int impl, int hints, void* stream);

/* Wrong elements (printed, first few) across every rank; rows past the total must be poison
 * and the guard intact. */
size_t ga_check(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b);

/* Bytes of any rank's out (or its guard) that are no longer what ga_poison wrote. */
size_t ga_untouched(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b);

/* Upload, poison, one call (impl, with or without the hints), sync: no error anywhere and every
 * rank's out equal to the reference; frees the case. */
void ga_run_checked(const t_world_t* w, ga_case_t* c, int impl, int hints);

/* A call that must be refused (r: what it returned): FCO_ERR_INVALID_ARGUMENT from the call or,
 * for device-side checks, from some rank's async error, and no byte of any out written. Frees the
 * case and destroys the world's communicators (unusable after a device-side error; destroy must
 * still work). */
void ga_expect_rejected(t_world_t* w, ga_case_t* c, ga_bufs_t* b, fco_result_t r);

#endif /* FCO_GA_FIXTURE_H_ */
