/*
 * test_ea_plan.c — the lean embedding kernels' work plan (src/ops/embedding_alltoall_plan.h), on
 * the CPU, the same code the GPU kernels run: warp-tile sizes (a power of two, a multiple of the
 * lane groups, bounded — a rank without indices once looped forever on the host, run c09f78d);
 * the order of the tiles (FCO_EA_LEAN_MIX: a bijection, both kinds in their order, every remote
 * tile before w); a whole plan of random worlds (every rank's tiles cover each (destination
 * sample, source table) bag exactly once, and the bags a source sends a destination add up to
 * what the destination's counter waits for, b_d · T_src); land units (their rows partition the
 * output); the claim protocol of the claimed tile order (FCO_EA_LEAN_DYN: threads racing for a
 * queue's indices across calls of skipped and repeated epochs get every index exactly once); the
 * row split of a ragged warp tile (fco_ea_row_share and the lean tile's scan, modelled: every
 * bag stored once with its exact sum); exact values at the rules' edges (a tile's shared
 * memory, the tile size's doubling and halving, w's and the land units' ceilings).
 * Transport-independent: the same checks on every transport.
 *   make test   or   build/tests/test_ea_plan
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../src/ops/embedding_alltoall_plan.h"
#include "test.h"

static uint64_t g_rng;
static uint64_t rnd(void) { return g_rng = t_mix(g_rng); }
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

static void tile_bags(void) {
  static const double kMean[] = {0.0, 0.25, 1.0, 2.0, 8.0, 64.0, 1e6};
  static const int64_t kB[] = {0, 1, 5, 1000, 1000000};
  static const int64_t kWarps[] = {1, 8, 3168, 1 << 20};
  for (int G = 1; G <= 32; G *= 2)
    for (size_t m = 0; m < sizeof kMean / sizeof kMean[0]; m++)
      for (size_t b = 0; b < sizeof kB / sizeof kB[0]; b++)
        for (int T = 1; T <= 9; T += 4)
          for (size_t w = 0; w < sizeof kWarps / sizeof kWarps[0]; w++) {
            t_context("tile_bags G=%d mean=%g B=%lld T=%d warps=%lld", G, kMean[m], (long long)kB[b],
                      T, (long long)kWarps[w]);
            const int W = fco_ea_lean_tile_bags(G, kMean[m], kB[b], T, kWarps[w], 4);
            ASSERT_TRUE(W > 0 && (W & (W - 1)) == 0);
            ASSERT_GE(W, 32 / G);
            ASSERT_LE(W, FCO_EA_LEAN_MAX_TILE_BAGS);
            ASSERT_EQ(W % (32 / G), 0);
            /* long bags, few warps: the smallest tile with 4 chunks a group */
            if (kMean[m] >= 64.0 && kWarps[w] == 1) ASSERT_EQ(W, 32 / G);
            /* more chunks never give a smaller tile */
            const int W16 = fco_ea_lean_tile_bags(G, kMean[m], kB[b], T, kWarps[w], 16);
            ASSERT_GE(W16, W);
            ASSERT_LE(W16, FCO_EA_LEAN_MAX_TILE_BAGS);
          }
  /* the shared memory grows with W and shrinks with G (its weights ring) */
  ASSERT_LT(fco_ea_lean_smem(8, 16), fco_ea_lean_smem(8, 1024));
  /* a deeper ring: 16 bytes a thread and row, 4 bytes a lane group and row more a stage */
  ASSERT_EQ(fco_ea_lean_smem_s(8, 16, 4) - fco_ea_lean_smem_s(8, 16, 3),
            (size_t)FCO_EA_LEAN_ROWS * (FCO_EA_LEAN_THREADS * 16 + FCO_EA_LEAN_THREADS / 8 * 4));
  ASSERT_EQ(fco_ea_lean_smem(8, 16), fco_ea_lean_smem_s(8, 16, FCO_EA_LEAN_STAGES));
  ASSERT_LT(fco_ea_lean_smem(16, 64), fco_ea_lean_smem(1, 64));
}

