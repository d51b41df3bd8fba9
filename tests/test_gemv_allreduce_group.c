/*
 * test_gemv_allreduce_group.c — fco_gemv_allreduce's grouped tiles (GPU transports; the cpu
 * transport has no kernels to choose: 77 = skip there). Split out of
 * test_gemv_allreduce_kernels.c in session 31, when that program outgrew tests/run.sh's 120 s
 * bound a test (this part was most of it; ~60 s at local P 1..4 since the fixture's float64
 * reference runs on threads); the fixture both share: tests/common/gemv_fixture.h — every output poisoned
 * first, fresh seeded inputs per call, the float64 reference check, ranks' y bit-identical,
 * guards intact.
 *   The grouped tiles of impls 1 and 2 (bf16 / f16; by default the TMA tile at M 9..64 since
 *   session 30, M 33..64 before; group_tests: every FCO_GEMV_GROUP
 *   value, K_r up to ~4600 so the cp.async ring wraps, K off the vector path, partial groups,
 *   split groups (FCO_GEMV_SPLIT auto, 1, 2, 3; slices left empty by a short K); partials pushed
 *   in the dtype (the default) and as fp32 (FCO_GEMV_GROUP_FP32=1, a third of the calls); the
 *   default TMA tile in groups of 8 (split 2 as cluster pairs and with FCO_GEMV_SPLIT_PAIR=0,
 *   3 and 2 ring stages, the mma.sync tile in groups of 8) and of 4 (FCO_GEMV_GROUP_TMA=4, and
 *   the automatic choice between the two checked against the plan) and the older tiles with
 *   FCO_GEMV_GROUP_TMA=0, each read back from fco_last_plan; the pairs' split finalise
 *   (FCO_GEMV_PAIR_FIN, on by default) and the owner's whole-group one; N 8192 at M 64, where
 *   one rank a GPU ties pairs of groups of 8 with unsplit groups of 4 (the pairs take it);
 *   then impl 2 on those groups, twophase_group_tests: several groups a block, split groups,
 *   fewer groups than ranks, back to back and in a CUDA graph; then impl 1 in rounds,
 *   FCO_GEMV_ROUNDS, rounds_tests);
 *   make test   or   build/tests/test_gemv_allreduce_group   (FCO_TRANSPORT=local|nccl)
 * FCO_TEST_SEED reproduces a run.
 */
#include <stdlib.h>

#include "gemv_fixture.h"

#ifdef FCO_HAVE_CUDA
/* Grouped tiles (FCO_GEMV_GROUP: impl 1 at M 17..64 in bf16 / f16): every knob value (unset,
 * 2, 4, 0 = the one-tile kernels; 4 again with FCO_GEMV_GROUP_MMA=1, the mma.sync tile instead
 * of wgmma on the vector path) on M of 3..8 m-tiles, N with a partial last group (1000, 100) or
 * a single partial tile (15), K_r up to ~4600 (both tiles' rings wrap: wgmma 12 slabs of 64,
 * mma.sync 6 chunks of 128; then K's tail), a shorter vector-path K and K off the vector path
 * (4095: every rank's chunks through the guarded loads); bf16 and f16, bias on and off, each
 * call checked against the float64 reference (gemv_check()). PDL as the caller set it.
 * Split groups (FCO_GEMV_SPLIT, M 33..64): these N leave most blocks without a group, so unset
 * splits each group's K in 2..4 slices (4 at P = 1, 2 at P = 4 on one H200); the runs set it
 * to 1 (off) with groups of 4, 3 with the mma.sync tile, and 2 once more, and a K of one slab
 * a rank (helpers with empty slices) runs split, and one more call after. (Refused knob values:
 * bad_args in test_gemv_allreduce.c.) */
/* Every rank's fco_last_plan names grouped tiles with K in `split` slices (0: the automatic rule
 * for N columns — at least 2 slices where the groups fill at most half of the co-resident slots
 * the plan reports, else 1: with P = 5..8 virtual ranks on one GPU the slots per rank shrink;
 * a split asked for: fewer where the slots a group do not hold it). */
