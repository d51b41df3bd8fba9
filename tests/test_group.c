/*
 * test_group.c — fco_group_start/end behave as NCCL's group calls: end without start is
 * FCO_ERR_INVALID_USAGE; an empty group is fine; groups nest (only the outermost end issues
 * the recorded operations); one group may hold operations of two separate worlds, and two
 * operations per rank of one world (run in issue order), all completing correctly; on local, a
 * call issued for only some of the virtual ranks is refused (FCO_ERR_INVALID_USAGE, nothing
 * written) and the world still works; a group whose ranks' call sequences differ (another
 * operator, one call more) is refused as a whole, naming both.
 *   make test   or   build/tests/test_group   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include "test.h"

static void misuse_and_empty(void) {
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(NULL, "fco_group_start");
  ASSERT_OK(fco_group_start());
  ASSERT_OK(fco_group_end());
  ASSERT_OK(fco_group_start());
  ASSERT_OK(fco_group_start());
  ASSERT_OK(fco_group_end());
  ASSERT_OK(fco_group_end());
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_USAGE); /* balanced again: depth is back to 0 */
}

static void nested(const t_world_t* w) {
  t_ar_bufs_t b;
  uint64_t seed = t_next_seed();
  t_context("nested groups, %d ranks", w->n);
  t_ar_alloc(w, &b, 4097);
  t_ar_prepare(w, &b, 4097, FCO_BF16, 0, seed);
  ASSERT_OK(fco_group_start());
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++)
    ASSERT_OK(fco_allreduce(w->comms[r], b.in[r], b.out[r], b.count, b.dtype, 1, NULL));
  ASSERT_OK(fco_group_end()); /* inner end: nothing issued yet */
  t_sync(w);
  ASSERT_EQ(t_ar_check_untouched(w, &b), 0);
  ASSERT_OK(fco_group_end()); /* outer end issues them */
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  t_ar_free(w, &b);
}

/* Two worlds, their ops interleaved in one group; then two ops per rank of world a. */
static void two_worlds(const t_world_t* a, const t_world_t* bw) {
  t_ar_bufs_t ba, bb, ba2;
  uint64_t sa = t_next_seed(), sb = t_next_seed(), sa2 = t_next_seed();
  t_context("two worlds (%d and %d ranks) in one group", a->n, bw->n);
  t_ar_alloc(a, &ba, 70000);
  t_ar_alloc(bw, &bb, 70000);
  t_ar_alloc(a, &ba2, 70000);
  t_ar_prepare(a, &ba, 65537, FCO_F32, 0, sa);
  t_ar_prepare(bw, &bb, 1000, FCO_F16, 1, sb);
  ASSERT_OK(fco_group_start());
  int n = a->n > bw->n ? a->n : bw->n;
  for (int r = 0; r < n; r++) {
    if (r < a->n)
      ASSERT_OK(fco_allreduce(a->comms[r], ba.in[r], ba.out[r], ba.count, ba.dtype, 0, NULL));
    if (r < bw->n)
      ASSERT_OK(fco_allreduce(bw->comms[r], bb.in[r], bb.out[r], bb.count, bb.dtype, 1, NULL));
  }
  ASSERT_OK(fco_group_end());
  t_sync(a);
  t_sync(bw);
  ASSERT_EQ(t_ar_check(a, &ba, sa), 0);
  ASSERT_EQ(t_ar_check(bw, &bb, sb), 0);

  t_context("two ops per rank of one world in one group (%d ranks)", a->n);
  sa = t_next_seed();
  t_ar_prepare(a, &ba, 4097, FCO_BF16, 1, sa);
  t_ar_prepare(a, &ba2, 65537, FCO_F32, 0, sa2);
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < a->n; r++)
    ASSERT_OK(fco_allreduce(a->comms[r], ba.in[r], ba.out[r], ba.count, ba.dtype, 1, NULL));
  for (int r = a->n - 1; r >= 0; r--) /* the second op issued in the other rank order */
    ASSERT_OK(fco_allreduce(a->comms[r], ba2.in[r], ba2.out[r], ba2.count, ba2.dtype,
                            FCO_IMPL_AUTO, NULL));
  ASSERT_OK(fco_group_end());
  t_sync(a);
  ASSERT_EQ(t_ar_check(a, &ba, sa), 0);
  ASSERT_EQ(t_ar_check(a, &ba2, sa2), 0);
  t_ar_free(a, &ba);
  t_ar_free(a, &ba2);
  t_ar_free(bw, &bb);
}