static void order(void) {
  static const int kMix[] = {0, 1, 37, 50, 99, 100, 250};
  uint32_t* seen = (uint32_t*)malloc(sizeof(uint32_t) * 400);
  for (uint32_t nR = 0; nR <= 70; nR += 1 + nR / 8)
    for (uint32_t nL = 0; nL <= 70; nL += 1 + nL / 8)
      for (size_t m = 0; m < sizeof kMix / sizeof kMix[0]; m++) {
        t_context("order nR=%u nL=%u mix=%d", nR, nL, kMix[m]);
        const uint32_t w = fco_ea_lean_w(nR, nL, kMix[m]), n = nR + nL;
        ASSERT_GE(w, nR);
        ASSERT_LE(w, n);
        if (kMix[m] <= 0 || nR == 0) ASSERT_EQ(w, nR);
        if (kMix[m] >= 100 && nR > 0) ASSERT_EQ(w, n);
        memset(seen, 0, sizeof(uint32_t) * 400);
        uint32_t next_r = 0, next_l = nR;
        for (uint32_t j = 0; j < n; j++) {
          const uint32_t t = fco_ea_lean_order(j, nR, w);
          ASSERT_LT(t, n);
          ASSERT_EQ(seen[t], 0);
          seen[t] = 1;
          if (t < nR) { /* remote: in order, before w */
            ASSERT_EQ(t, next_r);
            next_r++;
            ASSERT_LT(j, w);
          } else {
            ASSERT_EQ(t, next_l);
            next_l++;
          }
          if (w == nR) ASSERT_EQ(t, j);
        }
        ASSERT_EQ(next_r, nR);
        ASSERT_EQ(next_l, n);
      }
  free(seen);
}

/* A random world; every rank's plan through the kernels' functions; each bag of each
 * destination must be pooled exactly once, by its source, and the bags a source sends a
 * destination must add up to b_d · T_src. */
static void plans(void) {
  enum { MAXP = 8 };
  for (int it = 0; it < 300; it++) {
    const int P = (int)rnd_in(1, MAXP);
    int32_t T[MAXP];
    int64_t bstart[MAXP + 1];
    int W[MAXP], nt[MAXP];
    bstart[0] = 0;
    for (int r = 0; r < P; r++) {
      T[r] = (int32_t)rnd_in(0, 9);
      bstart[r + 1] = bstart[r] + (rnd() % 4 == 0 ? 0 : rnd_in(1, 300));
      W[r] = 1 << rnd_in(0, 7);
      nt[r] = 1 << rnd_in(0, 2); /* FCO_EA_LEAN_TABLES: warp tiles of nt tables */
    }
    const int mix = rnd() % 2 ? 0 : (int)rnd_in(1, 100);
    t_context("plan it=%d P=%d mix=%d", it, P, mix);
    const int64_t B = bstart[P];
    int32_t toff[MAXP + 1];
    toff[0] = 0;
    for (int r = 0; r < P; r++) toff[r + 1] = toff[r] + T[r];
    /* cover[d's sample i][global table] */
    unsigned char* cover = (unsigned char*)calloc((size_t)(B > 0 ? B : 1) * (size_t)(toff[P] > 0 ? toff[P] : 1), 1);
    for (int me = 0; me < P; me++) {
      uint32_t tstart[MAXP + 1], tpk[MAXP];
      fco_ea_lean_tiles(P, me, (T[me] + nt[me] - 1) / nt[me], W[me], bstart, tstart, tpk);
      const uint32_t nR = tstart[P - 1], n = tstart[P], w = fco_ea_lean_w(nR, n - nR, mix);
      int64_t sent[MAXP] = {0};
      for (uint32_t j = 0; j < n; j++) {
        int k, t;
        int64_t i0;
        fco_ea_lean_decode(fco_ea_lean_order(j, nR, w), tstart, tpk, W[me], &k, &t, &i0);
        ASSERT_TRUE(k >= 0 && k < P);
        const int d = (me + 1 + k) % P;
        const int64_t bd = bstart[d + 1] - bstart[d];
        /* a group of nt tables, ntab of them present (the kernel's t0 = t · nt) */
        const int t0 = t * nt[me], ntab = T[me] - t0 < nt[me] ? T[me] - t0 : nt[me];
        ASSERT_TRUE(t0 >= 0 && ntab >= 1);
        ASSERT_TRUE(i0 >= 0 && i0 < bd);
        ASSERT_EQ(i0 % W[me], 0);
        const int64_t nb = bd - i0 < W[me] ? bd - i0 : W[me];
        if (k < P - 1) { /* remote: before w, for d != me */
          ASSERT_NE(d, me);
          ASSERT_LT(j, w);
        } else {
          ASSERT_EQ(d, me);
        }
        sent[d] += nb * ntab;
        for (int u = 0; u < ntab; u++)
          for (int64_t i = i0; i < i0 + nb; i++) {
            unsigned char* c =
                &cover[(size_t)(bstart[d] + i) * (size_t)toff[P] + (size_t)(toff[me] + t0 + u)];
            ASSERT_EQ(*c, 0);
            *c = 1;
          }
      }
      for (int d = 0; d < P; d++) ASSERT_EQ(sent[d], (bstart[d + 1] - bstart[d]) * T[me]);
    }
    for (int64_t i = 0; i < B * toff[P]; i++) ASSERT_EQ(cover[i], 1);
    free(cover);
  }
}

