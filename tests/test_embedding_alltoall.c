/*
 * test_embedding_alltoall.c — fco_embedding_alltoall equals the pooled lookup + all_to_all_single
 * + permute it replaces; the operator's semantics (bad data and bad arguments:
 * test_embedding_alltoall_bad.c; the fixture both share: tests/common/ea_fixture.h).
 *   P = 1..4 ranks with uneven tables per rank (some ranks own none) and uneven batch splits
 *   (some ranks own no sample), D ∈ {1, 3, 64, 130}, f32 / f16 / bf16, int32 and int64 indices,
 *   with and without per-sample weights, sum and mean, ragged bags (empty ones included; long
 *   ones among them, and tables of equal bags beside ragged ones: long_bags), impl 0,
 *   1 and AUTO; the kernels' paths at their edges (the lean kernels, the previous kernels'
 *   streaming lookup, weights and out off 16-byte alignment), the launch knobs' non-default
 *   settings (knobs), ragged shapes on both forms of the fused kernel (decode_edges); then calls
 *   issued back to back on one world (fresh shapes and inputs each; also in the lean fused
 *   kernel's two tile orders), outs in symmetric buffers (fco_mem_alloc) and a CUDA-graph replay
 *   (local transport). On cpu the knobs change nothing: the same calls on small shapes. First,
 *   on every transport, AUTO's rule as a host function (auto_rule_host).
 *   make test   or   build/tests/test_embedding_alltoall   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 runs fewer combinations.
 *
 * Exactness: table values are small integers and weights multiples of 1/2, so every bag sum is
 * exact in fp32 and the one rounding to the dtype is the same everywhere: outputs are compared
 * bit for bit with a reference computed on the host (ea_prob_check: fp32, bag order, fmaf for
 * weights, one division for mean). A second pass uses random real values and compares with a float64 reference by
 * relative error (f32 1e-5, f16 2e-3, bf16 1e-2).
 */
#include <stdlib.h>
#include <string.h>

#include "ea_fixture.h"

#include "../src/core/internal.h"
#include "../src/ops/embedding_alltoall.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static const int kImpls[] = {0, 1, FCO_IMPL_AUTO};
static const int64_t kDims[] = {1, 3, 64, 130};
static const fco_dtype_t kDtypes[] = {FCO_F32, FCO_F16, FCO_BF16};

static void shape_call(const t_world_t* w, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                       int weighted, fco_emb_pooling_t pool, int real, int impl, int64_t bmax,
                       const int32_t* tpr, const int64_t* bpr, const char* what) {
  ea_prob_t p;
  uint64_t seed = t_next_seed();
  ea_prob_make_shape(&p, w->n, D, dt, it, weighted, pool, real, seed, bmax, tpr, bpr);
  ea_describe(&p, impl, seed, what ? what : bmax ? "sweep (big)" : "sweep");
  ea_run_checked(w, &p, impl);
  /* cpu: AUTO runs impl 1 at every P, one rank too (src/ops/embedding_alltoall.c: GPUs differ) */
  if (impl == FCO_IMPL_AUTO && w->transport == FCO_TRANSPORT_CPU)
    for (int r = 0; r < w->n; r++)
      ASSERT_STR_EQ(fco_last_plan(w->comms[r]), "embedding_alltoall impl 1");
  ea_prob_free(w, &p);
}
static void one_call(const t_world_t* w, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                     int weighted, fco_emb_pooling_t pool, int real, int impl, int64_t bmax) {
  shape_call(w, D, dt, it, weighted, pool, real, impl, bmax, NULL, NULL, NULL);
}

/* (index type, weights, pooling) combinations, pairwise covering all of them. */
static const struct {
  fco_emb_index_t it;
  int weighted;
  fco_emb_pooling_t pool;
} kCombos[] = {{FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM},
               {FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_SUM},
               {FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_MEAN},
               {FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_MEAN}};

/* Long bags among short and empty ones (ea_long_bags: one bag in 8 of up to n rows): the lean
 * warp tile splits a ragged tile's rows evenly over its lane groups, so a bag may start in one
 * group's share, cross whole shares of others and end in a fourth — summed in parts, the parts
 * joined by a segmented scan over the groups (embedding_alltoall_lean.cuh). At the lane-group counts' ends:
 * 32 groups of one lane (f16 D = 8: five scan rounds), 4 groups of 8 lanes (bf16 D = 64), a group
 * with an idle lane (bf16 D = 24), one group a warp (f32 D = 128: no scan); the smallest and the
 * largest tiles (FCO_EA_LEAN_CHUNKS), both tile orders of the fused kernel and of impl 0's
 * lookup (FCO_EA_LOOKUP_DYN: claimed by default, static), tiles of several
 * tables (FCO_EA_LEAN_TABLES), and random real values against float64; then tiles of equal bags
 * (ea_even_len) beside ragged ones. bbig: b_s (0: small). */
