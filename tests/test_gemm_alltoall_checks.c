/*
 * test_gemm_alltoall_checks.c — fco_gemm_alltoall's checks of its input and AUTO's choice of
 * impl (its semantics: test_gemm_alltoall.c; the fixture both share: tests/common/ga_fixture.h —
 * outputs poisoned first and guarded after their capacity, the float64 reference check).
 *   Bad arguments at P = 1 (num_experts, w_layout, counts, k, impl, dtype, a negative
 *   counts_host, recv_rows_host negative or over out_rows without counts_host, out overlapping
 *   a or w; each bound at its edge; the workspace need and the impl names); ranks that disagree
 *   on w_layout or out_rows (P = 2, cpu and local). Bad counts on a fresh world of up to 2
 *   ranks (out capacity too small, sum over a_rows, negative, -1 the edge: impl 1; on GPU
 *   transports also 2, on local also 0) and host hints unlike the counts (recv_rows_host off by
 *   one or 0 where rows come, counts_host unlike counts, recv_rows_host changed between the call
 *   and fco_group_end: cpu and local)
 *   must return or report FCO_ERR_INVALID_ARGUMENT and write nothing. On GPU transports also
 *   one rank's impl 0 with counts_host unlike the counts (refused, nothing written past the rows
 *   the hints size), impl 0's batched-GEMM rule (fco_ga_batched_rows, every transport), and
 *   AUTO's rule read back through fco_last_plan: at one rank (impl 0 where
 *   the hint shows every expert with the same rows, else tiles where the mean rows per expert ·
 *   N < 2^21 at K ≤ 2048, every expert ≤ 256 rows above) and at
 *   P = 2..max (tiles where K ≤ 2048, on local only where a_rows / E_r · N < 2^20 and, above
 *   two ranks, a_rows ≤ 2048; those calls also checked against the reference); the same rule
 *   as a host function on made-up communicators on every transport (auto_rule_host: CI runs it
 *   without a GPU), with fco_ga_agree's revision of a local batch (agree_rule). The
 *   per-call knobs of impls 1 and 2 (FCO_GA_TILES_BLOCKS, _PUSH_BLOCKS, _CHUNK_ROWS) read back
 *   from fco_last_plan, a non-integer value ignored (GPU transports, P up to 2).
 *   The FCO_GA_* knobs stay as the caller set them (test_gemm_alltoall's parts reset every knob
 *   they set, t_knob_reset).
 *   make test   or   build/tests/test_gemm_alltoall_checks   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_MAX_RANKS (up to 8) the largest world of the AUTO
 * rule.
 */
#include <stdlib.h>
#include <string.h>

#include "ga_fixture.h"
/* fco_ga_agree's made-up ops (agree_rule): the library's internal types */
#include "../src/core/internal.h"
#include "../src/ops/gemm_alltoall.h"

/* Bad counts on a fresh world: the call fails (cpu, or host-side checks) or reports
 * FCO_ERR_INVALID_ARGUMENT asynchronously (device-side checks); nothing is written. */
static void bad_counts(fco_transport_t t, int P, int kind, int impl) {
  static const char* kinds[] = {"out_rows too small", "counts sum over a_rows", "negative count",
                                "count -1 (the edge)"};
  t_world_t w;
  t_context("P=%d bad counts: %s, impl %d", P, kinds[kind], impl);
  ASSERT_OK(t_world_init(&w, t, P, NULL));
  ga_case_t c;
  ga_bufs_t b;
  ga_make_case(&c, P, 20, 12, 0, FCO_F32, t_next_seed(), 0, 10);
  c.counts[0][0] += 5; /* at least one row, so the capacities can be too small (fits the slack) */
  /* Capacities that fit exactly, then one broken. */
  int64_t max_a = 0, max_out = 0;
  int64_t recv[GA_MAXP] = {0};
  for (int r = 0; r < P; r++) {
    int64_t sum = 0;
    for (int i = 0; i < c.E[r] * P; i++) {
      sum += c.counts[r][i];
      recv[i % P] += c.counts[r][i];
    }
    if (sum > max_a) max_a = sum;
  }
  for (int q = 0; q < P; q++)
    if (recv[q] > max_out) max_out = recv[q];
  c.a_rows = max_a;
  c.out_rows = kind == 0 ? max_out - 1 : max_out;
  if (kind == 1) c.a_rows = max_a - 1;
  if (kind == 2) c.counts[P - 1][0] = -3;
  if (kind == 3) c.counts[P - 1][0] = -1; /* the edge: a mutant checking c < -1 passed -3 */
  ga_upload(&w, &c, &b);
  fco_result_t r = ga_issue(&w, &c, &b, impl, 0, NULL);
  /* cpu: the message says which check failed (a mutant swapping the verdict's messages passed) */
  if (t == FCO_TRANSPORT_CPU)
    for (int q = 0; q < P; q++) ASSERT_MSG(w.comms[q], kind == 0 ? "out_rows" : "invalid");
  ga_expect_rejected(&w, &c, &b, r);
}

/* The hint arrays of bad_hints kind 2: rewritten between the submits and fco_group_end, as a
 * caller's stack array that went out of scope would be (fco-bench did that). */
typedef struct {
  int32_t recv[GA_MAXP][GA_MAXP];
  int32_t counts[GA_MAXP][GA_MAXE * GA_MAXP];
} ga_hint_copy_t;

static void clobber_hints(void* arg) {
  ga_hint_copy_t* h = (ga_hint_copy_t*)arg;
  int32_t t = h->recv[0][0]; /* rank 0: rows from ranks 0 and 1 swapped (same total) */
  h->recv[0][0] = h->recv[0][1];
  h->recv[0][1] = t;
}

/* Hints that disagree with the counts, on a fresh world: kind 0 recv_rows_host (rank 0 expects
 * one row less from rank 1 and one more from itself), kind 1 counts_host (rank 1's first two
 * entries swapped: same totals), kind 2 recv_rows_host rewritten after the submits, before
 * fco_group_end, kind 3 counts_host with rank 1's last two entries swapped (its last expert),
 * kind 4 recv_rows_host 0 for rows that do come (rank 0 from rank 1: 0 is a hint, not "none"),
 * kind 5 recv_rows_host one row more than rank 1 sends rank 0 (alone: kind 0 also has one entry
 * too small, so a check for too-small hints only passed it; still within out_rows).
 * Checked where the truth is at hand (cpu: every kind; local impl 0: recv on the host,
 * counts_host by the digest; local impl 2: counts_host): FCO_ERR_INVALID_ARGUMENT, nothing
 * written. nccl cannot check recv_rows_host without an exchange: not run there. */