static void land(void) {
  for (int it = 0; it < 2000; it++) {
    const int64_t bme = rnd() % 5 == 0 ? 0 : rnd_in(1, 5000), Ts = rnd_in(0, 6);
    const int64_t vec = 16 * rnd_in(1, 32), land_bytes = 1024 * rnd_in(4, 256);
    t_context("land bme=%lld Ts=%lld vec=%lld land=%lld", (long long)bme, (long long)Ts,
              (long long)vec, (long long)land_bytes);
    const int64_t units = fco_ea_lean_land_units(bme, Ts, vec, land_bytes);
    ASSERT_GE(units, 1);
    if (bme * Ts == 0) {
      ASSERT_EQ(units, 1);
      continue;
    }
    ASSERT_LE(units, bme);
    int64_t at = 0;
    for (int64_t u = 0; u < units; u++) {
      int64_t r0, r1;
      fco_ea_lean_land_rows(bme, units, u, &r0, &r1);
      ASSERT_EQ(r0, at); /* contiguous, in order, no overlap */
      ASSERT_LE(r0, r1);
      ASSERT_LE((r1 - r0) * Ts * vec, land_bytes + Ts * vec); /* about land_bytes, ≥ a row */
      at = r1;
    }
    ASSERT_EQ(at, bme);
  }
}

/* ---- fco_ea_claim: kThreads threads (a call's warps) drain a queue of n indices; a call's
 * threads are joined before the next call (the kernel boundary). Epochs grow by 1..3 between
 * calls (other operators' calls in between); before some calls an older value is written into
 * the counter, as another operator's signal into the same slot would be. Every call: each index
 * in [0, n) claimed exactly once, every thread ends on an index >= n. */
enum { kClaimThreads = 8 };
typedef struct {
  unsigned long long* ctr;
  uint64_t base;
  uint32_t n;
  unsigned char* seen; /* [n] */
  int bad;             /* a claim past n + threads, or 0xffffffff */
} claim_call_t;
static void* claim_worker(void* arg) {
  claim_call_t* c = (claim_call_t*)arg;
  for (;;) {
    const uint32_t i = fco_ea_claim(c->ctr, c->base);
    if (i == 0xffffffffu || i > c->n + 64u * kClaimThreads) {
      __atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
      return NULL;
    }
    if (i >= c->n) return NULL;
    __atomic_fetch_add(&c->seen[i], 1, __ATOMIC_RELAXED);
  }
}
static void claims(void) {
  unsigned long long ctr = 0;
  uint64_t e = 1;
  for (int call = 0; call < 200; call++) {
    e += 1 + rnd() % 3;
    if (rnd() % 4 == 0) ctr = ((e - 1) << 32) | (rnd() & 0xffffu); /* an older epoch's value */
    claim_call_t c;
    c.ctr = &ctr;
    c.base = e << 32;
    c.n = (uint32_t)(rnd() % 3 == 0 ? rnd() % 4 : rnd() % 5000);
    c.seen = (unsigned char*)calloc(c.n + 1, 1);
    c.bad = 0;
    pthread_t th[kClaimThreads];
    for (int t = 0; t < kClaimThreads; t++) ASSERT_EQ(pthread_create(&th[t], NULL, claim_worker, &c), 0);
    for (int t = 0; t < kClaimThreads; t++) pthread_join(th[t], NULL);
    ASSERT_EQ(c.bad, 0);
    for (uint32_t i = 0; i < c.n; i++) ASSERT_EQ(c.seen[i], 1);
    ASSERT_EQ(ctr >> 32, e); /* the counter carries this call's epoch */
    free(c.seen);
  }
  /* a later epoch in the counter (cannot happen): the queue ends, nothing claimed */
  ctr = (uint64_t)(e + 5) << 32;
  ASSERT_EQ(fco_ea_claim(&ctr, e << 32), 0xffffffffu);
}