static void long_bags(const t_world_t* w, int64_t bbig) {
  static const struct {
    int64_t D, n;
    fco_dtype_t dt;
    const char *knob, *value; /* a lean knob set for the pair of calls, or NULL */
    int real;
  } kRuns[] = {{64, 300, FCO_BF16, NULL, NULL, 0},
               {8, 200, FCO_F16, NULL, NULL, 0},
               {24, 100, FCO_BF16, NULL, NULL, 0},
               {128, 300, FCO_F32, NULL, NULL, 0},
               {64, 300, FCO_BF16, "FCO_EA_LEAN_CHUNKS", "1", 0},
               {16, 400, FCO_BF16, "FCO_EA_LEAN_CHUNKS", "64", 0},
               {64, 120, FCO_BF16, "FCO_EA_LEAN_DYN", "0", 0},
               {64, 300, FCO_BF16, "FCO_EA_LOOKUP_DYN", "0", 0},
               {16, 120, FCO_BF16, "FCO_EA_LEAN_TABLES", "4", 0},
               {64, 300, FCO_BF16, NULL, NULL, 1},
               {32, 300, FCO_F32, NULL, NULL, 1}};
  for (size_t k = 0; k < sizeof kRuns / sizeof kRuns[0]; k++) {
    char what[96];
    snprintf(what, sizeof what, "long bags (up to %lld rows%s%s%s%s)", (long long)kRuns[k].n,
             kRuns[k].knob ? ", " : "", kRuns[k].knob ? kRuns[k].knob : "", kRuns[k].knob ? "=" : "",
             kRuns[k].knob ? kRuns[k].value : "");
    if (kRuns[k].knob) t_knob_set(kRuns[k].knob, kRuns[k].value);
    ea_long_bags = kRuns[k].n;
    for (int ii = 0; ii < 2; ii++)
      shape_call(w, kRuns[k].D, kRuns[k].dt, kCombos[(k + ii) % 4].it, kCombos[(k + ii) % 4].weighted,
                 kCombos[(k + ii) % 4].pool, kRuns[k].real, kImpls[ii], bbig, NULL, NULL, what);
    ea_long_bags = 0;
    if (kRuns[k].knob) t_knob_reset(kRuns[k].knob);
  }
  /* Tiles of equal bags take the other path (group rq the bags [rq · W / RWq, +W / RWq), chunks
   * inside one bag summed unrolled): the even-numbered tables' bags all of one length (a multiple
   * of the 4-row chunk, not one, none), the odd ones' ragged in the same call. */
  static const struct {
    int64_t D, len;
    fco_dtype_t dt;
  } kEven[] = {{64, 8, FCO_BF16}, {8, 5, FCO_F16}, {128, 33, FCO_F32}, {24, 0, FCO_BF16}, {64, 1, FCO_BF16}};
  for (size_t k = 0; k < sizeof kEven / sizeof kEven[0]; k++) {
    char what[64];
    snprintf(what, sizeof what, "even bags (%lld rows) beside ragged ones", (long long)kEven[k].len);
    ea_even_len = kEven[k].len;
    for (int ii = 0; ii < 2; ii++)
      shape_call(w, kEven[k].D, kEven[k].dt, kCombos[(k + ii) % 4].it, kCombos[(k + ii) % 4].weighted,
                 kCombos[(k + ii) % 4].pool, 0, kImpls[ii], bbig, NULL, NULL, what);
    ea_even_len = -1;
  }
}