static void expect_split(const t_world_t* w, size_t N, int split) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "split=");
    const char* kg = strstr(plan, "kG=");
    const char* of = strstr(plan, "blocks/rank of ");
    int got = at ? atoi(at + 6) : -1, want = split;
    if (kg && of) {
      const size_t cols = 16 * (size_t)atoi(kg + 3); /* a group's columns */
      const long groups = (long)((N + cols - 1) / cols), slots = atol(of + 15);
      if (!split && 2 * groups > slots) want = 1; /* too many to split */
      /* a split asked for: at most as many slices as there are slots per group (pick_split;
       * with 5..8 virtual ranks on one GPU, e.g. 22 slots for 8 groups: 2 of the 3 asked) */
      if (split > 1 && groups > 0 && slots / groups < split)
        want = slots / groups < 1 ? 1 : (int)(slots / groups);
    }
    if (!strstr(plan, "grouped") || !of || (want ? got != want : got < 2))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected grouped tiles with split %s%d", r,
             plan, want ? "" : ">= ", want ? want : 2);
  }
}

/* Every rank's fco_last_plan names the grouped tile kernel `tile` ("grouped wgmma tma", ...). */
static void expect_tile(const t_world_t* w, const char* tile) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, tile);
    if (!at || at[strlen(tile)] != ' ')
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected the kernel \"%s\"", r, plan, tile);
  }
}

/* Every rank's fco_last_plan has (want) or lacks (!want) the words `what` ("split=2 pair"). */
static void expect_plan_has(const t_world_t* w, const char* what, int want) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    if ((strstr(plan, what) != NULL) != want)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected %s\"%s\"", r, plan,
             want ? "" : "no ", what);
  }
}

/* Every rank's grouped TMA tile, where split in 2..4, ran as a cluster: "split=2 pair",
 * "split=3 cluster", "split=4 cluster" (where the caller knows the device holds them); split 1
 * (expect_split's rule) has none. */
static void expect_cluster(const t_world_t* w) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "split=");
    const int split = at ? atoi(at + 6) : 0;
    char want[32];
    snprintf(want, sizeof want, "split=%d %s", split, split == 2 ? "pair" : "cluster");
    if (split < 1 || (split > 1 && !strstr(plan, want)))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected a split group as a cluster", r,
             plan);
  }
}

/* FCO_GEMV_GROUP_TMA unset (M 33..64, the TMA tile): every rank ran groups of 4 exactly where
 * its plan says they stream W from more blocks than groups of 8 would, or from as many in
 * fewer K slices — "(groups of 4: B4 blocks, split S4; of 8: B8, split S8)" — unless that tie
 * went to pairs of groups of 8 (", pairs)": only impl 1, one local rank, S4 1 and S8 2, run as
 * "split=2 pair"), and all ranks chose alike. */
static void expect_tma_groups(const t_world_t* w) {
  int first = -1;
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "(groups of 4: ");
    int b4 = 0, s4 = 0, b8 = 0, s8 = 0;
    if (!at ||
        sscanf(at, "(groups of 4: %d blocks, split %d; of 8: %d, split %d)", &b4, &s4, &b8, &s8) !=
            4 ||
        b4 < 1 || b8 < 1 || s4 < 1 || s8 < 1) {
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\": no TMA group rule in the plan", r, plan);
      continue;
    }
    const int pairs8 = strstr(at, ", pairs)") != NULL;
    const int one_local = w->transport != FCO_TRANSPORT_LOCAL || w->n == 1; /* num_local 1 */
    if (pairs8 && !(one_local && b4 == b8 && s4 == 1 && s8 == 2 && strstr(plan, "impl 1 ") &&
                    strstr(plan, "kG=8 split=2 pair")))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\": pairs of groups of 8 off their rule", r, plan);
    const int four = strstr(plan, "kG=4") != NULL,
              want = b4 > b8 || (b4 == b8 && s4 < s8 && !pairs8);
    if (four != want || (!four && !strstr(plan, "kG=8")))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\": groups of %s against the rule", r, plan,
             four ? "4" : "8");
    if (first < 0) first = four;
    else if (first != four)
      t_fail(__FILE__, __LINE__, "rank %d chose groups of %d, rank 0 of %d", r, four ? 4 : 8,
             first ? 4 : 8);
  }
}