/* ---- fco_ea_lookup_next: launch after launch, nw threads (a launch's warps, 1..kClaimThreads)
 * pool the ntiles tiles (0..4999, now and then 0..3 — fewer than the warps: no claims): thread
 * w takes tile w, then the next ones from the queue until it gets a number >= ntiles; a launch's
 * threads are joined before the next (the stream's order). Every launch: each tile pooled exactly
 * once, and the queue back at 0 at its end — a launch that left it anywhere else would skip that
 * many tiles of the next. */
typedef struct {
  unsigned int* q;
  uint32_t ntiles, nw, w;
  unsigned char* seen; /* [ntiles] */
} lookup_launch_t;
static void* lookup_worker(void* arg) {
  lookup_launch_t* c = (lookup_launch_t*)arg;
  for (uint32_t j = c->w; j < c->ntiles; j = fco_ea_lookup_next(c->q, c->ntiles, c->nw))
    __atomic_fetch_add(&c->seen[j], 1, __ATOMIC_RELAXED);
  return NULL;
}
static void lookup_claims(void) {
  unsigned int q = 0;
  for (int launch = 0; launch < 300; launch++) {
    lookup_launch_t c[kClaimThreads];
    const int nw = (int)rnd_in(1, kClaimThreads);
    const uint32_t ntiles = (uint32_t)(rnd() % 3 == 0 ? rnd() % 4 : rnd() % 5000);
    unsigned char* seen = (unsigned char*)calloc(ntiles + 1, 1);
    t_context("lookup launch %d: %u tiles, %d warps", launch, ntiles, nw);
    pthread_t th[kClaimThreads];
    for (int t = 0; t < nw; t++) {
      c[t] = (lookup_launch_t){&q, ntiles, (uint32_t)nw, (uint32_t)t, seen};
      ASSERT_EQ(pthread_create(&th[t], NULL, lookup_worker, &c[t]), 0);
    }
    for (int t = 0; t < nw; t++) pthread_join(th[t], NULL);
    for (uint32_t i = 0; i < ntiles; i++) ASSERT_EQ(seen[i], 1);
    ASSERT_EQ(q, 0u);
    free(seen);
  }
  /* the rule: claimed where bags hold >= 8 rows on average and the tiles outnumber the warps
   * (few = 0), unless the knob says */
  ASSERT_EQ(fco_ea_lookup_dyn(8.0, 0, -1), 1);
  ASSERT_EQ(fco_ea_lookup_dyn(7.99, 0, -1), 0);
  ASSERT_EQ(fco_ea_lookup_dyn(64.0, 1, -1), 0);
  ASSERT_EQ(fco_ea_lookup_dyn(1.0, 0, 1), 1);
  ASSERT_EQ(fco_ea_lookup_dyn(64.0, 1, 1), 1);
  ASSERT_EQ(fco_ea_lookup_dyn(64.0, 0, 0), 0);
}

/* ---- fco_ea_few_tiles: T · Σ_d ⌈b_d / (32 / G)⌉ tiles at the fewest bags a tile against the
 * warps — the sum of per-batch ceilings (the fused kernel's tiles never span destinations),
 * exactly at the bound and one over; lanes of 32 and more (one bag a tile); random batches
 * against a direct count. */
static void few_tiles(void) {
  const int64_t one[2] = {0, 256};               /* one batch of 256 */
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 8, 512), 1);  /* 8 · 256 / 4 = 512 tiles */
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 8, 511), 0);
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 16, 1024), 1); /* 2 bags a tile: 1024 */
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 16, 1023), 0);
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 32, 2048), 1); /* 1 bag a tile */
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 64, 2048), 1);
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 64, 2047), 0);
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 1, 64), 1);   /* 32 bags a tile: 8 · 8 */
  ASSERT_EQ(fco_ea_few_tiles(8, one, 1, 1, 63), 0);
  const int64_t three[4] = {0, 5, 5, 14};             /* b = 5, 0, 9 at 4 bags: 2 + 0 + 3 */
  ASSERT_EQ(fco_ea_few_tiles(3, three, 3, 8, 15), 1);
  ASSERT_EQ(fco_ea_few_tiles(3, three, 3, 8, 14), 0);
  ASSERT_EQ(fco_ea_few_tiles(0, three, 3, 8, 0), 1);  /* no tables: no tiles */
  for (int it = 0; it < 2000; it++) {
    int64_t bs[FCO_MAX_GPU_RANKS + 1] = {0};
    const int nb = 1 + (int)(rnd() % FCO_MAX_GPU_RANKS);
    for (int d = 0; d < nb; d++) bs[d + 1] = bs[d] + (int64_t)(rnd() % 3000);
    const int G = 1 << (int)(rnd() % 7); /* 1..64 */
    const int64_t T = 1 + (int64_t)(rnd() % 16);
    int64_t n = 0;
    for (int d = 0; d < nb; d++)
      for (int64_t b = bs[d]; b < bs[d + 1]; b += G >= 32 ? 1 : 32 / G) n += T;
    const int64_t warps = (int64_t)(rnd() % 40000);
    ASSERT_EQ(fco_ea_few_tiles(T, bs, nb, G, warps), n <= warps);
  }
}