static void bad_hints(fco_transport_t t, int P, int kind, int impl) {
  static const char* kinds[] = {"recv_rows_host off by one", "counts_host unlike counts",
                                "recv_rows_host rewritten before fco_group_end",
                                "counts_host unlike counts in its last expert",
                                "recv_rows_host 0 where rows come",
                                "recv_rows_host one row more than sent"};
  t_world_t w;
  t_context("P=%d bad hints: %s, impl %d", P, kinds[kind], impl);
  ASSERT_OK(t_world_init(&w, t, P, NULL));
  ga_case_t c;
  ga_bufs_t b;
  ga_two_expert_case(&c, P, 20, 12, 0, FCO_F32);
  for (int r = 0; r < P; r++)
    for (int i = 0; i < 2 * P; i++) c.counts[r][i] = 2 + (r + 3 * i) % 5;
  /* Rank 1's first two entries differ (swapping them changes counts_host), and rank 0 gets a
   * different number of rows from rank 1 (13) than from itself (5): swapping those is wrong. */
  c.counts[1][0] = 9;
  ga_finish_case(&c, t_next_seed(), 4);
  ga_hint_copy_t hc;
  ga_hints_t h;
  memset(&h, 0, sizeof h);
  for (int r = 0; r < P; r++) {
    memcpy(hc.recv[r], c.recv[r], sizeof hc.recv[r]);
    memcpy(hc.counts[r], c.counts[r], (size_t)c.E[r] * P * sizeof(int32_t));
    h.recv[r] = hc.recv[r];
    h.counts[r] = hc.counts[r];
  }
  if (kind == 0) {
    hc.recv[0][1] -= 1;
    hc.recv[0][0] += 1;
  } else if (kind == 1) {
    hc.counts[1][0] = c.counts[1][1];
    hc.counts[1][1] = c.counts[1][0];
  } else if (kind == 3) { /* past the first E entries: the whole [E][P] array is compared */
    hc.counts[1][2 * P - 2] = c.counts[1][2 * P - 1];
    hc.counts[1][2 * P - 1] = c.counts[1][2 * P - 2];
  } else if (kind == 4) { /* rank 1 does send rank 0 rows (every count >= 2) */
    hc.recv[0][1] = 0;
  } else if (kind == 5) { /* out_rows has 4 slack rows (ga_finish_case) */
    hc.recv[0][1] += 1;
  } else {
    h.before_end = clobber_hints;
    h.arg = &hc;
  }
  ga_upload(&w, &c, &b);
  fco_result_t r = ga_issue_hints(&w, &c, &b, impl, &h, NULL);
  if (t == FCO_TRANSPORT_CPU) /* the message names the hint that is wrong */
    for (int q = 0; q < P; q++)
      ASSERT_MSG(w.comms[q], kind == 1 || kind == 3 ? "counts_host" : "recv_rows_host");
  ga_expect_rejected(&w, &c, &b, r);
}

/* One rank, impl 0, counts_host unlike the device counts (the two experts' sizes swapped, same
 * total): at P = 1 impl 0's GEMMs write out directly (the all-to-all is the identity), so the
 * device-side digest check cannot hold them back. It must still report
 * FCO_ERR_INVALID_ARGUMENT, and nothing may be written past the rows the hints size (the
 * slack rows of out and the guard after it stay as poisoned). GPU transports. */
static void one_rank_hint_unlike_counts(fco_transport_t t) {
  t_world_t w;
  t_context("P=1 impl 0: counts_host unlike counts");
  ASSERT_OK(t_world_init(&w, t, 1, NULL));
  ga_case_t c;
  ga_bufs_t b;
  ga_two_expert_case(&c, 1, 20, 12, 0, FCO_F32);
  c.counts[0][0] = 3;
  c.counts[0][1] = 5;
  ga_finish_case(&c, t_next_seed(), 4);
  int32_t hcounts[2] = {5, 3}, hrecv[1] = {8};
  ga_hints_t h;
  memset(&h, 0, sizeof h);
  h.counts[0] = hcounts;
  h.recv[0] = hrecv;
  ga_upload(&w, &c, &b);
  fco_result_t r = ga_issue_hints(&w, &c, &b, 0, &h, NULL);
  t_sync(&w);
  if (r == FCO_OK) r = fco_comm_get_async_error(w.comms[0]);
  ASSERT_EQ(r, FCO_ERR_INVALID_ARGUMENT);
  const size_t used = (size_t)8 * c.N * sizeof(float);
  ASSERT_EQ(c.out_rows, 12);
  unsigned char* o = (unsigned char*)malloc(b.out_bytes[0] + T_GUARD);
  t_get(w.transport, ga_dev_of(&w, 0), o, b.out[0], b.out_bytes[0] + T_GUARD);
  size_t bad = 0;
  for (size_t i = used; i < b.out_bytes[0]; i++) bad += o[i] != T_POISON;
  for (size_t i = 0; i < T_GUARD; i++) bad += o[b.out_bytes[0] + i] != T_GUARD_BYTE;
  free(o);
  ASSERT_EQ(bad, 0);
  ga_free_bufs(&w, &c, &b);
  ga_free_case(&c);
  ASSERT_OK(fco_comm_destroy(w.comms[0]));
}

/* impl 0's GEMM rule (src/ops/gemm_alltoall.h; exported by libfco, not in fco.h): the rows m
 * of every expert when one strided batched GEMM runs them all, else 0. */
int64_t fco_ga_batched_rows(const int32_t* counts, int E, int P, int64_t n, int blas_loop);

/* The rule itself, on every transport (a host function): every expert of E ≥ 2 the same rows
 * m > 0 over the sources and m · N ≤ 2^21, blas_loop (FCO_GA_BLAS=loop, read by the op layer:
 * one_rank_auto_rule reads that back) off. counts [E][P]. */
static void batched_rule(void) {
  t_context("fco_ga_batched_rows");
  const int32_t two[4] = {3, 5, 6, 2};              /* P 2: experts of 8 rows each */
  ASSERT_EQ(fco_ga_batched_rows(two, 2, 2, 64, 0), 8);
  const int32_t uneq[4] = {3, 5, 6, 3};             /* 8 and 9 */
  ASSERT_EQ(fco_ga_batched_rows(uneq, 2, 2, 64, 0), 0);
  const int32_t zero[4] = {0, 0, 0, 0};             /* no rows: nothing to batch */
  ASSERT_EQ(fco_ga_batched_rows(zero, 2, 2, 64, 0), 0);
  const int32_t one[1] = {8};                       /* one expert: one GEMM anyway */
  ASSERT_EQ(fco_ga_batched_rows(one, 1, 1, 64, 0), 0);
  const int32_t big[2] = {256, 256};                /* 256 · 8192 = 2^21: batched */
  ASSERT_EQ(fco_ga_batched_rows(big, 2, 1, 8192, 0), 256);
  const int32_t over[2] = {257, 257};               /* above 2^21: one GEMM per expert */
  ASSERT_EQ(fco_ga_batched_rows(over, 2, 1, 8192, 0), 0);
  ASSERT_EQ(fco_ga_batched_rows(two, 2, 2, 64, 1), 0); /* FCO_GA_BLAS=loop */
  ASSERT_EQ(fco_ga_batched_rows(big, 2, 1, 8192, 1), 0);
}

/* AUTO's revision of a local batch (fco_ga_agree, src/ops/gemm_alltoall.c; the hook
 * src/core/group.c calls before the workspace is sized), on every transport as a host function
 * on made-up ops of two local ranks (internal types: the library's own headers). Rank 0 with one
 * expert, rank 1 with two, bf16, K 64, N 4096, hints passed: each rank's own rule disagrees
 * (rank 0 impl 0, rank 1 tiles) at a_rows 300 and 500; the batch must come out alike — tiles at
 * 300 (2 · 300 · 4096 < 2^20 · 3), impl 0 at 500 — each op's workspace sized for it; explicit
 * impls, other transports and partial batches left as they were. The local run
 * (multi_rank_auto_rule) checks the same through fco_last_plan. */