static void sweep(const t_world_t* w, int quick) {
  for (int di = 0; di < 4; di++)
    for (int ti = 0; ti < 3; ti++)
      for (int ii = 0; ii < 3; ii++)
        for (int c = 0; c < 4; c++) {
          if (quick && (c + di + ti + ii) % 2) continue;
          one_call(w, kDims[di], kDtypes[ti], kCombos[c].it, kCombos[c].weighted,
                   kCombos[c].pool, 0, kImpls[ii], 0);
        }
  /* The lean kernels (the default where rows are whole 16-byte units of ≤ 512 bytes: impl 0's
   * lookup, impl 1's ea_kernel_fused_lean) and the previous kernels' streaming lookup
   * (FCO_EA_LEAN=0 FCO_EA_STREAM=1: pool_tile_stream in both impls), at their lane groups'
   * edges: one lane a row (f16 D = 8), a group with an idle lane (bf16 D = 24: 3 units, 4 lanes),
   * 512-byte rows (f32 D = 128, one group a warp); and on GPUs a big problem (many warp tiles). */
  const int64_t bbig = t_is_gpu(w->transport) ? 12288 / w->n : 0;
  for (int sv = 0; sv < 2; sv++) {
    if (sv) {
      t_knob_set("FCO_EA_LEAN", "0");
      t_knob_set("FCO_EA_STREAM", "1");
    }
    for (int ii = 0; ii < 2; ii++) {
      t_context(sv ? "FCO_EA_LEAN=0 FCO_EA_STREAM=1" : "lean (default)");
      one_call(w, 8, FCO_F16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, kImpls[ii], 0);
      one_call(w, 24, FCO_BF16, FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_MEAN, 0, kImpls[ii], 0);
      one_call(w, 128, FCO_F32, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_MEAN, 0, kImpls[ii], 0);
      if (bbig) one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_SUM, 0, kImpls[ii], bbig);
    }
  }
  t_knob_reset("FCO_EA_LEAN");
  t_knob_reset("FCO_EA_STREAM");
  long_bags(w, bbig);
  /* Weights and out off 16-byte alignment (by one element): on rank 0 only (the fused lean
   * kernel pools that rank by lean_tile_any, the others by lean_tile, one protocol), then on every
   * rank; impl 0 takes the previous lookup's element path there. */
  for (int ii = 0; ii < 2; ii++) {
    ea_shift_rank = 0;
    ea_shift_bytes = 2;
    one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_MEAN, 0, kImpls[ii], bbig);
    ea_shift_rank = -1;
    ea_shift_bytes = 4;
    one_call(w, 32, FCO_F32, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, kImpls[ii], 0);
    ea_shift_bytes = 0;
  }
  /* Warp tiles of several tables (FCO_EA_LEAN_TABLES) with rank 0's pointers off alignment: its
   * tiles pooled table by table by lean_tile_any, the others' by the multi-table lean_tile. */
  t_knob_set("FCO_EA_LEAN_TABLES", "4");
  ea_shift_rank = 0;
  ea_shift_bytes = 2;
  one_call(w, 16, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_MEAN, 0, 1, bbig);
  ea_shift_bytes = 0;
  ea_shift_rank = -1;
  t_knob_reset("FCO_EA_LEAN_TABLES");
  /* The fused lean kernel compiled for 4 blocks a SM (by default: static order, or long bags). */
  t_knob_set("FCO_EA_LEAN_BLOCKS", "4");
  one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, 1, bbig);
  one_call(w, 16, FCO_F32, FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_MEAN, 0, 1, 0);
  t_knob_reset("FCO_EA_LEAN_BLOCKS");
  /* Random real values against float64, by relative error. */
  for (int ti = 0; ti < 3; ti++)
    for (int ii = 0; ii < 2; ii++)
      one_call(w, 64, kDtypes[ti], FCO_EMB_INDEX_I64, ti != 1, ti == 2 ? FCO_EMB_POOL_MEAN : FCO_EMB_POOL_SUM,
               1, kImpls[ii], 0);
}

/* The fused kernel's launch knobs (read at every launch, src/cuda/embedding_alltoall.cu): every
 * non-default setting must give the same exact result (only the default runs in the sweep).
 * FCO_EA_MIX reorders each block's pool tiles: on GPUs it runs on big problems, where blocks
 * have several remote and local tiles to interleave (and signal batches that span local tiles):
 * rows of ≥ 500 B (32 bags a tile) and b_s up to 24576/P (nccl: a rank per GPU, 264 blocks on
 * an H200) or 12288/P (local: 264/P blocks per virtual rank), T_r ∈ [2, 3], give about 5.5
 * (P = 2) to 11 (P = 4, local) pool tiles per block. The 16-byte path with kB = 4 (f32 D = 128,
 * bf16 D = 256) and the element path with kNV = 4 (f32 D = 125). */