/* ---- fco_ea_row_share: random ragged tiles (empty bags, bags of 1..6 rows, one in 8 of up to
 * 300, now and then a tile of empty bags only) split over RW = 1..32 lane groups. The shares
 * partition the tile's rows in equal parts (±1); the lean tile's algorithm, modelled here on
 * integer row values — each group streams its share storing the bags that end in it (the head
 * put aside), then the segmented inclusive scan of the tails over the groups with the shuffles'
 * semantics (a round reads the values from before it; a group below the distance keeps its
 * own), then the head's group adds the previous group's scan value — stores every bag exactly
 * once with its exact sum. */
static void row_shares(void) {
  enum { kMaxBags = 64, kMaxRows = kMaxBags * 300 };
  static int so[kMaxBags + 1];
  static int64_t val[kMaxRows], want[kMaxBags], got[kMaxBags];
  static int stored[kMaxBags];
  for (int it = 0; it < 4000; it++) {
    const int nb = (int)rnd_in(1, kMaxBags), RW = 1 << rnd_in(0, 5), empty = rnd() % 16 == 0;
    so[0] = 0;
    for (int k = 0; k < nb; k++) {
      int len = rnd() % 4 == 0 ? 0 : (int)rnd_in(1, 6);
      if (rnd() % 8 == 0) len = (int)rnd_in(20, 300);
      so[k + 1] = so[k] + (empty ? 0 : len);
    }
    const int span = so[nb];
    for (int q = 0; q < span; q++) val[q] = rnd_in(-4, 4);
    for (int k = 0; k < nb; k++) {
      want[k] = 0;
      for (int q = so[k]; q < so[k + 1]; q++) want[k] += val[q];
      got[k] = 0;
      stored[k] = 0;
    }
    t_context("row share %d: %d bags, %d rows, %d groups", it, nb, span, RW);
    int64_t v[32], hacc[32];
    int f[32], head[32], kb[32];
    for (int r = 0; r < RW; r++) {
      const fco_ea_share_t h = fco_ea_row_share(so, nb, r, RW);
      ASSERT_TRUE(0 <= h.qa && h.qa <= h.qb && h.qb <= span);
      ASSERT_EQ(h.qa, r == 0 ? 0 : fco_ea_row_share(so, nb, r - 1, RW).qb); /* contiguous */
      ASSERT_TRUE(h.qb - h.qa == span / RW || h.qb - h.qa == span / RW + 1);
      if (r == RW - 1) ASSERT_EQ(h.qb, span);
      ASSERT_TRUE(0 <= h.kb && h.kb <= h.ke && h.ke <= nb);
      /* the stream of the lean tile over [qa, qb): a bag stored as a row past its end comes
       * (it must be the group's: cur < ke; the next end read from so[cur + 1], within the tile),
       * then the bags ending at qb */
      int64_t acc = 0, ha = 0;
      int cur = h.kb, next_end = h.kb < h.ke ? so[h.kb + 1] : h.qb;
      for (int q = h.qa; q <= h.qb; q++) {
        while (q < h.qb ? q >= next_end : cur < h.ke) {
          ASSERT_LT(cur, h.ke);
          if (h.head && cur == h.kb) {
            ha = acc;
          } else {
            got[cur] += acc;
            stored[cur]++;
          }
          acc = 0;
          ++cur;
          if (q < h.qb) {
            ASSERT_LE(cur + 1, nb);
            next_end = so[cur + 1];
          }
        }
        if (q < h.qb) acc += val[q];
      }
      v[r] = acc; /* the tail's part */
      f[r] = h.seg;
      head[r] = h.head;
      kb[r] = h.kb;
      hacc[r] = ha;
      ASSERT_TRUE(!h.head || r > 0);
    }
    for (int d = 1; d < RW; d <<= 1) { /* one round of shuffles: values from before it */
      int64_t v2[32];
      int f2[32];
      for (int r = 0; r < RW; r++) {
        v2[r] = r >= d && !f[r] ? v[r - d] + v[r] : v[r];
        f2[r] = r >= d ? f[r] | f[r - d] : f[r];
      }
      memcpy(v, v2, sizeof v);
      memcpy(f, f2, sizeof f);
    }
    for (int r = 1; r < RW; r++)
      if (head[r]) {
        got[kb[r]] += v[r - 1] + hacc[r];
        stored[kb[r]]++;
      }
    for (int k = 0; k < nb; k++) {
      ASSERT_EQ(stored[k], 1);
      ASSERT_EQ(got[k], want[k]);
    }
  }
  t_context("after the row shares");
}

