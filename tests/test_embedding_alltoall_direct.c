/*
 * test_embedding_alltoall_direct.c — fco_embedding_alltoall's stores into peers' symmetric outs
 * (fco_mem_alloc; the fused lean kernel, impl 1) where a sender cannot or must not store
 * directly, and the waits at the epoch limit (audit56-emb E1, E2, E4; audit56-gemm F2):
 *   misaligned_one_rank  one rank's symmetric out sits one element off 16-byte alignment, its
 *                        peers' are aligned: the peers' 16-byte stores must not target it (they
 *                        stage, it lands); exact results, no error (E1: a misaligned-address
 *                        fault, the CUDA context lost)
 *   freed_peer_slot      rank 0 frees its buffer of the slot that holds its peers' outs
 *                        (fco_mem_free is local): it stages their rows and they land them; exact
 *                        results on every rank, no error (E2: their outs kept the poison, only
 *                        rank 0 reported). Local and cpu transports (on nccl one rank's window
 *                        deregistration is not exercised here). GPU transports also check
 *                        (F2) that the symmetric-out offset in signal slot 68 is epoch-tagged,
 *                        (e << 32) | offset / 16, never a raw offset that could satisfy another
 *                        op's flag wait there
 *   back_to_back_freed   (session 56's review, R2) calls issued back to back, no sync between
 *                        them, after rank 0 freed the slots of some calls' outs: the receivers
 *                        must land exactly the staged sources of each call (local and cpu)
 *   back_to_back_mixed   (R2's other forms) back to back with every buffer held, the calls
 *                        alternating direct stores, ranks 1.. not storing directly, and the
 *                        previous fused kernel (every transport; the race itself only on nccl)
 *   epoch_limit_waits    a call starting at FCO_EPOCH_LIMIT records FCO_ERR_INVALID_USAGE and
 *                        must still complete exactly (dev.h): its waits must not give up on that
 *                        record (E4). On nccl rank 1's stream sleeps 300 ms before the call, so
 *                        rank 0's land waits long; on local one grid runs both ranks (no delay
 *                        possible): exactness only. GPU transports.
 *   failed_resolve       (session 57's review) a sender block whose symmetric-out resolve fails
 *                        while its siblings store directly (test hook FCO_FAULT_EA_RESOLVE): the
 *                        receiver must report its own error, not keep the block's rows stale
 *                        (it did: no error, poison rows). GPU transports, P = 2, its own world.
 * Inputs are small integers (ea_fixture.h: exact, bit-for-bit checks), fresh each call, outs
 * poisoned first. P = 2..FCO_TEST_MAX_RANKS (the epoch part: P = 2); skips below 2 ranks.
 *   make test   or   build/tests/test_embedding_alltoall_direct [misaligned|freed|b2b|epoch|fault]
 *   (one part alone; FCO_TRANSPORT=cpu|local|nccl)
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/cuda/dev.h"
#include "ea_fixture.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define OUT_OFF_SLOT 68 /* dev.h: the embedding's symmetric out offset (fused lean kernel) */

/* Ragged splits for up to EA_MAX_P ranks (a world reads its first w->n entries). */
static const int32_t kTpr[EA_MAX_P] = {2, 3, 1, 2, 0, 1, 2, 3};
static const int64_t kBpr[EA_MAX_P] = {37, 64, 5, 90, 11, 3, 23, 48};

/* New table values on every rank (fresh inputs for a call on the same buffers), outs poisoned. */
static void redraw(const t_world_t* w, ea_prob_t* p) {
  ea_rng = t_next_seed();
  for (int r = 0; r < p->P; r++) {
    for (size_t i = 0; i < (size_t)p->total_rows[r] * (size_t)p->D; i++)
      p->weight[r][i] = ea_round_to(p->dt, (float)ea_rnd_in(-4, 4));
    ea_upload_inputs(w, p, r);
    ea_poison_out(w, p, r);
  }
}