/* impl 2 (two-phase) at M 17..64 on the grouped tiles (session 27: run_twophase_group; M 24 on
 * the TMA tile since session 30, FCO_GEMV_GROUP_TMA=0 the one-tile kernels there), one
 * knob row at a time: the TMA tile with the group size unset (the launcher's rule), groups of 4,
 * groups of 8 split 2 (cluster pairs), split 2 through the split area (FCO_GEMV_SPLIT_PAIR=0:
 * the area past impl 2's gather area), the mma.sync tile in groups of 8 split 3 (the split
 * area), and FCO_GEMV_GROUP_TMA=0 (GroupWgmma, groups of 4 / 2). N 1000 and 100 (few groups:
 * split; fewer groups than ranks: the grouped one-shot in impl 2's half), 15, and 8192 with a
 * short K (more groups than a rank's co-resident blocks at P ≥ 2 with groups of 4, P ≥ 3 with
 * 8: several a block, the remote-owned ones first); K off the vector path (4095) now and then.
 * Then back-to-back calls (impls 2, 1, 3, 0 in turn, no sync) and a CUDA graph of impl 2 at M
 * 64, N 8192. */
/* impl 2 on the grouped tiles: every rank's plan names the two-phase kernel where there are at
 * least as many groups (of the plan's kG) as ranks, else the grouped one-shot (no "two-phase"). */
static void expect_twophase(const t_world_t* w, size_t N) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* kg = strstr(plan, "kG=");
    const size_t g = kg ? (size_t)atoi(kg + 3) : 0;
    const int want = g > 0 && ((N + 15) / 16 + g - 1) / g >= (size_t)w->n;
    if (!kg || (strstr(plan, " two-phase ") != NULL) != want)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected the grouped %s", r, plan,
             want ? "two-phase" : "one-shot (fewer groups than ranks)");
  }
}