static void agree_rule(void) {
  t_context("fco_ga_agree");
  struct fco_comm comm[2];
  fco_op_t ops[2];
  fco_gemm_a2a_args_t a[2];
  int32_t hint[4] = {0, 0, 0, 0}, recv[2] = {0, 0};
  static const struct {
    int64_t a_rows;
    fco_transport_t t;
    int n, auto1, want;
  } cases[] = {{300, FCO_TRANSPORT_LOCAL, 2, 1, 1}, {500, FCO_TRANSPORT_LOCAL, 2, 1, 0},
               {500, FCO_TRANSPORT_LOCAL, 2, 0, -1}, {500, FCO_TRANSPORT_NCCL, 2, 1, -1},
               {500, FCO_TRANSPORT_LOCAL, 1, 1, -1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    t_context("fco_ga_agree: a_rows %lld, transport %s, %d of 2 ops, rank 1 AUTO %d",
              (long long)cases[i].a_rows, fco_transport_name(cases[i].t), cases[i].n,
              cases[i].auto1);
    memset(comm, 0, sizeof comm);
    memset(ops, 0, sizeof ops);
    for (int r = 0; r < 2; r++) {
      comm[r].rank = r;
      comm[r].nranks = 2;
      comm[r].transport = cases[i].t;
      memset(&a[r], 0, sizeof a[r]);
      a[r].counts_host = hint;
      a[r].recv_rows_host = recv;
      a[r].a_rows = a[r].out_rows = cases[i].a_rows;
      a[r].k = 64;
      a[r].n = 4096;
      a[r].num_experts = r + 1;
      a[r].dtype = FCO_BF16;
      ops[r].kind = FCO_OP_GEMM_ALLTOALL;
      ops[r].comm = &comm[r];
      ops[r].impl = r ? 1 : 0; /* what each rank's own rule chose */
      ops[r].impl_auto = r ? cases[i].auto1 : 1;
      ops[r].ws_bytes = 12345;
      memcpy(ops[r].u.raw, &a[r], sizeof a[r]);
    }
    fco_ga_agree(ops, cases[i].n);
    if (cases[i].want < 0) { /* left alone */
      ASSERT_EQ(ops[0].impl, 0);
      ASSERT_EQ(ops[1].impl, 1);
      ASSERT_EQ(ops[0].ws_bytes, (size_t)12345);
      continue;
    }
    size_t ws[2];
    for (int r = 0; r < 2; r++) {
      ASSERT_EQ(ops[r].impl, cases[i].want);
      ASSERT_OK(fco_gemm_alltoall_workspace(&comm[r], cases[i].a_rows, cases[i].a_rows, 64, 4096,
                                            FCO_BF16, cases[i].want, &ws[r]));
      ASSERT_EQ(ops[r].ws_bytes, ws[r]);
    }
  }
}

/* AUTO's per-rank rule (fco_ga_auto_impl, src/ops/gemm_alltoall.c) as a host function on
 * made-up communicators, so it runs in CI without a GPU (one_rank_auto_rule and
 * multi_rank_auto_rule read the plans on a GPU). bf16 / f16 with k, n multiples of 8 only:
 * one rank — impl 0 where counts_host is balanced (its batched GEMM; not with FCO_GA_BLAS=loop),
 * tiles at K ≤ 2048 where mean rows · N < 2^21 · E and (hint) no expert's rows · N > 2^23, at
 * K > 2048 where every expert has ≤ 256 rows (a_rows ≤ 256 · E without the hint), else impl 0;
 * local — tiles at K ≤ 2048 where a_rows · N < 2^20 · E (and a_rows ≤ 2048 above P = 2), else
 * impl 0, else 2, else 1; nccl at P > 1 — tiles at K ≤ 2048, else chunks (2), else 0, else 1;
 * an impl that cannot run (captured without counts_host: 0 and 2; nccl impl 0 captured without
 * recv_rows_host) is skipped; FCO_GEMM_A2A_AUTO forces an impl that can run; cpu: 1. */
static void auto_rule_host(void) {
  static const int32_t bal[2] = {256, 256}, k256[2] = {256, 100}, k257[2] = {256, 257};
  static const int32_t e2048[8] = {2048}, e2049[8] = {2049}; /* one expert's rows · N: 2^23 */
  static const int32_t any[16] = {0}; /* [8][2]: P = 2 reads only whether it was passed */
  static const int32_t recv[2] = {0, 0};
  static const struct {
    fco_transport_t t;
    int p;
    fco_dtype_t dt;
    int64_t k, n, a_rows;
    int e;
    const int32_t* hint; /* counts_host [E] (P = 1) or NULL */
    int recv_hint, capturing, blas_loop, forced, want;
  } cases[] = {
      {FCO_TRANSPORT_CPU, 2, FCO_BF16, 14336, 4096, 4096, 8, NULL, 0, 0, 0, 0, 1},
      /* one rank, K ≤ 2048: mean rows · N against 2^21 · E (2^24 at E 8) */
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 2048, 4096, 4095, 8, NULL, 0, 0, 0, 0, 1},
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 2048, 4096, 4096, 8, NULL, 0, 0, 0, 0, 0},
      {FCO_TRANSPORT_LOCAL, 1, FCO_F16, 2048, 4096, 4095, 8, NULL, 0, 0, 0, 0, 1},
      {FCO_TRANSPORT_NCCL, 1, FCO_F32, 2048, 4096, 64, 8, NULL, 0, 0, 0, 0, 0},
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 2044, 4096, 64, 8, NULL, 0, 0, 0, 0, 0}, /* k % 8 */
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 2048, 4092, 64, 8, NULL, 0, 0, 0, 0, 0}, /* n % 8 */
      /* balanced hint: impl 0's batched GEMM; FCO_GA_BLAS=loop: the tiles */
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 2048, 4096, 512, 2, bal, 0, 0, 0, 0, 0},
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 2048, 4096, 512, 2, bal, 0, 0, 1, 0, 1},
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 2048, 4096, 2048, 8, e2048, 0, 0, 0, 0, 1},
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 2048, 4096, 2049, 8, e2049, 0, 0, 0, 0, 0}, /* > 2^23 */
      /* one rank, K > 2048: ≤ 256 rows an expert */
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 14336, 4096, 2048, 8, NULL, 0, 0, 0, 0, 1},
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 14336, 4096, 2049, 8, NULL, 0, 0, 0, 0, 0},
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 14336, 4096, 512, 2, k256, 0, 0, 0, 0, 1},
      {FCO_TRANSPORT_NCCL, 1, FCO_BF16, 14336, 4096, 513, 2, k257, 0, 0, 0, 0, 0},
      /* nccl, two ranks */
      {FCO_TRANSPORT_NCCL, 2, FCO_BF16, 2048, 4096, 4096, 8, NULL, 0, 0, 0, 0, 1},
      {FCO_TRANSPORT_NCCL, 2, FCO_BF16, 14336, 4096, 4096, 8, NULL, 0, 0, 0, 0, 2},
      {FCO_TRANSPORT_NCCL, 2, FCO_BF16, 14336, 4096, 4096, 8, NULL, 0, 1, 0, 0, 1},
      {FCO_TRANSPORT_NCCL, 2, FCO_BF16, 14336, 4096, 4096, 8, any, 0, 1, 0, 0, 2},
      {FCO_TRANSPORT_NCCL, 2, FCO_BF16, 14336, 4096, 4096, 8, any, 0, 1, 0, 1, 2}, /* 0 blocked */
      {FCO_TRANSPORT_NCCL, 2, FCO_BF16, 14336, 4096, 4096, 8, any, 1, 1, 0, 1, 0},
      {FCO_TRANSPORT_NCCL, 2, FCO_BF16, 2048, 4096, 64, 8, NULL, 0, 0, 0, 3, 2}, /* forced 2 */
      /* local: a_rows · N · P against 2^20 · P · E */
      {FCO_TRANSPORT_LOCAL, 2, FCO_BF16, 2048, 4096, 2047, 8, NULL, 0, 0, 0, 0, 1},
      {FCO_TRANSPORT_LOCAL, 2, FCO_BF16, 2048, 4096, 2048, 8, NULL, 0, 0, 0, 0, 0},
      {FCO_TRANSPORT_LOCAL, 4, FCO_BF16, 1024, 64, 2048, 8, NULL, 0, 0, 0, 0, 1},
      {FCO_TRANSPORT_LOCAL, 4, FCO_BF16, 1024, 64, 2049, 8, NULL, 0, 0, 0, 0, 0},
      {FCO_TRANSPORT_LOCAL, 2, FCO_BF16, 14336, 4096, 64, 8, NULL, 0, 0, 0, 0, 0},
      {FCO_TRANSPORT_LOCAL, 2, FCO_BF16, 14336, 4096, 64, 8, NULL, 0, 1, 0, 0, 1},
  };
  struct fco_comm comm;
  fco_gemm_a2a_args_t a;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    t_context("gemm AUTO rule, case %zu: %s P=%d %s K %lld N %lld a_rows %lld E %d%s%s%s%s", i,
              fco_transport_name(cases[i].t), cases[i].p, fco_dtype_name(cases[i].dt),
              (long long)cases[i].k, (long long)cases[i].n, (long long)cases[i].a_rows,
              cases[i].e, cases[i].hint ? ", counts_host" : "",
              cases[i].recv_hint ? ", recv_rows_host" : "", cases[i].capturing ? ", captured" : "",
              cases[i].blas_loop ? ", FCO_GA_BLAS=loop" : "");
    memset(&comm, 0, sizeof comm);
    comm.transport = cases[i].t;
    comm.nranks = cases[i].p;
    memset(&a, 0, sizeof a);
    a.a_rows = a.out_rows = cases[i].a_rows;
    a.k = cases[i].k;
    a.n = cases[i].n;
    a.num_experts = cases[i].e;
    a.dtype = cases[i].dt;
    a.counts_host = cases[i].hint;
    a.recv_rows_host = cases[i].recv_hint ? recv : NULL;
    a.knobs.blas_loop = cases[i].blas_loop;
    a.knobs.auto_impl = cases[i].forced;
    ASSERT_EQ(fco_ga_auto_impl(&comm, &a, cases[i].capturing), cases[i].want);
  }
}