static void run_exact(const t_world_t* w, ea_prob_t* p, int impl) {
  ASSERT_OK(ea_prob_run(w, p, impl, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(ea_prob_check(w, p), 0);
}

/* E1: every out symmetric (256·(r + 1) bytes in), rank `sr`'s weight and out shifted by one
 * element; the other ranks pool with 16-byte stores (lean_tile). Rows of 128 (bf16), 64 (f32),
 * 16 (f16) and 512 bytes (f32, shifted by 8: 8-aligned, not 16). */
static void misaligned_one_rank(const t_world_t* w) {
  static const struct {
    int64_t D;
    fco_dtype_t dt;
    size_t shift;
  } kCases[] = {{64, FCO_BF16, 2}, {16, FCO_F32, 4}, {8, FCO_F16, 2}, {128, FCO_F32, 8}};
  const int ranks[2] = {w->n - 1, 0}; /* the last rank, then rank 0 */
  ea_sym_mask = (1u << w->n) - 1;
  for (int k = 0; k < 2; k++) {
    ea_shift_rank = ranks[k];
    for (size_t c = 0; c < sizeof kCases / sizeof kCases[0]; c++) {
      ea_shift_bytes = kCases[c].shift;
      const int impl = c == 0 && k == 1 ? FCO_IMPL_AUTO : 1;
      ea_prob_t p;
      uint64_t seed = t_next_seed();
      ea_prob_make_shape(&p, w->n, kCases[c].D, kCases[c].dt, FCO_EMB_INDEX_I32, (int)(c & 1),
                         FCO_EMB_POOL_SUM, 0, seed, 0, kTpr, kBpr);
      char what[64];
      snprintf(what, sizeof what, "symmetric outs, rank %d's shifted by %zu", ranks[k],
               kCases[c].shift);
      ea_describe(&p, impl, seed, what);
      ea_prob_upload(w, &p);
      run_exact(w, &p, impl);
      ea_prob_free(w, &p);
    }
  }
  ea_shift_bytes = 0;
  ea_shift_rank = -1;
  ea_sym_mask = 0;
}

#ifdef FCO_HAVE_CUDA
/* F2: in rank 0's signal area, row r (written by rank r), slot OUT_OFF_SLOT holds
 * (e << 32) | offset / 16 of rank r's symmetric out after the call of epoch e. */
static void check_out_off_slot(const t_world_t* w, const ea_prob_t* p) {
  const int d0 = t_rank_device(w->transport, 0);
  void* dev = NULL;
  size_t bytes = 0;
  uint32_t version = 0;
  ASSERT_OK(fco_comm_device_state(w->comms[0], &dev, &bytes, &version));
  ASSERT_GE(bytes, sizeof(fco_dev_rank_t));
  fco_dev_rank_t h;
  t_get(w->transport, d0, &h, dev, sizeof h);
  for (int r = 1; r < w->n; r++) {
    uint64_t got = 0;
    t_get(w->transport, d0, &got, h.peer_sig[0] + (size_t)r * FCO_SIG_SLOTS + OUT_OFF_SLOT,
          sizeof got);
    const uint64_t off = (uint64_t)((char*)p->d_out[r] - (char*)p->d_sym[r]);
    const uint64_t want = (h.epoch << 32) | (off >> 4);
    if (got != want)
      t_fail(__FILE__, __LINE__, "slot %d of rank 0's row %d: 0x%llx, want 0x%llx (epoch %llu, "
             "offset %llu)", OUT_OFF_SLOT, r, (unsigned long long)got, (unsigned long long)want,
             (unsigned long long)h.epoch, (unsigned long long)off);
  }
}
#endif

/* E2: slot A held by every rank (so rank 0 stays a sender into symmetric outs), slot B holds
 * the outs of ranks 1..P−1 (rank 0's out is ordinary). A control call, then rank 0 frees its
 * slot-B buffer and a second call (fresh inputs, outs poisoned) must still be exact. */
static void freed_peer_slot(const t_world_t* w) {
  void* a[EA_MAX_P];
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_mem_alloc(w->comms[r], 4096, &a[r]));
  /* the lean path, direct stores on: what the check of slot OUT_OFF_SLOT needs */
  t_knob_set("FCO_EA_LEAN", "1");
  t_knob_set("FCO_EA_DIRECT", "1");
  ea_sym_mask = ((1u << w->n) - 1) & ~1u;
  ea_prob_t p;
  uint64_t seed = t_next_seed();
  ea_prob_make_shape(&p, w->n, 64, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, seed, 0,
                     kTpr, kBpr);
  ea_describe(&p, 1, seed, "symmetric outs of ranks 1.., every buffer held");
  ea_prob_upload(w, &p);
  run_exact(w, &p, 1);
  ASSERT_OK(fco_mem_free(w->comms[0], p.d_sym[0])); /* local: rank 0's table loses slot B */
  p.d_sym[0] = NULL;
  ea_describe(&p, 1, seed, "symmetric outs of ranks 1.., rank 0 freed its slot-B buffer");
  redraw(w, &p);
  run_exact(w, &p, 1);
  redraw(w, &p); /* and again: the next epoch (the other workspace half) */
  run_exact(w, &p, 1);
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(w->transport)) {
    t_context("P=%d: signal slot %d after the last call", w->n, OUT_OFF_SLOT);
    check_out_off_slot(w, &p); /* ranks 1.. still announce their outs */
  }
#endif
  ea_prob_free(w, &p);
  ea_sym_mask = 0;
  t_knob_reset("FCO_EA_LEAN");
  t_knob_reset("FCO_EA_DIRECT");
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_mem_free(w->comms[r], a[r]));
}