static void knobs(const t_world_t* w) {
  static const struct {
    const char *name, *value, *name2, *value2; /* name2: a second knob set with it, or NULL */
    int64_t D;                                 /* 0: 64 or 3 on a small problem; else big */
    fco_dtype_t dt;
    const char* plan; /* on GPU transports, in every rank's fco_last_plan (or NULL) */
  } kKnobs[] = {
      /* the lean fused kernel (the others run with FCO_EA_LEAN=0: the previous kernels' knobs) */
      {"FCO_EA_LEAN", "1", "FCO_EA_LAND_KB", "4", 64, FCO_BF16, NULL},
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_BLOCKS", "4", 128, FCO_F32, NULL},
      /* 4 blocks a SM, aligned one-rank calls: the kernels specialized to the index type (kIdx),
       * both orders; consecutive entries take int32 and int64 indices (kCombos) */
      {"FCO_EA_LEAN_BLOCKS", "4", NULL, NULL, 64, FCO_BF16, NULL},
      {"FCO_EA_LEAN_BLOCKS", "4", NULL, NULL, 64, FCO_BF16, NULL},
      {"FCO_EA_LEAN_BLOCKS", "4", "FCO_EA_LEAN_DYN", "0", 64, FCO_BF16, NULL},
      {"FCO_EA_LEAN_BLOCKS", "4", "FCO_EA_LEAN_DYN", "0", 64, FCO_BF16, NULL},
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_MIX", "100", 64, FCO_BF16, "fused lean static mix=100"},
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_MIX", "37", 128, FCO_F32, "fused lean static mix=37"},
      /* the tile-size rule at its ends (FCO_EA_LEAN_CHUNKS): the smallest tiles, and the largest
       * (up to FCO_EA_LEAN_MAX_TILE_BAGS bags, the most staged offsets), both orders */
      {"FCO_EA_LEAN_CHUNKS", "1", NULL, NULL, 64, FCO_BF16, NULL},
      {"FCO_EA_LEAN_CHUNKS", "64", NULL, NULL, 128, FCO_F32, NULL},
      {"FCO_EA_LEAN_CHUNKS", "64", "FCO_EA_LEAN_DYN", "0", 16, FCO_BF16, NULL},
      /* impl 0's lookup in either order whatever the bags' mean length (the default claims
       * where it is ≥ 8 rows), on the smallest tiles: the most claims a launch */
      {"FCO_EA_LEAN_CHUNKS", "1", "FCO_EA_LOOKUP_DYN", "0", 64, FCO_BF16, NULL},
      {"FCO_EA_LEAN_CHUNKS", "1", "FCO_EA_LOOKUP_DYN", "1", 64, FCO_BF16, NULL},
      /* warp tiles of several tables (experimental): 32-byte rows (16 lane groups a warp) and
       * 256-byte rows (2 groups: nt ≤ 2) */
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_TABLES", "4", 16, FCO_BF16, NULL},
      {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_TABLES", "2", 64, FCO_F32, NULL},
      /* claimed tiles (kernel variant kDyn; the default unless FCO_EA_LEAN_MIX is set — until
       * session 12 only where bags held ≤ 16 rows on average): calls in a row, so the queues'
       * counters carry older epochs (the first claims lift them); remote first on half the SMs,
       * on none, on all; its timeline variant; the static order (FCO_EA_LEAN_DYN=0) and its
       * timeline variant */
      {"FCO_EA_LEAN_DYN", "1", "FCO_EA_LEAN_SPLIT", "50", 64, FCO_BF16,
       "fused lean claimed split=50"},
      {"FCO_EA_LEAN_DYN", "1", "FCO_EA_LEAN_SPLIT", "0", 128, FCO_F32, NULL},
      {"FCO_EA_LEAN_DYN", "1", "FCO_EA_LEAN_SPLIT", "100", 16, FCO_BF16, NULL},
      {"FCO_EA_LEAN_DYN", "1", "FCO_EA_PROFILE", "1", 64, FCO_BF16, NULL},
      {"FCO_EA_LEAN_DYN", "0", NULL, NULL, 64, FCO_BF16, "fused lean static"},
      {"FCO_EA_LEAN_DYN", "0", "FCO_EA_PROFILE", "1", 128, FCO_F32, NULL},
      /* the timeline variants (stamps to stderr) must pool as the kernels without them */
      {"FCO_EA_LEAN", "1", "FCO_EA_PROFILE", "1", 64, FCO_BF16, NULL},
      {"FCO_EA_PROFILE", "1", NULL, NULL, 128, FCO_F32, NULL},
      {"FCO_EA_LAND_POLL", "1", NULL, NULL, 0, FCO_BF16, NULL},
      {"FCO_EA_SIGNAL_EVERY", "1", NULL, NULL, 0, FCO_BF16, NULL},
      {"FCO_EA_SIGNAL_EVERY", "16", NULL, NULL, 0, FCO_F32, NULL},
      {"FCO_EA_LAND_KB", "4", NULL, NULL, 0, FCO_BF16, NULL},
      /* the kB paths (16-byte rows take the streaming path unless FCO_EA_STREAM=0) */
      {"FCO_EA_BAGS", "1", "FCO_EA_STREAM", "0", 0, FCO_BF16, NULL},
      {"FCO_EA_BAGS", "4", "FCO_EA_STREAM", "0", 0, FCO_F32, NULL},
      {"FCO_EA_STREAM", "0", NULL, NULL, 128, FCO_F32, NULL},
      {"FCO_EA_STREAM", "0", "FCO_EA_DECODE", "cursor", 64, FCO_BF16, NULL},
      {"FCO_EA_STREAM", "1", NULL, NULL, 256, FCO_BF16, NULL},
      {"FCO_EA_STREAM", "1", "FCO_EA_MIX", "100", 32, FCO_F32, NULL},
      /* rows > 256 B run the old kernel by default: the cursor kernel asked for by name */
      {"FCO_EA_MIX", "100", "FCO_EA_DECODE", "cursor", 128, FCO_F32, NULL},
      {"FCO_EA_MIX", "37", NULL, NULL, 125, FCO_F32, NULL},
      {"FCO_EA_MIX", "0", "FCO_EA_DECODE", "1", 256, FCO_BF16, NULL},
      {"FCO_EA_MIX", "100", "FCO_EA_LAND_POLL", "1", 125, FCO_F32, NULL},
      {"FCO_EA_DECODE", "old", NULL, NULL, 128, FCO_F32, NULL},
      {"FCO_EA_DECODE", "old", NULL, NULL, 256, FCO_BF16, NULL},
      {"FCO_EA_DECODE", "old", "FCO_EA_MIX", "100", 125, FCO_F32, NULL}};
  const int64_t bmax =
      t_is_gpu(w->transport) ? (w->transport == FCO_TRANSPORT_LOCAL ? 12288 : 24576) / w->n : 0;
  for (size_t k = 0; k < sizeof kKnobs / sizeof kKnobs[0]; k++) {
    /* FCO_EA_LEAN_* knobs are the lean kernel's: it runs; the others are the previous kernels' */
    t_knob_set("FCO_EA_LEAN", strncmp(kKnobs[k].name, "FCO_EA_LEAN_", 12) == 0 ? "1" : "0");
    const int64_t D = kKnobs[k].D > 0 ? kKnobs[k].D : k % 2 ? 64 : 3;
    const int64_t b = kKnobs[k].D > 0 ? bmax : 0;
    t_context("knob %s=%s%s%s%s%s", kKnobs[k].name, kKnobs[k].value, kKnobs[k].name2 ? " " : "",
              kKnobs[k].name2 ? kKnobs[k].name2 : "", kKnobs[k].name2 ? "=" : "",
              kKnobs[k].name2 ? kKnobs[k].value2 : "");
    t_knob_set(kKnobs[k].name, kKnobs[k].value);
    if (kKnobs[k].name2) t_knob_set(kKnobs[k].name2, kKnobs[k].value2);
    one_call(w, D, kKnobs[k].dt, kCombos[k % 4].it, kCombos[k % 4].weighted, kCombos[k % 4].pool,
             0, 1, b);
    if (kKnobs[k].plan && t_is_gpu(w->transport))
      for (int r = 0; r < w->n; r++)
        if (!strstr(fco_last_plan(w->comms[r]), kKnobs[k].plan))
          t_fail(__FILE__, __LINE__, "rank %d's plan \"%s\" lacks \"%s\"", r,
                 fco_last_plan(w->comms[r]), kKnobs[k].plan);
    t_knob_reset(kKnobs[k].name);
    if (kKnobs[k].name2) t_knob_reset(kKnobs[k].name2);
  }
  t_knob_reset("FCO_EA_LEAN");
}

/* The knobs are read when the call is made (src/ops/embedding_alltoall.c, read_knobs), not when
 * the group launches it: every rank's call with FCO_EA_LEAN_MIX=37, then FCO_EA_LEAN_MIX=0 and
 * FCO_EA_LEAN_DYN=1 before fco_group_end — every rank's plan names the static order with
 * mix=37 and the result is checked (until session 53 the launch read the environment again:
 * the claimed order ran). GPU transports (the cpu backend has no launch knobs). */
static void knobs_at_call(const t_world_t* w) {
  if (!t_is_gpu(w->transport)) return;
  ea_prob_t p;
  const uint64_t seed = t_next_seed();
  ea_prob_make(&p, w->n, 64, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, seed);
  ea_describe(&p, 1, seed, "knobs read at the call, changed before fco_group_end");
  ea_prob_upload(w, &p);
  t_knob_set("FCO_EA_LEAN", "1");
  t_knob_set("FCO_EA_LEAN_MIX", "37");
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++) ASSERT_OK(ea_prob_run_rank(w, &p, r, 1, NULL));
  t_knob_set("FCO_EA_LEAN_MIX", "0");
  t_knob_set("FCO_EA_LEAN_DYN", "1");
  ASSERT_OK(fco_group_end());
  t_knob_reset("FCO_EA_LEAN_DYN");
  t_knob_reset("FCO_EA_LEAN_MIX");
  t_knob_reset("FCO_EA_LEAN");
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(ea_prob_check(w, &p), 0);
  for (int r = 0; r < w->n; r++)
    if (!strstr(fco_last_plan(w->comms[r]), "fused lean static mix=37"))
      t_fail(__FILE__, __LINE__, "rank %d's plan \"%s\" lacks \"fused lean static mix=37\"", r,
             fco_last_plan(w->comms[r]));
  ea_prob_free(w, &p);
}