/* Rank r's fco_last_plan begins "gemm_alltoall impl <want> " (what AUTO resolved to). */
static void expect_auto_ran(const t_world_t* w, int r, int want) {
  char expect[64];
  snprintf(expect, sizeof expect, "gemm_alltoall impl %d ", want);
  const char* plan = fco_last_plan(w->comms[r]);
  if (strncmp(plan, expect, strlen(expect)) != 0)
    t_fail(__FILE__, __LINE__, "rank %d: AUTO ran \"%s\", expected \"%s...\"", r, plan, expect);
}

/* One rank, AUTO (GPU transports): impl 0 where counts_host gives every expert the same rows
 * (its one strided batched GEMM; FCO_GA_BLAS=loop: not), else tiles (impl 1) in bf16 / f16 with
 * k, n multiples of 8 where (K ≤ 2048) the mean rows per expert · N < 2^21 and no expert's
 * rows · N > 2^23, or (K > 2048) every expert has ≤ 256 rows — the rows from counts_host when
 * given, else the mean of a_rows — else impl 0 (src/ops/gemm_alltoall.c). Read from
 * fco_last_plan; every call must succeed. */
static void one_rank_auto_rule(fco_transport_t t) {
  t_world_t w;
  t_context("P=1 AUTO rule");
  ASSERT_OK(t_world_init(&w, t, 1, NULL));
  enum { EMAX = 8, ROWS = 1100, KMAX = 2056, NMAX = 8192 };
  const int d = ga_dev_of(&w, 0);
  const size_t a_bytes = (size_t)ROWS * KMAX * 2, w_bytes = (size_t)EMAX * 64 * NMAX * 2;
  void* a = t_alloc(t, d, a_bytes);
  void* wt = t_alloc(t, d, w_bytes);
  void* dc = t_alloc(t, d, EMAX * sizeof(int32_t));
  void* out = t_alloc(t, d, (size_t)ROWS * NMAX * 4);
  t_memset(t, d, a, 0, a_bytes);
  t_memset(t, d, wt, 0, w_bytes);
  const struct {
    int k, n, e;
    int64_t a_rows;
    int32_t counts[EMAX];
    int hint;
    fco_dtype_t dt;
    int want, loop;
  } cases[] = {
      /* K ≤ 2048, N 8192: tiles below a mean of 256 rows (256 · 8192 = 2^21), no expert over
       * 1024 (1024 · 8192 = 2^23) */
      {64, 8192, 2, 7, {3, 4}, 0, FCO_BF16, 1, 0},             /* mean 3.5 rows */
      {64, 8192, 2, 510, {3, 4}, 0, FCO_F16, 1, 0},            /* mean 255 */
      {64, 8192, 2, 512, {3, 4}, 0, FCO_BF16, 0, 0},           /* mean 256 */
      {64, 8192, 2, 512, {3, 4}, 1, FCO_BF16, 1, 0},           /* the hint: mean 3.5 */
      {64, 8192, 2, 512, {255, 256}, 1, FCO_F16, 1, 0},        /* mean 255.5 */
      {64, 8192, 2, 512, {257, 255}, 1, FCO_BF16, 0, 0},       /* mean 256 */
      {64, 8192, 8, 1100, {1024, 1}, 1, FCO_BF16, 1, 0},       /* mean 128, one at 1024 */
      {64, 8192, 8, 1100, {1025}, 1, FCO_F16, 0, 0},           /* one over 1024 (skew) */
      {64, 2048, 2, 1100, {1023, 0}, 0, FCO_BF16, 1, 0},       /* N 2048: mean 550 (a_rows) */
      {64, 8192, 2, 7, {3, 4}, 1, FCO_F32, 0, 0},              /* no tensor-core tile in f32 */
      /* K > 2048: every expert ≤ 256 rows */
      {2056, 64, 2, 512, {3, 4}, 0, FCO_BF16, 1, 0},           /* mean 256 (a_rows) */
      {2056, 64, 2, 514, {3, 4}, 0, FCO_BF16, 0, 0},           /* mean 257 */
      {2056, 64, 2, 514, {256, 255}, 1, FCO_F16, 1, 0},        /* the hint: at most 256 */
      {2056, 64, 2, 290, {3, 257}, 1, FCO_BF16, 0, 0},         /* one over 256, mean 145 */
      /* balanced (the hint: every expert the same rows): impl 0's one strided batched GEMM,
       * unless FCO_GA_BLAS=loop (loop 1) */
      {64, 8192, 2, 7, {3, 3}, 1, FCO_BF16, 0, 0},
      {2056, 64, 3, 514, {100, 100, 100}, 1, FCO_F16, 0, 0},
      {64, 8192, 2, 7, {3, 3}, 1, FCO_BF16, 1, 1},
      {64, 8192, 2, 7, {3, 3}, 0, FCO_BF16, 1, 0},             /* no hint: balance unseen */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int32_t* c = cases[i].counts;
    int32_t recv[1] = {0};
    for (int e = 0; e < cases[i].e; e++) recv[0] += c[e];
    t_context("P=1 AUTO rule: K %d N %d E %d a_rows %lld counts %d,%d,... hint %d %s%s",
              cases[i].k, cases[i].n, cases[i].e, (long long)cases[i].a_rows, c[0], c[1],
              cases[i].hint, fco_dtype_name(cases[i].dt), cases[i].loop ? " FCO_GA_BLAS=loop" : "");
    t_put(t, d, dc, c, EMAX * sizeof(int32_t));
    t_knob_set("FCO_GA_BLAS", cases[i].loop ? "loop" : NULL);
    ASSERT_OK(fco_gemm_alltoall(w.comms[0], a, cases[i].a_rows, wt, FCO_W_KN, cases[i].e,
                                (const int32_t*)dc, cases[i].hint ? c : NULL,
                                cases[i].hint ? recv : NULL, out, ROWS, cases[i].k, cases[i].n,
                                cases[i].dt, FCO_IMPL_AUTO, NULL));
    t_sync(&w);
    ASSERT_OK(fco_comm_get_async_error(w.comms[0]));
    expect_auto_ran(&w, 0, cases[i].want);
  }
  t_knob_reset("FCO_GA_BLAS");
  t_free(t, d, a);
  t_free(t, d, wt);
  t_free(t, d, dc);
  t_free(t, d, out);
  ASSERT_OK(fco_comm_destroy(w.comms[0]));
}