static void twophase_group_tests(const t_world_t* w, gemv_bufs_t* b) {
  static const char* const tmas[] = {NULL, "4", "1", "1", "1", "0"};
  static const char* const splits[] = {NULL, NULL, "2", "2", "3", NULL};
  static const size_t ms[] = {24, 40, 64};
  static const size_t ns[] = {1000, 100, 15, 8192};
  const size_t kt8192 = gemv_vec_kt_le(w->n, GEMV_MAX_NK / 8192);
  unsigned k = 0;
  for (int gi = 0; gi < 6; gi++) {
    t_knob_set("FCO_GEMV_GROUP_TMA", tmas[gi]);
    t_knob_set("FCO_GEMV_SPLIT", splits[gi]);
    t_knob_set("FCO_GEMV_SPLIT_PAIR", gi == 3 ? "0" : NULL);
    t_knob_set("FCO_GEMV_GROUP_MMA", gi == 4 ? "1" : NULL);
    for (size_t mi = 0; mi < 3; mi++)
      for (size_t ni = 0; ni < 4; ni++, k++) {
        const size_t N = ns[ni];
        const int off_vec = N <= 1000 && k % 5 == 2; /* K 4095: the mma.sync tile */
        const size_t kt = N == 8192 ? kt8192 : off_vec ? 4095 : gemv_vec_kt_le(w->n, GEMV_MAX_KT);
        gemv_one_call(w, b, ms[mi], N, kt, k % 2 ? FCO_F16 : FCO_BF16, (int)((k / 2) % 2), 2);
        expect_plan_has(w, "impl 2 ", 1);
        const int vec = !off_vec && gi != 4;
        const int area = ms[mi] > 32; /* M 24: no split area, a split only in clusters */
        if (gi != 5 || area) expect_twophase(w, N);
        if (gi == 5 && !area) expect_plan_has(w, "grouped", 0); /* the one-tile kernels */
        else
          expect_tile(w, !vec    ? "grouped mma.sync"
                         : gi == 5 ? "grouped wgmma"
                                   : "grouped wgmma tma");
        if (vec && (gi == 1 || gi == 2)) expect_plan_has(w, "kG=4", gi == 1);
        if (gi == 0 && vec) expect_tma_groups(w);
        if ((gi == 2 || gi == 3) && N <= 1000) {
          expect_split(w, N, area || (vec && gi == 2) ? 2 : 1);
          expect_plan_has(w, "split=2 pair", vec && gi == 2);
        }
        if (gi == 4 && N <= 100) expect_split(w, N, area ? 3 : 1);
      }
  }
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  t_knob_reset("FCO_GEMV_SPLIT");
  t_knob_reset("FCO_GEMV_SPLIT_PAIR");
  t_knob_reset("FCO_GEMV_GROUP_MMA");
  /* back to back, no sync between: the last call's y must be right */
  uint64_t seed = t_next_seed();
  t_context("P=%d two-phase groups back to back seed=0x%016llx", w->n, (unsigned long long)seed);
  gemv_prepare(b, 64, 8192, kt8192, FCO_BF16, 1, seed);
  static const int impls[] = {2, 1, 2, 3, 2, 0, 2, 2};
  for (int i = 0; i < 40; i++) ASSERT_OK(gemv_issue(w, b, impls[i % 8], NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
  gemv_graph_shape(w, b, 2, 64, 8192, kt8192, FCO_F16);
  expect_plan_has(w, "impl 2 ", 1);
  expect_twophase(w, 8192);
}

/* A TMA-tile plan's numbers: its groups for N columns (from "kG="), split, rounds (0 where
 * the plan names none), blocks a rank and co-resident slots ("B blocks/rank of S"). 0 where
 * the plan is not the TMA grouped tile or lacks one of them. */
typedef struct {
  long units, blocks, slots, rounds;
  int split;
} tma_plan_t;
static int tma_plan(const char* plan, size_t N, tma_plan_t* tp) {
  const char* kg = strstr(plan, "kG=");
  const char* sp = strstr(plan, "split=");
  const char* of = strstr(plan, " blocks/rank of ");
  const char* at = strstr(plan, " rounds=");
  if (!kg || !sp || !of || !strstr(plan, "grouped wgmma tma ")) return 0;
  const long cols = 16L * atoi(kg + 3);
  const char* nb = of; /* the number before " blocks/rank of " */
  while (nb > plan && nb[-1] >= '0' && nb[-1] <= '9') nb--;
  tp->units = ((long)N + cols - 1) / cols;
  tp->split = atoi(sp + 6);
  tp->blocks = atol(nb);
  tp->slots = atol(of + 16);
  tp->rounds = at ? atol(at + 8) : 0;
  return cols > 0;
}

/* FCO_GEMV_ROUNDS = R (impl 1 on the TMA tile, at any M it runs: a block takes its groups as
 * rounds of one ring, run_oneshot_rounds): every rank's plan says "rounds=R" and runs
 * min(the owners of the usual rule, ceil(groups / R)) owner blocks, times the split (1, or 2
 * as a cluster pair: never the split area). */
static void expect_rounds(const t_world_t* w, size_t N, int R) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    tma_plan_t tp;
    int ok = tma_plan(plan, N, &tp) && tp.rounds == R;
    if (ok) {
      long B = tp.slots < tp.units ? tp.slots : tp.units; /* owner_blocks, then R's cap */
      B = (tp.units + (tp.units + B - 1) / B - 1) / ((tp.units + B - 1) / B);
      if ((tp.units + R - 1) / R < B) B = (tp.units + R - 1) / R;
      ok = (tp.split == 1 || (tp.split == 2 && strstr(plan, "split=2 pair"))) &&
           tp.blocks == B * tp.split;
    }
    if (!ok)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected the TMA tile in rounds of %d", r,
             plan, R);
  }
}

/* FCO_GEMV_ROUNDS unset (or 1: off): every rank's TMA tile runs in rounds exactly where its
 * owners, unsplit, take several groups each ("rounds=ceil(groups / blocks)"), never where
 * rounds are off. */
static void expect_auto_rounds(const t_world_t* w, size_t N, int off) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    tma_plan_t tp;
    int ok = tma_plan(plan, N, &tp);
    if (ok) {
      const int several = !off && tp.split == 1 && tp.units > tp.blocks;
      ok = tp.rounds == (several ? (tp.units + tp.blocks - 1) / tp.blocks : 0);
    }
    if (!ok)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected rounds %s", r, plan,
             off ? "off" : "where owners take several groups");
  }
}

/* The pair's split finalise (FCO_GEMV_PAIR_FIN unset or 1, `off` 0 or FCO_GEMV_ROUNDS=1):
 * every rank's one-shot TMA tile in cluster pairs ("split=2 pair", not "two-phase") says
 * " fin-split" unless off, and no other plan does. */