/* Local transport, P ≥ 2: one launch covers every virtual rank, so a call issued for some of
 * them — alone outside a group, or a group that leaves a rank out — is refused with
 * FCO_ERR_INVALID_USAGE saying to issue it for every rank between fco_group_start/end, nothing
 * is written, and the world works afterwards. (On cpu and nccl a rank may call alone: from its
 * own thread, test_mixed_ops.) */
static void local_partial(const t_world_t* w) {
  t_ar_bufs_t b;
  uint64_t seed = t_next_seed();
  t_context("local: rank 0 alone outside a group (%d ranks)", w->n);
  t_ar_alloc(w, &b, 5000);
  t_ar_prepare(w, &b, 5000, FCO_BF16, 0, seed);
  ASSERT_RES(fco_allreduce(w->comms[0], b.in[0], b.out[0], b.count, b.dtype, 1, NULL),
             FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(w->comms[0], "fco_group_start");
  t_context("local: a group without rank %d (%d ranks)", w->n - 1, w->n);
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n - 1; r++)
    ASSERT_OK(fco_allreduce(w->comms[r], b.in[r], b.out[r], b.count, b.dtype, FCO_IMPL_AUTO,
                            NULL));
  ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(w->comms[0], "fco_group_start");
  t_sync(w);
  ASSERT_EQ(t_ar_check_untouched(w, &b), 0);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  t_context("local: the whole group after the refusals (%d ranks)", w->n);
  ASSERT_OK(t_ar_run(w, &b, 1));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  t_ar_free(w, &b);
}

/* One thread driving the world queues different call sequences for its ranks: rank 0 an
 * allreduce where rank 1 has a gemv_allreduce, or one call more on rank 0. fco_group_end issues
 * none of them (FCO_ERR_INVALID_ARGUMENT naming both operators, or both counts, on every rank;
 * nothing written) and the world works after (until session 55 the round was split by kind
 * into batches that each waited for the missing ranks until the timeout). */
static void mismatched_sequences(const t_world_t* w) {
  t_ar_bufs_t b;
  const int P = w->n;
  t_ar_alloc(w, &b, 256);
  void* g[T_MAX_RANKS]; /* gemv x [1, 16], W [16, 16], y [1, 16] (f32) of each rank */
  for (int r = 0; r < P; r++) g[r] = t_alloc(w->transport, t_rank_device(w->transport, r), 4096);
  for (int what = 0; what < 2; what++) {
    t_context("%s (%d ranks)", what ? "one call more on rank 0" : "rank 1's call another operator",
              P);
    t_ar_prepare(w, &b, 256, FCO_F32, 0, 1);
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < P; r++) {
      char* x = (char*)g[r];
      if (what == 0 && r == 1)
        ASSERT_OK(fco_gemv_allreduce(w->comms[r], x, x + 256, NULL, x + 2048, 1, 16, 16, FCO_F32,
                                     0, NULL));
      else
        ASSERT_OK(fco_allreduce(w->comms[r], b.in[r], b.out[r], 256, FCO_F32, 0, NULL));
      if (what == 1 && r == 0)
        ASSERT_OK(fco_allreduce(w->comms[r], b.in[r], b.out[r], 256, FCO_F32, 0, NULL));
    }
    ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
    for (int r = 0; r < P; r++) {
      ASSERT_MSG(w->comms[r], what ? "rank 0 has 2 calls" : "fco_gemv_allreduce on rank 1");
      ASSERT_MSG(w->comms[r], what ? "has 1" : "fco_allreduce on rank 0");
      ASSERT_STR_EQ(fco_last_plan(w->comms[r]), "");
    }
    t_sync(w);
    ASSERT_EQ(t_ar_check_untouched(w, &b), 0);
  }
  t_context("the world after the refused groups (%d ranks)", P);
  uint64_t seed = t_next_seed();
  t_ar_prepare(w, &b, 256, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(w, &b, 1));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  for (int r = 0; r < P; r++) t_free(w->transport, t_rank_device(w->transport, r), g[r]);
  t_ar_free(w, &b);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  misuse_and_empty();
  int max = t_max_ranks(t);
  int na = max < 3 ? max : 3, nb = max < 2 ? max : 2;
  t_world_t a, b;
  ASSERT_OK(t_world_init(&a, t, na, NULL));
  ASSERT_OK(t_world_init(&b, t, nb, NULL));
  nested(&a);
  two_worlds(&a, &b);
  if (t == FCO_TRANSPORT_LOCAL && a.n >= 2) local_partial(&a);
  if (a.n >= 2) mismatched_sequences(&a);
  misuse_and_empty(); /* the group state is clean after all that */
  t_world_destroy(&b, 0);
  t_world_destroy(&a, 0);
  printf("PASS\n");
  return 0;
}