/* The default tile order of both lean kernels (fco_ea_few_tiles, src/ops/embedding_alltoall_plan.h):
 * static where a launch has no more tiles than warps, claimed where it has more and (impl 0's
 * lookup) bags hold ≥ 8 rows on average — even tables' bags of 16 rows beside random ones of 0..6.
 * Small: T_r = 2, b_s = 16 (at most 2 · 4P tiles of 4 bf16 D = 64 bags a rank); big: b_s ∈
 * [12288, 24576] / P (at least 2 · 3072 tiles a rank, the warps 3168 on 132 SMs). FCO_EA_LEAN_DYN=1
 * and FCO_EA_LOOKUP_DYN=1 force the claimed order on the small one (no claims in the lookup,
 * whose warps take their first tile by number: fco_ea_lookup_next). Exact results each time;
 * the plans on GPU transports. */
static void tile_orders(const t_world_t* w) {
  if (!t_is_gpu(w->transport)) return; /* cpu: no tile orders (the sweep covers its results) */
  int32_t tpr[EA_MAX_P];
  int64_t bpr[EA_MAX_P];
  static const struct {
    int big;
    const char *knob, *knob2; /* set to 1, or NULL */
    const char *fused, *lookup; /* in impl 1's and impl 0's plans */
  } kRuns[] = {{0, NULL, NULL, "fused lean static", "lean lookup W="},
               {0, "FCO_EA_LEAN_DYN", "FCO_EA_LOOKUP_DYN", "fused lean claimed", "claimed"},
               {1, NULL, NULL, "fused lean claimed", "claimed"}};
  ea_even_len = 16;
  for (size_t k = 0; k < sizeof kRuns / sizeof kRuns[0]; k++) {
    for (int r = 0; r < w->n; r++) {
      tpr[r] = 2;
      bpr[r] = kRuns[k].big ? ea_rnd_in(12288 / w->n, 24576 / w->n) : 16;
    }
    if (kRuns[k].knob) {
      t_knob_set(kRuns[k].knob, "1");
      t_knob_set(kRuns[k].knob2, "1");
    }
    for (int impl = 1; impl >= 0; impl--) {
      char what[96];
      snprintf(what, sizeof what, "tile order (%s%s)", kRuns[k].big ? "big" : "small",
               kRuns[k].knob ? ", claimed forced" : "");
      shape_call(w, 64, FCO_BF16, kCombos[k % 4].it, kCombos[k % 4].weighted, kCombos[k % 4].pool, 0,
                 impl, 0, tpr, bpr, what);
      const char* want = impl ? kRuns[k].fused : kRuns[k].lookup;
      for (int r = 0; r < w->n; r++) {
        const char* plan = fco_last_plan(w->comms[r]);
        if (!strstr(plan, want))
          t_fail(__FILE__, __LINE__, "%s impl %d: rank %d's plan \"%s\" lacks \"%s\"", what, impl, r,
                 plan, want);
        if (impl == 0 && !kRuns[k].big && !kRuns[k].knob && strstr(plan, "claimed"))
          t_fail(__FILE__, __LINE__, "%s: rank %d's lookup claims (plan \"%s\")", what, r, plan);
      }
    }
    if (kRuns[k].knob) {
      t_knob_reset(kRuns[k].knob);
      t_knob_reset(kRuns[k].knob2);
    }
  }
  ea_even_len = -1;
}