static void expect_fin_split(const t_world_t* w, int off) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const int want = !off && strstr(plan, "grouped wgmma tma ") && !strstr(plan, "two-phase") &&
                     strstr(plan, "split=2 pair");
    if ((strstr(plan, " fin-split") != NULL) != want)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected %s", r, plan,
             want ? "the split finalise (fin-split)" : "no fin-split");
  }
}

/* Rounds (FCO_GEMV_ROUNDS), one knob row at a time: R = 2 and 3 in groups of 8 and of 4
 * (FCO_GEMV_GROUP_TMA), the split unset (pairs where the owners leave room), 1 (no hand-off)
 * and pairs off (FCO_GEMV_SPLIT_PAIR=0: then not split), R = 8 on 2 ring stages. N 8192 (64 /
 * 128 groups: several rounds a block, the last owners one fewer where R does not divide them;
 * its short K wraps the ring within a round and across rounds), 1000 (a partial last group,
 * long K), 15 (one group, one round); M 40 / 64, bf16 / f16, bias on / off, a third of the
 * calls with fp32 partials; the pairs' split finalise on (FCO_GEMV_PAIR_FIN unset) but in
 * the third row and at M 40 of the first (0: the owner finalises the whole group), checked
 * against the plans (expect_fin_split). Then back to back (impls 1 in rounds, 0, 2, 3, no
 * sync) and a CUDA graph, the split finalise on. The last three rows: rounds unset in groups of 8 and of 4 (in rounds where the owners
 * take several groups: N 8192 from P = 2 or 3 on one H200) and 1 (off), expect_auto_rounds. */