/* ---- R2 (session 56's review): calls back to back, no sync between them ------------------ */
#define B2B_CALLS 8 /* calls a round: each on its own problem (buffers, symmetric buffer) */

/* Makes call j's group for problem p (impl 1). */
typedef void (*b2b_issue_t)(const t_world_t* w, const ea_prob_t* p, int j);

/* One round: fresh tables and poisoned outs for every problem (all uploads before the first
 * call), the n calls issued back to back, one sync, then every problem checked exactly. */
static void b2b_round(const t_world_t* w, ea_prob_t* p, int n, b2b_issue_t issue,
                      const char* what, int round) {
  for (int j = 0; j < n; j++) redraw(w, &p[j]);
  t_context("P=%d: %s, round %d: %d calls back to back", w->n, what, round, n);
  for (int j = 0; j < n; j++) issue(w, &p[j], j);
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  for (int j = 0; j < n; j++) {
    t_context("P=%d: %s, round %d: call %d of %d back to back", w->n, what, round, j, n);
    ASSERT_EQ(ea_prob_check(w, &p[j]), 0);
  }
}

/* GPU transports: rank r's plan of the call just issued names the lean kernel's direct stores
 * (a change that silently staged everything would pass the data checks alone). */
static void b2b_want_direct(const t_world_t* w, int r, int j) {
  if (!t_is_gpu(w->transport)) return;
  const char* plan = fco_last_plan(w->comms[r]);
  if (!strstr(plan, "kernel fused lean") || !strstr(plan, "direct=send"))
    t_fail(__FILE__, __LINE__, "call %d: rank %d's plan \"%s\" names no direct stores", j, r,
           plan);
}

static void issue_impl1(const t_world_t* w, const ea_prob_t* p, int j) {
  ASSERT_OK(ea_prob_run(w, p, 1, NULL));
  b2b_want_direct(w, 0, j); /* rank 0 still holds slot A: it stores where it can */
}