/* Several ranks, AUTO (GPU transports): tiles (impl 1) where K ≤ 2048, except on local where
 * a_rows / E_r · N ≥ 2^20 or, above two ranks, a_rows > 2048 (then impl 0;
 * src/ops/gemm_alltoall.c). Two local experts, a_rows 2048 and 2049 (the capacity, from the
 * slack), N 64, 1016 (2049 · 1016 < 2^21) and 1024 (2048 · 1024 = 2^21), K 64, bf16, with the
 * hints; then rank 0 with one expert (E_r unlike across ranks: local takes the rule at Σ E_r);
 * checked against the reference and read from every rank's fco_last_plan. */
static void multi_rank_auto_rule(const t_world_t* w) {
  const int P = w->n;
  static const struct {
    int n, big, rows, e0; /* rows: a_rows (0: 2048 + big); e0: rank 0's experts (others 2) */
  } cases[] = {{64, 0, 0, 2},    {64, 1, 0, 2},    {1016, 0, 0, 2}, {1016, 1, 0, 2},
               {1024, 0, 0, 2},  {4096, 0, 300, 1}, {4096, 0, 500, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int n = cases[i].n, big = cases[i].big;
    ga_case_t c;
    ga_two_expert_case(&c, P, 64, n, FCO_W_KN, FCO_BF16);
    c.E[0] = cases[i].e0;
    int64_t most = 0, esum = 0;
    for (int r = 0; r < P; r++) {
      int64_t sum = 0;
      for (int i = 0; i < c.E[r] * P; i++) sum += c.counts[r][i] = 1 + (r + 2 * i) % 4;
      if (sum > most) most = sum;
      esum += c.E[r];
    }
    ga_finish_case(&c, t_next_seed(), (int)((cases[i].rows ? cases[i].rows : 2048 + big) - most));
    /* Rank 0 with one expert: on local its own rule (a_rows / E_r · N ≥ 2^20) says impl 0 at
     * a_rows 300 and 500 with N 4096, the others' (E_r = 2) tiles — refused as "impl differs"
     * before session 42; now every rank takes the rule at Σ E_r (fco_ga_agree): tiles at 300,
     * impl 0 at 500 (P · a_rows · N against 2^20 · Σ E_r, P = 2..8). */
    const int want = w->transport == FCO_TRANSPORT_LOCAL &&
                             ((P > 2 && big) || c.a_rows * n * P >= ((int64_t)1 << 20) * esum)
                         ? 0
                         : 1;
    t_context("P=%d AUTO rule: a_rows %lld, N %d, E_0 %d, expect impl %d", P,
              (long long)c.a_rows, n, c.E[0], want);
    ga_bufs_t b;
    ga_upload(w, &c, &b);
    ASSERT_OK(ga_issue(w, &c, &b, FCO_IMPL_AUTO, 1, NULL));
    t_sync(w);
    for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_EQ(ga_check(w, &c, &b), 0);
    for (int r = 0; r < P; r++) expect_auto_ran(w, r, want);
    ga_free_bufs(w, &c, &b);
    ga_free_case(&c);
  }
}

/* knob_readback's and knobs_at_call's case: two experts a rank, 64 x 64 bf16, ragged counts,
 * fresh inputs, out poisoned; then the check after the call. */
static void knob_case(const t_world_t* w, ga_case_t* c, ga_bufs_t* b) {
  const int P = w->n;
  ga_two_expert_case(c, P, 64, 64, FCO_W_KN, FCO_BF16);
  for (int r = 0; r < P; r++)
    for (int k = 0; k < 2 * P; k++) c->counts[r][k] = (300 + 7 * k + r) / (2 * P);
  ga_finish_case(c, t_next_seed(), 8);
  ga_upload(w, c, b);
}

static void knob_case_check(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b) {
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(ga_check(w, c, b), 0);
}

/* The launch knobs (read once a call by the op layer, read_knobs; they act on GPU transports),
 * read back from fco_last_plan, each call checked against the reference: FCO_GA_TILES_BLOCKS
 * (impl 1's blocks a rank), FCO_GA_PUSH_BLOCKS and FCO_GA_CHUNK_ROWS (impl 2's push grid and
 * chunk rows), FCO_GA_TILE and FCO_GA_EPI (impl 1's tile), FCO_GEMM_A2A_AUTO (AUTO's forced
 * impl). A value that is not an integer ("40x", once read as 40) or not one of a string knob's
 * names ("tma3") is ignored, as if unset (fco_env_int / fco_env_choice; the message on stderr:
 * test_config_env). The tile cases expect the wgmma tiles (H100 / H200, the sm_90a image loaded);
 * elsewhere they are skipped. Rows of 300 per rank so that 128-row chunks split them. */
static void knob_readback(const t_world_t* w) {
  static const struct {
    int impl;
    const char* knob;
    const char* value;
    const char* want; /* in every rank's plan (set) or not in it (!set) */
    int set;
  } cases[] = {
      {1, "FCO_GA_TILES_BLOCKS", "4", ", 4 blocks/rank", 1},
      {1, "FCO_GA_TILES_BLOCKS", "4x", ", 4 blocks/rank", 0},
      {2, "FCO_GA_PUSH_BLOCKS", "40", " push 40 + finish", 1},
      {2, "FCO_GA_PUSH_BLOCKS", "40x", " push 40 + finish", 0},
      {2, "FCO_GA_CHUNK_ROWS", "128", " Ts=128 Tg=128 ", 1},
      {2, "FCO_GA_CHUNK_ROWS", "128 rows", " Ts=128 Tg=128 ", 0},
      /* string knobs (fco_env_choice): a name not among the choices runs the default tile */
      {1, "FCO_GA_TILE", "mma", " kernel tiles mma.sync ", 1},
      {1, "FCO_GA_TILE", "wgmma", " kernel tiles wgmma cp.async ", 1},
      {1, "FCO_GA_TILE", "TMA2", " kernel tiles wgmma tma cluster=2 ", 1},
      {1, "FCO_GA_TILE", "tma3", " kernel tiles wgmma tma 128x", 1},
      {1, "FCO_GA_EPI", "async", " kernel tiles wgmma tma epi=async 128x", 1},
      {1, "FCO_GA_EPI", "asynch", "epi=async", 0},
      /* AUTO's experiment knob: the impl it names runs, whatever the rule would pick */
      {FCO_IMPL_AUTO, "FCO_GEMM_A2A_AUTO", "0", "gemm_alltoall impl 0 ", 1},
      {FCO_IMPL_AUTO, "FCO_GEMM_A2A_AUTO", "2", "gemm_alltoall impl 2 ", 1},
  };
  const int P = w->n;
  int have_tma = -1; /* the default tile is WgmmaTileTma: from case 0's plan (impl 1) */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int tile_knob =
        !strcmp(cases[i].knob, "FCO_GA_TILE") || !strcmp(cases[i].knob, "FCO_GA_EPI");
    if (tile_knob && !have_tma) continue;
    t_context("P=%d %s=\"%s\", impl %d", P, cases[i].knob, cases[i].value, cases[i].impl);
    ga_case_t c;
    ga_bufs_t b;
    knob_case(w, &c, &b);
    t_knob_set(cases[i].knob, cases[i].value);
    fco_result_t res = ga_issue(w, &c, &b, cases[i].impl, 1, NULL);
    t_knob_reset(cases[i].knob);
    ASSERT_OK(res);
    knob_case_check(w, &c, &b);
    for (int r = 0; r < P; r++) {
      const char* plan = fco_last_plan(w->comms[r]);
      if ((strstr(plan, cases[i].want) != NULL) != cases[i].set)
        t_fail(__FILE__, __LINE__, "rank %d: plan \"%s\" %s \"%s\"", r, plan,
               cases[i].set ? "lacks" : "has", cases[i].want);
    }
    if (have_tma < 0) {
      have_tma = strstr(fco_last_plan(w->comms[0]), " kernel tiles wgmma tma 128x") != NULL;
      if (!have_tma)
        printf("P=%d: impl 1 runs no TMA tile here (plan \"%s\"): FCO_GA_TILE / _EPI cases "
               "skipped\n", P, fco_last_plan(w->comms[0]));
    }
    ga_free_bufs(w, &c, &b);
    ga_free_case(&c);
  }
}