static void rounds_tests(const t_world_t* w, gemv_bufs_t* b) {
  static const char* const rs[] = {"2", "3", "2", "3", "2", "8", NULL, NULL, "1"};
  static const char* const tmas[] = {"1", "1", "4", "4", "1", "4", "1", "4", "4"};
  static const char* const splits[] = {NULL, NULL, NULL, "1", NULL, NULL, NULL, NULL, NULL};
  static const int rv[] = {2, 3, 2, 3, 2, 8, 0, 0, 1};
  static const size_t ms[] = {40, 64};
  static const size_t ns[] = {8192, 1000, 15};
  const size_t kt8192 = gemv_vec_kt_le(w->n, GEMV_MAX_NK / 8192);
  unsigned k = 0;
  for (int gi = 0; gi < 9; gi++) {
    t_knob_set("FCO_GEMV_ROUNDS", rs[gi]);
    t_knob_set("FCO_GEMV_GROUP_TMA", tmas[gi]);
    t_knob_set("FCO_GEMV_SPLIT", splits[gi]);
    t_knob_set("FCO_GEMV_SPLIT_PAIR", gi == 4 ? "0" : NULL);
    t_knob_set("FCO_GEMV_TMA_STAGES", gi == 5 ? "2" : NULL);
    for (size_t mi = 0; mi < 2; mi++)
      for (size_t ni = 0; ni < 3; ni++, k++) {
        const int fin_off = gi == 2 || (gi == 0 && mi == 0);
        t_knob_set("FCO_GEMV_PAIR_FIN", fin_off ? "0" : NULL);
        const size_t N = ns[ni];
        const size_t kt = N == 8192 ? kt8192 : gemv_vec_kt_le(w->n, GEMV_MAX_KT);
        if ((mi + ni + (size_t)gi) % 3 == 2) t_knob_set("FCO_GEMV_GROUP_FP32", "1");
        gemv_one_call(w, b, ms[mi], N, kt, k % 2 ? FCO_F16 : FCO_BF16, (int)((k / 2) % 2), 1);
        t_knob_reset("FCO_GEMV_GROUP_FP32");
        if (rv[gi] > 1) expect_rounds(w, N, rv[gi]);
        else expect_auto_rounds(w, N, rv[gi] == 1);
        expect_plan_has(w, "kG=4", tmas[gi][0] == '4');
        if (gi == 3 || gi == 4) expect_plan_has(w, "split=1 ", 1);
        expect_fin_split(w, fin_off || rv[gi] == 1);
      }
  }
  t_knob_reset("FCO_GEMV_PAIR_FIN");
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  t_knob_reset("FCO_GEMV_SPLIT");
  t_knob_reset("FCO_GEMV_SPLIT_PAIR");
  t_knob_reset("FCO_GEMV_TMA_STAGES");
  t_knob_set("FCO_GEMV_ROUNDS", "2");
  uint64_t seed = t_next_seed();
  t_context("P=%d rounds back to back seed=0x%016llx", w->n, (unsigned long long)seed);
  gemv_prepare(b, 64, 8192, kt8192, FCO_BF16, 1, seed);
  static const int impls[] = {1, 0, 1, 2, 1, 3, 1, 1};
  for (int i = 0; i < 40; i++) ASSERT_OK(gemv_issue(w, b, impls[i % 8], NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
  gemv_graph_shape(w, b, 1, 64, 8192, kt8192, FCO_F16);
  expect_rounds(w, 8192, 2);
  expect_fin_split(w, 0);
  t_knob_reset("FCO_GEMV_ROUNDS");
}

static void group_tests(const t_world_t* w, gemv_bufs_t* b) {
  /* The first six with FCO_GEMV_GROUP_TMA=0 (groups of 4 or 2, GroupWgmma): the fifth the
   * mma.sync tile, the sixth groups as unset, split in 2. The seventh to tenth: groups of 8 on
   * the TMA-fed tile (the default; FCO_GEMV_GROUP_TMA unset, then 1): split unset (up to 4, as
   * clusters: lowered to a split whose clusters fit, e.g. 3 at P = 4 on H200); split 2 (owner and helper a cluster pair) on 3 ring stages;
   * split 3 with FCO_GEMV_GROUP_MMA=1 (the mma.sync tile in groups of 8); split 2 with
   * FCO_GEMV_SPLIT_PAIR=0 (the split area) on 2 ring stages (FCO_GEMV_TMA_STAGES). The
   * eleventh: split 3 on the TMA tile (a cluster of 3: the helpers' slices in the owner's
   * finished ring) on 2 ring stages. The twelfth: groups of 4 on the TMA tile
   * (FCO_GEMV_GROUP_TMA=4), split unset (in clusters), on 2 of its 6 ring stages. The seventh
   * (TMA unset) takes groups of 4 or 8 by the launcher's rule (expect_tma_groups; at N 1000
   * and 100 groups of 4, at N 15 groups of 8, on all their stages). */
  static const char* const knobs[] = {NULL, "2", "4", "0", "4", NULL,
                                      NULL, NULL, NULL, NULL, NULL, NULL};
  static const char* const splits[] = {NULL, NULL, "1", NULL, "3", "2",
                                       NULL, "2", "3",  "2",  "3", NULL};
  static const size_t ms[] = {17, 32, 40, 64};
  static const size_t ns[] = {1000, 100, 15};
  const size_t ks[] = {gemv_vec_kt_le(w->n, GEMV_MAX_KT), 4095, gemv_vec_kt_le(w->n, 1800)};
  unsigned k = 0;
  for (int gi = 0; gi < 12; gi++) {
    const int tma = gi >= 6;
    if (knobs[gi]) t_knob_set("FCO_GEMV_GROUP", knobs[gi]);
    else t_knob_reset("FCO_GEMV_GROUP");
    if (splits[gi]) t_knob_set("FCO_GEMV_SPLIT", splits[gi]);
    else t_knob_reset("FCO_GEMV_SPLIT");
    if (gi == 4 || gi == 8) t_knob_set("FCO_GEMV_GROUP_MMA", "1");
    else t_knob_reset("FCO_GEMV_GROUP_MMA");
    if (gi == 6) t_knob_reset("FCO_GEMV_GROUP_TMA");
    else t_knob_set("FCO_GEMV_GROUP_TMA", gi == 11 ? "4" : tma ? "1" : "0");
    if (gi == 9) t_knob_set("FCO_GEMV_SPLIT_PAIR", "0");
    else t_knob_reset("FCO_GEMV_SPLIT_PAIR");
    if (gi == 7 || gi >= 9) t_knob_set("FCO_GEMV_TMA_STAGES", gi == 7 ? "3" : "2");
    else t_knob_reset("FCO_GEMV_TMA_STAGES");
    for (size_t mi = 0; mi < 4; mi++)
      for (size_t ni = 0; ni < 3; ni++, k++) {
        /* split 2 in pairs (row 7): the split finalise at M 17 / 40, the owner's whole-group
         * finalise (FCO_GEMV_PAIR_FIN=0, the cluster barrier's hand-off) at M 32 / 64 */
        const int fin_off = gi == 7 && mi % 2;
        t_knob_set("FCO_GEMV_PAIR_FIN", fin_off ? "0" : NULL);
        /* a third of the calls push fp32 partials (FCO_GEMV_GROUP_FP32), the rest the dtype's;
         * spread over M, N and the knob rows (not tied to one N) */
        if ((mi + ni + (size_t)gi) % 3 == 2) t_knob_set("FCO_GEMV_GROUP_FP32", "1");
        gemv_one_call(w, b, ms[mi], ns[ni], ks[(k + gi) % 3], k % 2 ? FCO_F16 : FCO_BF16,
                      (int)((k / 2) % 2), 1);
        t_knob_reset("FCO_GEMV_GROUP_FP32");
        /* M 33..64, split unset: these few groups leave most slots free, so K is split (at
         * P <= 4 on one H200; expect_split checks the rule against the plan's slots) */
        if (ms[mi] > 32 && (gi == 0 || gi == 2 || gi == 6))
          expect_split(w, ns[ni], gi == 2 ? 1 : 0);
        /* M 17..32, TMA unset (row 6): the TMA tile too since session 30, split in clusters
         * where split (no split area below M 33) */
        if (ms[mi] <= 32 && gi == 6 && ks[(k + gi) % 3] != 4095) expect_cluster(w);
        /* groups of 8 at M 17..64 (M 17..32 since session 30):
         * TMA on the vector path, the mma.sync tile off it (K 4095) or with
         * FCO_GEMV_GROUP_MMA=1; split 2 (at most 8 groups: pairs fit at P <= 4) in clusters
         * with TMA unless FCO_GEMV_SPLIT_PAIR=0, split 3 where one group a rank (N <= 100:
         * clusters of 3 fit at any P; 32 of them need not, nor 32 of 4 on H200); the split
         * unset in clusters too (the launcher lowers it to a split whose clusters fit). A split
         * without clusters goes through the split area, which M <= 32 does not reserve: none. */
        if (tma) {
          const int vec = ks[(k + gi) % 3] != 4095 && gi != 8;
          const int area = ms[mi] > 32; /* a split without clusters fits */
          expect_tile(w, vec ? "grouped wgmma tma" : "grouped mma.sync");
          if (gi == 7 || gi == 9) expect_split(w, ns[ni], (vec && gi == 7) || area ? 2 : 1);
          if (gi == 7 || gi == 9) expect_plan_has(w, "split=2 pair", vec && gi == 7);
          expect_fin_split(w, fin_off);
          if (gi == 10) expect_split(w, ns[ni], vec || area ? 3 : 1);
          if (vec && (gi == 6 || gi == 7 || gi == 11 || (gi == 10 && ns[ni] <= 100)))
            expect_cluster(w);
          if (gi > 6) expect_plan_has(w, "kG=4", gi == 11);
          if (gi == 6) expect_tma_groups(w);
        }
      }
  }
  t_knob_reset("FCO_GEMV_GROUP_MMA");
  t_knob_reset("FCO_GEMV_SPLIT");
  t_knob_reset("FCO_GEMV_SPLIT_PAIR");
  t_knob_reset("FCO_GEMV_TMA_STAGES");
  t_knob_reset("FCO_GEMV_PAIR_FIN");
  /* K_r = 8·(r + 1): one slab a rank, so 1..3 of a group's slices are empty; with and without
   * TMA (whose maps then have a K of 8: the box's other columns read as zeros) */
  for (int tma = 1; tma >= 0; tma--) {
    t_knob_set("FCO_GEMV_GROUP_TMA", tma ? "1" : "0");
    gemv_one_call(w, b, 64, 100, gemv_vec_kt_le(w->n, 4 * (size_t)w->n * (w->n + 1)), FCO_BF16, 1,
                  1);
    gemv_one_call(w, b, 48, 1000, gemv_vec_kt_le(w->n, 4 * (size_t)w->n * (w->n + 1)), FCO_F16, 0,
                  1);
    gemv_one_call(w, b, 64, 1000, gemv_vec_kt_le(w->n, GEMV_MAX_KT), FCO_BF16, 1, 1);
    expect_tile(w, tma ? "grouped wgmma tma" : "grouped wgmma");
    if (!tma) expect_plan_has(w, "grouped wgmma tma", 0);
  }
  /* M 1..16 (session 30): impl 1 and 2 on the TMA tile (x's box of M rows) from M 9 by default
   * and at any M with FCO_GEMV_GROUP_TMA set, at P = 1 and with FCO_GEMV_AR_LL=0; with
   * FCO_GEMV_AR_LL=1 (P >= 2) impl 1 runs the LL kernels. K off the vector path (4095): the
   * mma.sync tile in groups of 8; N 8192: more groups than a rank's blocks from P = 3 (rounds).
   * First the default's bound (knobs unset): M 9 on the TMA tile, M 8 not. */
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  t_knob_set("FCO_GEMV_AR_LL", "0");
  gemv_one_call(w, b, 9, 1000, gemv_vec_kt_le(w->n, GEMV_MAX_KT), FCO_BF16, 1, 1);
  expect_tile(w, "grouped wgmma tma");
  gemv_one_call(w, b, 8, 1000, gemv_vec_kt_le(w->n, GEMV_MAX_KT), FCO_F16, 0, 1);
  expect_plan_has(w, "grouped", 0);
  t_knob_set("FCO_GEMV_GROUP_TMA", "8");
  for (int ll = 0; ll < 2; ll++) {
    t_knob_set("FCO_GEMV_AR_LL", ll ? "1" : "0"); /* LL forced: by default not on local from
                                                    * M 9 (test_gemv_allreduce: auto_rule) */
    static const size_t m16[] = {1, 5, 16, 9};
    static const size_t n16[] = {1000, 8192, 15, 100};
    for (int i = 0; i < 4; i++, k++) {
      const size_t N = n16[i];
      const int off_vec = i == 3 && ll;
      const size_t kt = N == 8192 ? gemv_vec_kt_le(w->n, GEMV_MAX_NK / 8192)
                        : off_vec ? 4095
                                  : gemv_vec_kt_le(w->n, GEMV_MAX_KT);
      const int impl = i == 2 ? 2 : 1;
      gemv_one_call(w, b, m16[i], N, kt, k % 2 ? FCO_F16 : FCO_BF16, (int)(k % 3 == 0), impl);
      if (ll && w->n > 1 && impl == 1) { /* the LL kernels */
        expect_plan_has(w, "grouped", 0);
        continue;
      }
      expect_tile(w, off_vec ? "grouped mma.sync" : "grouped wgmma tma");
      if (impl == 2) expect_twophase(w, N);
      if (!off_vec && N <= 1000) expect_cluster(w);
    }
  }
  t_knob_reset("FCO_GEMV_AR_LL");
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  /* N 8192, M 64 on one rank a GPU (P = 1 here): groups of 8 in 64 cluster pairs tie unsplit
   * groups of 4 at 128 streaming blocks on H200 — the tie goes to the pairs (", pairs"); the
   * rule, whatever the GPU, checked by expect_tma_groups */
  gemv_one_call(w, b, 64, 8192, gemv_vec_kt_le(w->n, GEMV_MAX_NK / 8192), FCO_BF16, 0, 1);
  expect_tma_groups(w);
  twophase_group_tests(w, b);
  rounds_tests(w, b);
}

static void group_world(const t_world_t* w, gemv_bufs_t* b, void* arg) {
  (void)arg;
  group_tests(w, b);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  if (!t_is_gpu(t)) {
    printf("SKIP: the grouped tiles are GPU kernels (transport %s has none)\n",
           fco_transport_name(t));
    return 77;
  }
  int max = t_test_max_ranks(t);
  gemv_each_world(t, max, group_world, NULL);
  return t_pass(t, max, t_test_rank_cap());
}
#else
int main(void) {
  printf("SKIP: built without CUDA: the grouped tiles are GPU kernels\n");
  return 77;
}
#endif