/* R2 as freed_peer_slot: ranks 1..'s outs symmetric, rank 0's ordinary, slot A held by every
 * rank (rank 0 stays a sender into symmetric outs). Rank 0 frees its buffer of call j's slot
 * where j % 3 != 1: it stages ranks 1..'s rows, which they must land; where j % 3 == 1 it keeps
 * it, stores into their outs, and they must not land (stale staging over its rows). A receiver
 * that misses "staged" (until R2's fix: rank 0's next call rewrote its presence without the
 * bit) keeps poison; one that takes an earlier call's "stored directly" of the same workspace
 * half (calls 1 and 3, 4 and 6) keeps poison too. On local and cpu (one rank's free: as
 * freed_peer_slot). The local transport runs a call's virtual ranks in one grid, so there a
 * call never overlaps the next: this checks the mechanism, not the race. */
static void back_to_back_freed(const t_world_t* w) {
  void* a[EA_MAX_P];
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_mem_alloc(w->comms[r], 4096, &a[r]));
  t_knob_set("FCO_EA_LEAN", "1");
  t_knob_set("FCO_EA_DIRECT", "1");
  ea_sym_mask = ((1u << w->n) - 1) & ~1u;
  ea_prob_t p[B2B_CALLS];
  for (int j = 0; j < B2B_CALLS; j++) {
    const uint64_t seed = t_next_seed();
    ea_prob_make_shape(&p[j], w->n, 64, FCO_BF16, FCO_EMB_INDEX_I32, j & 1, FCO_EMB_POOL_SUM, 0,
                       seed, 0, kTpr, kBpr);
    if (j == 0) ea_describe(&p[j], 1, seed, "back to back: every buffer held (the ws grows)");
    ea_prob_upload(w, &p[j]);
  }
  run_exact(w, &p[0], 1);
  for (int j = 0; j < B2B_CALLS; j++)
    if (j % 3 != 1) { /* local: rank 0's table loses call j's slot */
      ASSERT_OK(fco_mem_free(w->comms[0], p[j].d_sym[0]));
      p[j].d_sym[0] = NULL;
    }
  for (int round = 0; round < 2; round++)
    b2b_round(w, p, B2B_CALLS, issue_impl1, "rank 0 freed the slots of calls j % 3 != 1", round);
  for (int j = 0; j < B2B_CALLS; j++) ea_prob_free(w, &p[j]);
  ea_sym_mask = 0;
  t_knob_reset("FCO_EA_LEAN");
  t_knob_reset("FCO_EA_DIRECT");
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_mem_free(w->comms[r], a[r]));
}

/* Call j of back_to_back_mixed: the kernel and rank r's FCO_EA_DIRECT by j % 4 (knobs are read
 * when the call is made; ranks may differ on FCO_EA_DIRECT, not on FCO_EA_LEAN). */
static void issue_mixed(const t_world_t* w, const ea_prob_t* p, int j) {
  t_knob_set("FCO_EA_LEAN", j % 4 == 3 ? "0" : "1");
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++) {
    t_knob_set("FCO_EA_DIRECT", j % 4 == 1 && r > 0 ? "0" : "1");
    ASSERT_OK(ea_prob_run_rank(w, p, r, 1, NULL));
  }
  ASSERT_OK(fco_group_end());
  if (j % 4 != 3) b2b_want_direct(w, 0, j); /* rank 0 stores directly in every lean call */
}

/* R2's other forms, no free: every out symmetric, every buffer held; per 4 calls the fused lean
 * kernel storing directly everywhere; the same with FCO_EA_DIRECT=0 on ranks 1.. (until R2's
 * fix their presence of that call said "I do not store directly", which rank 0, still landing
 * the call before, could read: it landed stale staging over their direct rows — the review's
 * "capability changed" form); the lean kernel again; the previous fused kernel (FCO_EA_LEAN=0:
 * its presence carries no bits at all; so would another op's flag in that slot). On nccl rank 0
 * pools many more local rows than its peers (its tables 6 to their 1, bags up to 1024 rows), so
 * it lands after they have begun their next call: there it catches the race (two GPUs); on
 * local and cpu a small problem checks the mechanism. All transports. */