/* The fused kernel's two forms, ea_kernel_fused32 (the default: the 32-bit tile cursor) and
 * ea_kernel_fused (FCO_EA_DECODE=old; also the launcher's fallback beyond the cursor's 32-bit
 * bounds), on ragged shapes, exact: a rank without tables (no pool tiles, lands only), a
 * destination without samples (a position of zero chunks the cursor steps over), T_r = 5 (f32 D =
 * 128: one table a tile, so a block's step bpr = bq · 5 + br carries in tg; bf16 D = 64: 4 tables
 * a tile, the last group of 1), and on GPUs b_s up to 24576/P (nccl) or 12288/P (local) so blocks
 * step across destinations. Both kernels, and kMix with the cursor. On cpu the knob does nothing:
 * small shapes. */
static void decode_edges(const t_world_t* w) {
  const int P = w->n;
  const int64_t bmax =
      t_is_gpu(w->transport) ? (w->transport == FCO_TRANSPORT_LOCAL ? 12288 : 24576) / P : 6;
  int32_t tpr[EA_MAX_P];
  int64_t bpr[EA_MAX_P];
  for (int r = 0; r < P; r++) {
    tpr[r] = r == 0 && P > 1 ? 0 : r % 2 ? 1 : 5;
    bpr[r] = r == 1 ? 0 : bmax - 7 * r > 1 ? bmax - 7 * r : 1;
  }
  if (P == 2) bpr[0] += bmax / 3; /* unequal: rank 1 has none */
  static const struct {
    const char *name, *value, *name2, *value2;
    int64_t D;
    fco_dtype_t dt;
  } kRuns[] = {{"FCO_EA_LEAN", "1", NULL, NULL, 128, FCO_F32}, /* the lean kernel: ragged too */
               {"FCO_EA_LEAN", "1", NULL, NULL, 64, FCO_BF16},
               {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_MIX", "50", 64, FCO_BF16},
               {"FCO_EA_LEAN", "1", "FCO_EA_LEAN_TABLES", "4", 16, FCO_BF16}, /* 5 tables: 4 + 1 */
               {"FCO_EA_LEAN_DYN", "1", "FCO_EA_LEAN_SPLIT", "50", 64, FCO_BF16},
               {"FCO_EA_LEAN_DYN", "0", NULL, NULL, 64, FCO_BF16},
               {"FCO_EA_DECODE", "cursor", NULL, NULL, 128, FCO_F32}, /* > 256 B: not default */
               {NULL, NULL, NULL, NULL, 64, FCO_BF16},
               {NULL, NULL, NULL, NULL, 3, FCO_F32},
               {"FCO_EA_MIX", "100", "FCO_EA_DECODE", "cursor", 128, FCO_F32},
               {"FCO_EA_MIX", "50", NULL, NULL, 64, FCO_BF16},
               {"FCO_EA_DECODE", "old", NULL, NULL, 128, FCO_F32},
               {"FCO_EA_DECODE", "old", NULL, NULL, 64, FCO_BF16},
               {"FCO_EA_DECODE", "old", "FCO_EA_MIX", "50", 3, FCO_F32}};
  for (size_t k = 0; k < sizeof kRuns / sizeof kRuns[0]; k++) {
    char what[128];
    snprintf(what, sizeof what, "decode edges (%s%s%s%s%s%s)",
             kRuns[k].name ? kRuns[k].name : "default", kRuns[k].name ? "=" : "",
             kRuns[k].value ? kRuns[k].value : "", kRuns[k].name2 ? " " : "",
             kRuns[k].name2 ? kRuns[k].name2 : "", kRuns[k].name2 ? "=" : "");
    if (kRuns[k].name2) strncat(what, kRuns[k].value2, sizeof what - strlen(what) - 1);
    /* the previous kernels, unless the run names the lean one or one of its knobs */
    t_knob_set("FCO_EA_LEAN", kRuns[k].name && strncmp(kRuns[k].name, "FCO_EA_LEAN_", 12) == 0 ? "1" : "0");
    if (kRuns[k].name) t_knob_set(kRuns[k].name, kRuns[k].value);
    if (kRuns[k].name2) t_knob_set(kRuns[k].name2, kRuns[k].value2);
    shape_call(w, kRuns[k].D, kRuns[k].dt, kCombos[k % 4].it, kCombos[k % 4].weighted,
               kCombos[k % 4].pool, 0, 1, bmax, tpr, bpr, what);
    if (kRuns[k].name) t_knob_reset(kRuns[k].name);
    if (kRuns[k].name2) t_knob_reset(kRuns[k].name2);
  }
  t_knob_reset("FCO_EA_LEAN");
}

/* K calls issued back to back (no synchronisation between), each with its own shape, inputs and
 * outputs, then every output checked: epochs, workspace halves, growth between calls. */
static void back_to_back(const t_world_t* w) {
  enum { K = 8 };
  ea_prob_t p[K];
  uint64_t seeds[K];
  for (int k = 0; k < K; k++) {
    seeds[k] = t_next_seed();
    ea_prob_make(&p[k], w->n, kDims[k % 4], kDtypes[k % 3], kCombos[k % 4].it,
              kCombos[k % 4].weighted, kCombos[k % 4].pool, 0, seeds[k]);
    ea_prob_upload(w, &p[k]);
  }
  /* Reserve the largest need first so no growth (a device sync) separates the calls. */
  size_t need = 0;
  for (int k = 0; k < K; k++)
    for (int i = 0; i < 2; i++) {
      size_t b = 0;
      ASSERT_OK(fco_embedding_alltoall_workspace(w->comms[0], p[k].tpr, p[k].bpr, p[k].D, p[k].dt,
                                                 i, &b));
      if (b > need) need = b;
    }
  ASSERT_OK(fco_comm_reserve(w->comms[0], need)); /* a world reserves for all its ranks */
  for (int k = 0; k < K; k++) {
    ea_describe(&p[k], k % 2, seeds[k], "back to back");
    ASSERT_OK(ea_prob_run(w, &p[k], k % 2, NULL));
  }
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  for (int k = 0; k < K; k++) {
    ea_describe(&p[k], k % 2, seeds[k], "back to back (check)");
    ASSERT_EQ(ea_prob_check(w, &p[k]), 0);
    ea_prob_free(w, &p[k]);
  }
}

/* Outputs in symmetric buffers (fco_mem_alloc): every rank's, rank 0's only, every rank's but
 * rank 0's — peers store straight into a symmetric out and stage for the others, in one call —
 * on the fused lean kernel's both tile orders (short bags: claimed; long: static), 32- and
 * 128-byte rows, unaligned outs (the generic kernel), impl 0 and AUTO, the previous fused kernel
 * (rows of 130 f32 and FCO_EA_LEAN=0: staging whatever the out), FCO_EA_DIRECT=0; then calls back
 * to back with every out symmetric. */
static void sym_outputs(const t_world_t* w) {
  const unsigned all = (1u << w->n) - 1, masks[3] = {all, 1u, all & ~1u};
  /* ragged splits for up to EA_MAX_P ranks (a world reads its first w->n entries) */
  static const int32_t tpr_r[EA_MAX_P] = {2, 1, 3, 2, 0, 1, 2, 3};
  static const int64_t bpr_r[EA_MAX_P] = {37, 64, 5, 90, 11, 0, 23, 48};
  for (int m = 0; m < 3; m++) {
    if (!masks[m] || (m > 0 && masks[m] == all)) continue;
    ea_sym_mask = masks[m];
    for (int i = 0; i < 3; i++) {
      one_call(w, 64, FCO_BF16, kCombos[i].it, kCombos[i].weighted, kCombos[i].pool, 0, kImpls[i], 0);
      one_call(w, 16, FCO_F32, kCombos[i + 1].it, kCombos[i + 1].weighted, kCombos[i + 1].pool, 0,
               1, 40);
    }
    shape_call(w, 32, FCO_BF16, FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_SUM, 0, 1, 0, tpr_r, bpr_r,
               "symmetric outs, ragged");
    t_knob_set("FCO_EA_LEAN_DYN", "0"); /* the static order */
    one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, 1, 40);
    t_knob_reset("FCO_EA_LEAN_DYN");
    one_call(w, 130, FCO_F32, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_MEAN, 0, 1, 0); /* not lean */
  }
  ea_sym_mask = all;
  ea_shift_bytes = 4; /* unaligned outs and weights on every rank: the generic fused kernel */
  one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_SUM, 0, 1, 0);
  ea_shift_bytes = 0;
  t_knob_set("FCO_EA_LEAN", "0");
  one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I64, 1, FCO_EMB_POOL_SUM, 0, 1, 0);
  t_knob_reset("FCO_EA_LEAN");
  t_knob_set("FCO_EA_DIRECT", "0");
  one_call(w, 64, FCO_BF16, FCO_EMB_INDEX_I32, 0, FCO_EMB_POOL_MEAN, 0, 1, 0);
  t_knob_reset("FCO_EA_DIRECT");
  back_to_back(w);
  ea_sym_mask = 0;
}