/* The knobs are read when the call is made (src/ops/gemm_alltoall.c, read_knobs), not when
 * fco_group_end launches it: each case's knob set for the calls, then changed in before_end (after
 * the last submit, before fco_group_end) — every rank's plan names the call's value, each result
 * checked (until session 53 the launchers and AUTO's rule read the environment at the launch). */
static const char* g_flip_knob;
static const char* g_flip_value;
static void flip_knob(void* arg) {
  (void)arg;
  t_knob_set(g_flip_knob, g_flip_value);
}
static void knobs_at_call(const t_world_t* w) {
  static const struct {
    int impl;
    const char *knob, *at_call, *before_end, *want;
  } cases[] = {
      {1, "FCO_GA_TILES_BLOCKS", "4", "8", ", 4 blocks/rank"},
      {2, "FCO_GA_CHUNK_ROWS", "128", "0", " Ts=128 Tg=128 "},
      {FCO_IMPL_AUTO, "FCO_GEMM_A2A_AUTO", "0", "2", "gemm_alltoall impl 0 "},
      {FCO_IMPL_AUTO, "FCO_GEMM_A2A_AUTO", "2", "0", "gemm_alltoall impl 2 "},
  };
  const int P = w->n;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    t_context("P=%d %s=%s at the call, %s before fco_group_end, impl %d", P, cases[i].knob,
              cases[i].at_call, cases[i].before_end, cases[i].impl);
    ga_case_t c;
    ga_bufs_t b;
    knob_case(w, &c, &b);
    ga_hints_t h;
    memset(&h, 0, sizeof h);
    for (int r = 0; r < P; r++) {
      h.counts[r] = c.counts[r];
      h.recv[r] = c.recv[r];
    }
    h.before_end = flip_knob;
    g_flip_knob = cases[i].knob;
    g_flip_value = cases[i].before_end;
    t_knob_set(cases[i].knob, cases[i].at_call);
    fco_result_t res = ga_issue_hints(w, &c, &b, cases[i].impl, &h, NULL);
    t_knob_reset(cases[i].knob);
    ASSERT_OK(res);
    knob_case_check(w, &c, &b);
    for (int r = 0; r < P; r++)
      if (!strstr(fco_last_plan(w->comms[r]), cases[i].want))
        t_fail(__FILE__, __LINE__, "rank %d: plan \"%s\" lacks \"%s\"", r,
               fco_last_plan(w->comms[r]), cases[i].want);
    ga_free_bufs(w, &c, &b);
    ga_free_case(&c);
  }
}