static void back_to_back_mixed(const t_world_t* w) {
  static const int32_t tpr_heavy[EA_MAX_P] = {6, 1, 1, 1, 1, 1, 1, 1};
  static const int64_t bpr_heavy[EA_MAX_P] = {1024, 16, 16, 16, 16, 16, 16, 16};
  const int heavy = w->transport == FCO_TRANSPORT_NCCL;
  ea_sym_mask = (1u << w->n) - 1;
  ea_long_bags = heavy ? 1024 : 0;
  ea_prob_t p[B2B_CALLS];
  for (int j = 0; j < B2B_CALLS; j++) {
    const uint64_t seed = t_next_seed();
    ea_prob_make_shape(&p[j], w->n, 64, FCO_BF16, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, seed,
                       0, heavy ? tpr_heavy : kTpr, heavy ? bpr_heavy : kBpr);
    if (j == 0) ea_describe(&p[j], 1, seed, "back to back: lean / lean, ranks 1.. staged / fused");
    ea_prob_upload(w, &p[j]);
  }
  ea_long_bags = 0;
  issue_mixed(w, &p[0], 0); /* the workspace grows: not back to back */
  t_sync(w);
  for (int round = 0; round < 2; round++)
    b2b_round(w, p, B2B_CALLS, issue_mixed, "lean / lean, ranks 1.. staged / lean / fused", round);
  for (int j = 0; j < B2B_CALLS; j++) ea_prob_free(w, &p[j]);
  ea_sym_mask = 0;
  t_knob_reset("FCO_EA_LEAN");
  t_knob_reset("FCO_EA_DIRECT");
}

#ifdef FCO_HAVE_CUDA
static void CUDART_CB sleep_300ms(void* arg) {
  (void)arg;
  usleep(300 * 1000);
}

/* E4: a world of 2 whose call starts at the epoch limit (impl 1: every rank waits for its peer's
 * presence and counters); rank 1 late on nccl. */
static void epoch_limit_waits(fco_transport_t t) {
  t_world_t w;
  t_context("epoch limit: fco_comm_init_all");
  ASSERT_OK(t_world_init(&w, t, 2, NULL));
  static const int32_t tpr[2] = {3, 1};
  static const int64_t bpr[2] = {256, 512};
  ea_prob_t p;
  uint64_t seed = t_next_seed();
  ea_prob_make_shape(&p, 2, 64, FCO_BF16, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, seed, 0, tpr,
                     bpr);
  ea_describe(&p, 1, seed, "below the epoch limit (the workspace grows)");
  ea_run_checked(&w, &p, 1);
  redraw(&w, &p);
  t_world_set_epoch(&w, FCO_EPOCH_LIMIT);
  ea_describe(&p, 1, seed, "a call starting at the epoch limit");
  if (t == FCO_TRANSPORT_NCCL) { /* rank 1 starts 300 ms late: rank 0's waits last that long */
    ASSERT_EQ(cudaSetDevice(t_rank_device(t, 1)), cudaSuccess);
    ASSERT_EQ(cudaLaunchHostFunc(0, sleep_300ms, NULL), cudaSuccess);
  }
  ASSERT_OK(ea_prob_run(&w, &p, 1, NULL));
  t_sync(&w);
  for (int r = 0; r < w.n; r++)
    ASSERT_RES(fco_comm_get_async_error(w.comms[r]), FCO_ERR_INVALID_USAGE);
  ASSERT_EQ(ea_prob_check(&w, &p), 0);
  ea_prob_free(&w, &p);
  t_world_destroy(&w, 0);
}

/* Session 57's review: a sender block whose symmetric-out resolve fails (a wait's timeout, or
 * the sender's own error stopping it) stages, while its sibling blocks store directly and write
 * the direct word: the receiver skipped the whole source and kept the failed block's rows
 * stale, reporting nothing (only the sender did). Now such a block signals none of its bags, so
 * the receiver times out with its own error. FCO_FAULT_EA_RESOLVE=0: rank 0's odd blocks fail
 * after their waits (recording FCO_ERR_TIMEOUT); enough remote tiles (2 tables × 4096 samples
 * for rank 1) that odd and even blocks of rank 0 resolve rank 1. Rank 1 must report an error
 * (fails on the old kernel: no error, poison rows). Its own world (it ends broken), P = 2. */