#ifdef FCO_HAVE_CUDA
/* Local transport: capture impl 1 and impl 0 into one CUDA graph, replay it with fresh table
 * values each time (the epoch is re-read by every replay). */
static void graph_replay(const t_world_t* w) {
  ea_prob_t p;
  uint64_t seed = t_next_seed();
  ea_prob_make(&p, w->n, 64, FCO_BF16, FCO_EMB_INDEX_I32, 1, FCO_EMB_POOL_SUM, 0, seed);
  ea_describe(&p, 1, seed, "CUDA graph");
  ea_prob_upload(w, &p);
  size_t need = 0, b;
  for (int i = 0; i < 2; i++) {
    ASSERT_OK(fco_embedding_alltoall_workspace(w->comms[0], p.tpr, p.bpr, p.D, p.dt, i, &b));
    if (b > need) need = b;
  }
  ASSERT_OK(fco_comm_reserve(w->comms[0], need));
  cudaStream_t s;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r1 = ea_prob_run(w, &p, 1, s), r0 = ea_prob_run(w, &p, 0, s);
  cudaGraph_t g = NULL;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_OK(r1);
  ASSERT_OK(r0);
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int rep = 0; rep < 3; rep++) {
    ea_rng = t_next_seed();
    for (int r = 0; r < p.P; r++) {
      for (size_t i = 0; i < (size_t)p.total_rows[r] * (size_t)p.D; i++)
        p.weight[r][i] = ea_round_to(p.dt, (float)ea_rnd_in(-4, 4));
      ea_upload_inputs(w, &p, r);
      ea_poison_out(w, &p, r);
    }
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_EQ(ea_prob_check(w, &p), 0);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  ea_prob_free(w, &p);
}
#endif