static void bad_args(const t_world_t* w) {
  fco_comm_t c = w->comms[0];
  int32_t dummy[16] = {0};
  void* p = t_alloc(w->transport, ga_dev_of(w, 0), 4096);
  t_context("bad arguments");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 0, dummy, NULL, NULL, p, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "num_experts");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 2, 1, dummy, NULL, NULL, p, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "w_layout");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 1, NULL, NULL, NULL, p, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "counts");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 1, dummy, NULL, NULL, p, 1, 0, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "k");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 1, dummy, NULL, NULL, p, 1, 4, 4, FCO_F32, 7, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "impl");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, 1, dummy, NULL, NULL, p, 1, 4, 4, (fco_dtype_t)9, 1,
                               NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "dtype");
  /* each bound at its edge: E_r one past the maximum, a or out NULL with one row, counts 2-byte
   * aligned only, out 2-byte aligned only (f32), counts_host summing to one row over a_rows */
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, p, 0, FCO_GEMM_ALLTOALL_MAX_EXPERTS + 1, dummy, NULL, NULL,
                               p, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "num_experts");
  ASSERT_RES(fco_gemm_alltoall(c, NULL, 1, p, 0, 1, dummy, NULL, NULL, (char*)p + 2048, 1, 4, 4,
                               FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "a");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, (char*)p + 64, 0, 1, dummy, NULL, NULL, NULL, 1, 4, 4,
                               FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "out");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, (char*)p + 64, 0, 1, (int32_t*)((char*)dummy + 2), NULL,
                               NULL, (char*)p + 2048, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "counts");
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, (char*)p + 64, 0, 1, dummy, NULL, NULL, (char*)p + 2050, 1,
                               4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "aligned");
  int32_t over[1] = {9};
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, (char*)p + 1024, 0, 1, dummy, over, NULL, (char*)p + 2048,
                               8, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "counts_host");
  ASSERT_MSG(c, "a_rows");
  int32_t neg[8] = {-1, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, p, 0, 1, dummy, neg, NULL, (char*)p + 2048, 8, 4, 4,
                               FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "counts_host");
  /* recv_rows_host checked whenever given, also without counts_host (a negative entry once
   * passed there: the cpu backend read it as "no hint") */
  int32_t rneg[1] = {-7}, rbig[1] = {9}, rm1[1] = {-1}; /* -1: the cpu backend's "no hint" */
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, p, 0, 1, dummy, NULL, rneg, (char*)p + 2048, 8, 4, 4,
                               FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "recv_rows_host");
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, p, 0, 1, dummy, NULL, rm1, (char*)p + 2048, 8, 4, 4,
                               FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "recv_rows_host[0] = -1");
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, p, 0, 1, dummy, NULL, rbig, (char*)p + 2048, 8, 4, 4,
                               FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "out_rows");
  /* out overlapping a, or w (unchecked before session 42: the result came back wrong) */
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, (char*)p + 1024, 0, 1, dummy, NULL, NULL, (char*)p + 64,
                               8, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "overlaps a");
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, (char*)p + 1024, 1, 1, dummy, NULL, NULL,
                               (char*)p + 1056, 8, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "overlaps w");
  /* out at w's second expert (w holds E_r · K · N elements, not one expert's) */
  ASSERT_RES(fco_gemm_alltoall(c, p, 8, (char*)p + 1024, 1, 2, dummy, NULL, NULL,
                               (char*)p + 1024 + 4 * 4 * 4, 8, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "overlaps w");
  /* out holding counts or a host hint (before session 55 accepted: the cpu reference re-read
   * counts after rows had overwritten them, and crashed); refused before anything reads them */
  static const char* const kInOut[3] = {"overlaps counts", "overlaps counts_host",
                                         "overlaps recv_rows_host"};
  for (int i = 0; i < 3; i++) {
    int32_t* in_out = (int32_t*)((char*)p + 2048 + 16 * i);
    t_context("out %s", kInOut[i]);
    ASSERT_RES(fco_gemm_alltoall(c, p, 8, (char*)p + 1024, 0, 1, i == 0 ? in_out : dummy,
                                 i == 1 ? in_out : NULL, i == 2 ? in_out : NULL, (char*)p + 2048,
                                 8, 4, 4, FCO_F32, 1, NULL),
               FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(c, kInOut[i]);
  }
  t_context("bad arguments");
  /* the pointer that is not aligned is named */
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, (char*)p + 66, 0, 1, dummy, NULL, NULL, (char*)p + 2048,
                               1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, ": w ");
  ASSERT_RES(fco_gemm_alltoall(c, (char*)p + 2, 1, (char*)p + 64, 0, 1, dummy, NULL, NULL,
                             (char*)p + 2048, 1, 4, 4, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, ": a ");
  /* E_r · k · n over 2^40 elements of w (each size in range) */
  ASSERT_RES(fco_gemm_alltoall(c, p, 1, (char*)p + 64, 0, 2, dummy, NULL, NULL, (char*)p + 2048,
                               1, (int64_t)1 << 20, (int64_t)1 << 20, FCO_BF16, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "elements of w");
  /* AUTO's experiment knob at an impl that does not exist: refused whatever the impl asked for,
   * naming the knob (nothing issued); the knob back at the caller's value after */
  static const char* const kBadForced[] = {"3", "-2", "9"};
  for (int i = 0; i < 3; i++) {
    t_knob_set("FCO_GEMM_A2A_AUTO", kBadForced[i]);
    t_context("FCO_GEMM_A2A_AUTO=%s", kBadForced[i]);
    ASSERT_RES(fco_gemm_alltoall(c, p, 1, (char*)p + 64, 0, 1, dummy, NULL, NULL,
                                 (char*)p + 2048, 1, 4, 4, FCO_F32, i == 0 ? FCO_IMPL_AUTO : i,
                                 NULL),
               FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(c, "FCO_GEMM_A2A_AUTO");
    t_knob_reset("FCO_GEMM_A2A_AUTO");
  }
  /* FCO_GA_EPI=async beside a tile other than the default: refused whatever the impl (the
   * epilogue exists for the TMA tile only); beside tma, or a tile name that is not one (taken as
   * unset), the call goes on to the next check (num_experts 0 here, so nothing runs) */
  static const struct {
    const char* tile;
    int refused;
  } kEpiTiles[] = {{"tma2", 1}, {"wgmma", 1}, {"MMA", 1}, {"tma", 0}, {"tma3", 0}, {"", 0}};
  t_knob_set("FCO_GA_EPI", "async");
  for (size_t i = 0; i < sizeof kEpiTiles / sizeof kEpiTiles[0]; i++) {
    t_knob_set("FCO_GA_TILE", kEpiTiles[i].tile);
    t_context("FCO_GA_EPI=async FCO_GA_TILE=\"%s\"", kEpiTiles[i].tile);
    const int e = kEpiTiles[i].refused ? 1 : 0;
    ASSERT_RES(fco_gemm_alltoall(c, p, 1, (char*)p + 64, 0, e, dummy, NULL, NULL,
                                 (char*)p + 2048, 1, 4, 4, FCO_F32, (int)(i % 3) - 1, NULL),
               FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(c, e ? "FCO_GA_EPI" : "num_experts");
  }
  t_knob_reset("FCO_GA_TILE");
  t_knob_reset("FCO_GA_EPI");
  size_t ws = 0;
  /* the shape's bounds at their edges, asked of the workspace query (no buffers that big):
   * k and n 1..2^31-1, a_rows and out_rows 0..2^31-1 */
  const int64_t kMax = INT32_MAX;
  ASSERT_OK(fco_gemm_alltoall_workspace(c, 0, 0, kMax, 8, FCO_BF16, 1, &ws));
  ASSERT_RES(fco_gemm_alltoall_workspace(c, 0, 0, kMax + 1, 8, FCO_BF16, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "k");
  ASSERT_OK(fco_gemm_alltoall_workspace(c, 0, 0, 8, kMax, FCO_BF16, 1, &ws));
  ASSERT_RES(fco_gemm_alltoall_workspace(c, 0, 0, 8, kMax + 1, FCO_BF16, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "n");
  ASSERT_OK(fco_gemm_alltoall_workspace(c, kMax, kMax, 8, 8, FCO_BF16, 1, &ws));
  ASSERT_RES(fco_gemm_alltoall_workspace(c, kMax + 1, 0, 8, 8, FCO_BF16, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "a_rows");
  ASSERT_RES(fco_gemm_alltoall_workspace(c, 0, kMax + 1, 8, 8, FCO_BF16, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "out_rows");
  ASSERT_RES(fco_gemm_alltoall_workspace(c, -1, 0, 8, 8, FCO_BF16, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "a_rows");
  ASSERT_RES(fco_gemm_alltoall_workspace(c, 0, -1, 8, 8, FCO_BF16, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "out_rows");
  /* the products at 2^40 elements and one row past (each size in range): before session 55
   * out_rows 2^30 + 1 by n 2^31 - 2 wrapped the f32 workspace to 35 KB */
  const int64_t k20 = (int64_t)1 << 20;
  ASSERT_OK(fco_gemm_alltoall_workspace(c, k20, k20, k20, k20, FCO_F32, 1, &ws));
  ASSERT_GT(ws, (size_t)1 << 42);
  ASSERT_RES(fco_gemm_alltoall_workspace(c, 0, ((int64_t)1 << 30) + 1, 8, kMax - 1, FCO_F32,
                                         FCO_IMPL_AUTO, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "out_rows x n");
  ASSERT_RES(fco_gemm_alltoall_workspace(c, 0, k20 + 1, 8, k20, FCO_F32, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "out_rows x n");
  ASSERT_RES(fco_gemm_alltoall_workspace(c, k20 + 1, 0, 8, k20, FCO_F32, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "a_rows x n");
  ASSERT_RES(fco_gemm_alltoall_workspace(c, k20, 0, k20 + 1, 8, FCO_F32, 1, &ws),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(c, "a_rows x k");
  ASSERT_OK(fco_gemm_alltoall_workspace(c, 100, 100, 64, 64, FCO_BF16, FCO_IMPL_AUTO, &ws));
  ASSERT_GE(ws, (size_t)100 * 64 * 2);
  /* impl 0 at one rank writes out directly: no workspace on GPUs (cpu: every impl is the
   * reference, sized as impl 1) */
  ASSERT_OK(fco_gemm_alltoall_workspace(c, 100, 100, 64, 64, FCO_BF16, 0, &ws));
  if (w->transport == FCO_TRANSPORT_CPU) ASSERT_GE(ws, (size_t)100 * 64 * 2);
  else ASSERT_EQ(ws, (size_t)0);
  ASSERT_STR_EQ(fco_gemm_alltoall_impl_name(c, 0), w->transport == FCO_TRANSPORT_NCCL ? "nccl"
                                                   : w->transport == FCO_TRANSPORT_LOCAL ? "copy"
                                                                                      : "ref");
  ASSERT_STR_EQ(fco_gemm_alltoall_impl_name(c, 1), "tiles");
  ASSERT_STR_EQ(fco_gemm_alltoall_impl_name(c, 2), "chunks");
  ASSERT_NULL(fco_gemm_alltoall_impl_name(c, 3));
  t_free(w->transport, ga_dev_of(w, 0), p);
}

/* Two ranks that disagree on w_layout, or on out_rows (both in the shape every rank must pass
 * alike; compared on the host): FCO_ERR_INVALID_ARGUMENT naming the field and both values
 * (the layout by name), nothing written. No rows are routed (counts all 0): the call would run. */
static void shape_mismatch(fco_transport_t t) {
  enum { kA = 0, kW = 256, kOut = 1024, kCounts = 2048, kBytes = 4096 };
  t_world_t w;
  char* buf[2];
  unsigned char host[kBytes], back[kBytes];
  ASSERT_OK(t_world_init(&w, t, 2, NULL));
  for (int r = 0; r < 2; r++) buf[r] = (char*)t_alloc(t, ga_dev_of(&w, r), kBytes);
  for (int what = 0; what < 2; what++) {
    const char* field = what ? "out_rows" : "w_layout";
    t_context("rank 1's %s differs", field);
    memset(host, 0, kBytes);
    memset(host + kOut, T_POISON, kCounts - kOut);
    for (int r = 0; r < 2; r++) t_put(t, ga_dev_of(&w, r), buf[r], host, kBytes);
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < 2; r++) {
      const int odd = r == 1;
      (void)fco_gemm_alltoall(w.comms[r], buf[r] + kA, 2, buf[r] + kW,
                              odd && !what ? FCO_W_NK : FCO_W_KN, 1,
                              (const int32_t*)(buf[r] + kCounts), NULL, NULL, buf[r] + kOut,
                              odd && what ? 3 : 2, 4, 4, FCO_F32, 1, NULL);
    }
    ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(w.comms[0], what ? "out_rows differs" : "w_layout differs");
    ASSERT_MSG(w.comms[0], what ? "rank 0 has 2" : "rank 0 has kn");
    ASSERT_MSG(w.comms[0], what ? "rank 1 has 3" : "rank 1 has nk");
    t_sync(&w);
    for (int r = 0; r < 2; r++) {
      t_get(t, ga_dev_of(&w, r), back, buf[r], kBytes);
      ASSERT_EQ(memcmp(back, host, kBytes), 0);
    }
  }
  for (int r = 0; r < 2; r++) t_free(t, ga_dev_of(&w, r), buf[r]);
  t_world_destroy(&w, 0);
  t_context("%s", "");
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  batched_rule();
  printf("impl 0's batched-GEMM rule: ok\n");
  agree_rule();
  printf("AUTO's agreement on local (fco_ga_agree): ok\n");
  auto_rule_host();
  printf("AUTO's per-rank rule (fco_ga_auto_impl): ok\n");
  int max = t_test_max_ranks(t) < GA_MAXP ? t_test_max_ranks(t) : GA_MAXP;
  {
    t_world_t w;
    t_context("P=1: fco_comm_init_all");
    ASSERT_OK(t_world_init(&w, t, 1, NULL));
    bad_args(&w);
    t_world_destroy(&w, 0);
    printf("bad arguments: ok\n");
  }
  if (t != FCO_TRANSPORT_CPU)
    for (int p = 2; p <= max; p++) {
      t_world_t w;
      double t0 = t_now_ms();
      t_context("P=%d: fco_comm_init_all", p);
      ASSERT_OK(t_world_init(&w, t, p, NULL));
      multi_rank_auto_rule(&w);
      t_world_destroy(&w, 0);
      printf("P=%d: AUTO rule ok (%.0f ms)\n", p, t_now_ms() - t0);
      fflush(stdout);
    }
  /* Bad counts: every kind, the device-checked impls (cpu: the reference). */
  int pb = max < 2 ? max : 2;
  for (int kind = 0; kind < 4; kind++) {
    bad_counts(t, pb, kind, 1);
    if (t != FCO_TRANSPORT_CPU) bad_counts(t, pb, kind, 2);
    if (t == FCO_TRANSPORT_LOCAL) bad_counts(t, pb, kind, 0);
  }
  if (t != FCO_TRANSPORT_CPU) {
    one_rank_hint_unlike_counts(t);
    one_rank_auto_rule(t);
  }
  printf("bad counts: ok\n");
  if (t != FCO_TRANSPORT_CPU) {
    t_world_t w;
    t_context("P=%d: fco_comm_init_all", pb);
    ASSERT_OK(t_world_init(&w, t, pb, NULL));
    knob_readback(&w);
    knobs_at_call(&w);
    t_world_destroy(&w, 0);
    printf("P=%d: knobs read back (also those changed before fco_group_end): ok\n", pb);
  }
  if (pb >= 2 && t != FCO_TRANSPORT_NCCL) {
    shape_mismatch(t);
    printf("shape mismatch across ranks: ok\n");
  }
  /* Hints unlike the counts (the nccl bench's hang: recv_rows_host read after it changed). */
  if (pb >= 2 && t != FCO_TRANSPORT_NCCL) {
    for (int kind = 0; kind < 6; kind++) {
      bad_hints(t, pb, kind, t == FCO_TRANSPORT_CPU ? 1 : 0);
      if (t == FCO_TRANSPORT_LOCAL && (kind == 1 || kind == 3)) bad_hints(t, pb, kind, 2);
    }
    printf("bad hints: ok\n");
  }
  return t_pass(t, max, t_test_rank_cap() < GA_MAXP ? t_test_rank_cap() : GA_MAXP);
}