static void failed_resolve(fco_transport_t t) {
  static const int32_t tpr[2] = {2, 1};
  static const int64_t bpr[2] = {64, 4096};
  fco_config_t cfg;
  t_world_t w;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = 1000; /* rank 1's counter wait ends at it */
  t_context("failed resolve: fco_comm_init_all");
  ASSERT_OK(t_world_init(&w, t, 2, &cfg));
  t_knob_set("FCO_EA_LEAN", "1");
  t_knob_set("FCO_EA_DIRECT", "1");
  ea_sym_mask = 3;
  ea_prob_t p;
  const uint64_t seed = t_next_seed();
  ea_prob_make_shape(&p, 2, 64, FCO_BF16, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, seed, 0, tpr,
                     bpr);
  ea_describe(&p, 1, seed, "failed resolve: every out symmetric, good call first");
  ea_prob_upload(&w, &p);
  run_exact(&w, &p, 1); /* the workspace grows: the faulty call runs the lean kernel */
  redraw(&w, &p);
  ea_describe(&p, 1, seed, "failed resolve: FCO_FAULT_EA_RESOLVE=0 (rank 0's odd blocks)");
  t_knob_set("FCO_FAULT_EA_RESOLVE", "0");
  ASSERT_OK(ea_prob_run(&w, &p, 1, NULL));
  t_knob_reset("FCO_FAULT_EA_RESOLVE");
  b2b_want_direct(&w, 0, 1);
  t_sync(&w);
  ASSERT_RES(fco_comm_get_async_error(w.comms[0]), FCO_ERR_TIMEOUT); /* the hook's record */
  const fco_result_t r1 = fco_comm_get_async_error(w.comms[1]);
  printf("failed resolve: rank 1 reports %s: %s\n", fco_result_string(r1),
         fco_last_error(w.comms[1]));
  ASSERT_RES(r1, FCO_ERR_TIMEOUT);
  ea_prob_free(&w, &p);
  ea_sym_mask = 0;
  t_knob_reset("FCO_EA_LEAN");
  t_knob_reset("FCO_EA_DIRECT");
  t_world_destroy(&w, 0);
}
#endif

/* argv[1], optional: one part alone (misaligned, freed, b2b, epoch or fault); all by default. */
int main(int argc, char** argv) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 2);
  const char* only = argc > 1 ? argv[1] : NULL;
#define PART(name) (!only || !strcmp(only, name))
  int max = t_test_max_ranks(t);
  for (int P = 2; P <= max && (PART("misaligned") || PART("freed") || PART("b2b")); P++) {
    t_world_t w;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", P);
    ASSERT_OK(t_world_init(&w, t, P, NULL));
    if (PART("misaligned")) misaligned_one_rank(&w);
    if (PART("freed") && t != FCO_TRANSPORT_NCCL) freed_peer_slot(&w);
    if (PART("b2b") && t != FCO_TRANSPORT_NCCL) back_to_back_freed(&w);
    if (PART("b2b")) back_to_back_mixed(&w);
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", P, t_now_ms() - t0);
    fflush(stdout);
  }
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(t) && PART("epoch")) {
    double t0 = t_now_ms();
    epoch_limit_waits(t);
    printf("epoch limit: ok (%.0f ms)\n", t_now_ms() - t0);
  }
  if (t_is_gpu(t) && PART("fault")) {
    double t0 = t_now_ms();
    failed_resolve(t);
    printf("failed resolve: ok (%.0f ms)\n", t_now_ms() - t0);
  }
#endif
  return t_pass(t, max, t_test_rank_cap());
}