/* AUTO's rule (fco_ea_auto_impl) as a host function on made-up communicators, so it runs in CI
 * without a GPU: impl 0 for one rank on nccl and local (the lookup alone, nothing to exchange),
 * the fused impl 1 at P > 1 and on cpu at every P. */
static void auto_rule_host(void) {
  static const fco_transport_t ts[] = {FCO_TRANSPORT_CPU, FCO_TRANSPORT_LOCAL, FCO_TRANSPORT_NCCL};
  struct fco_comm c;
  for (int i = 0; i < 3; i++)
    for (int p = 1; p <= 8; p++) {
      t_context("embedding AUTO rule: %s, P=%d", fco_transport_name(ts[i]), p);
      memset(&c, 0, sizeof c);
      c.transport = ts[i];
      c.nranks = p;
      ASSERT_EQ(fco_ea_auto_impl(&c), (p == 1 && ts[i] != FCO_TRANSPORT_CPU ? 0 : 1));
    }
}

int main(void) {
  t_seed_init();
  auto_rule_host();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = t_quick();
  int max = t_test_max_ranks(t);
  for (int P = 1; P <= max; P++) {
    t_world_t w;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", P);
    ASSERT_OK(t_world_init(&w, t, P, NULL));
    sweep(&w, quick);
    knobs(&w);
    knobs_at_call(&w);
    tile_orders(&w);
    decode_edges(&w);
    back_to_back(&w);
    /* the lean fused kernel's two tile orders back to back (the default is static on these
     * small problems, fewer tiles than warps; claimed, each call's queues start from the
     * previous call's counters) */
    t_knob_set("FCO_EA_LEAN_DYN", "0");
    back_to_back(&w);
    t_knob_set("FCO_EA_LEAN_DYN", "1");
    t_knob_set("FCO_EA_LEAN_SPLIT", "50");
    back_to_back(&w);
    t_knob_reset("FCO_EA_LEAN_DYN");
    t_knob_reset("FCO_EA_LEAN_SPLIT");
    sym_outputs(&w);
#ifdef FCO_HAVE_CUDA
    if (t == FCO_TRANSPORT_LOCAL) graph_replay(&w);
#endif
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", P, t_now_ms() - t0);
    fflush(stdout);
  }
  return t_pass(t, max, t_test_rank_cap());
}