/* ---- exact values at the rules' edges (the property checks above hold for a tile one doubling
 * off, a floor for a ceiling, a wrong shared-memory size; these do not). */
static void exact(void) {
  t_context("exact: shared memory");
  /* G 8, W 16, 3 stages: row ring 3·4·256·16, 8 warps' offsets 8·17·4, weights ring
   * (256/8)·3·4·4, alignment slack 128 */
  ASSERT_EQ(fco_ea_lean_smem_s(8, 16, 3), (size_t)(49152 + 544 + 1536 + 128));
  t_context("exact: tile bags");
  /* G 8 (4 groups a warp), 4 chunks a group: 64 rows a tile, mean 0.25 → W·0.25 ≥ 64 at 256
   * exactly (no further doubling); a million bags on one warp: no halving */
  ASSERT_EQ(fco_ea_lean_tile_bags(8, 0.25, 1000000, 1, 1, 4), 256);
  /* no indices: 1024, halved while ⌈B / W⌉ · T < 2 · warps: 1024 bags → 1 tile < 2 → 512 → 2
   * tiles, not < 2: 512 (a ≤, or warps for 2 · warps, would give 256 or 1024) */
  ASSERT_EQ(fco_ea_lean_tile_bags(32, 0.0, 1024, 1, 1, 4), 512);
  /* 1000 bags: ⌈1000 / 512⌉ = 2 tiles (a floor, 1, would halve to 256) */
  ASSERT_EQ(fco_ea_lean_tile_bags(32, 0.0, 1000, 1, 1, 4), 512);
  /* T 3 tables, 3 warps: 1024 → 3 tiles < 6, 512 → 6: 512 */
  ASSERT_EQ(fco_ea_lean_tile_bags(32, 0.0, 1000, 3, 3, 4), 512);
  t_context("exact: the order's w");
  ASSERT_EQ(fco_ea_lean_w(5, 10, 37), 9u); /* ⌈3.7⌉ = 4 local tiles among the remote */
  ASSERT_EQ(fco_ea_lean_w(5, 10, 1), 6u);  /* ⌈0.1⌉ = 1 */
  ASSERT_EQ(fco_ea_lean_w(5, 10, 50), 10u); /* exactly 5 */
  /* nR 2, nL 3, w 5: remote where (j·2) mod 5 < 2: j = 0, 3 */
  static const uint32_t kOrder[] = {0, 2, 3, 1, 4};
  for (uint32_t j = 0; j < 5; j++) ASSERT_EQ(fco_ea_lean_order(j, 2, 5), kOrder[j]);
  t_context("exact: land units");
  ASSERT_EQ(fco_ea_lean_land_units(100, 1, 1024, 4096), 25); /* 102400 bytes: 25 exactly */
  ASSERT_EQ(fco_ea_lean_land_units(100, 2, 16, 1024), 4);    /* 3200 bytes: ⌈3.125⌉ */
  ASSERT_EQ(fco_ea_lean_land_units(3, 6, 512, 1024), 3);     /* 9 units, a row each at most */
  /* 5 rows over 4 units: 2 a unit, the last one empty */
  static const int64_t kRows[][2] = {{0, 2}, {2, 4}, {4, 5}, {5, 5}};
  for (int u = 0; u < 4; u++) {
    int64_t r0 = -1, r1 = -1;
    fco_ea_lean_land_rows(5, 4, u, &r0, &r1);
    ASSERT_EQ(r0, kRows[u][0]);
    ASSERT_EQ(r1, kRows[u][1]);
  }
  t_context("%s", "");
}

int main(void) {
  g_rng = t_seed_init();
  row_shares();
  claims();
  lookup_claims();
  few_tiles();
  tile_bags();
  order();
  plans();
  land();
  exact();
  printf("PASS\n");
  return 0;
}
