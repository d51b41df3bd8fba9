/*
 * embedding_alltoall_plan.h — the arithmetic of the lean kernels' work plan (plain C, no
 * device code): warp-tile size, the tiles of a rank and their order, land units, a ragged tile's
 * lane-group shares (the row split). Included by
 * src/cuda/embedding_alltoall_lean.cuh and src/cuda/embedding_alltoall_fused_lean.cu (host and
 * device), and by tests/test_ea_plan.c, which checks on the CPU that the plan covers every bag
 * exactly once, in the promised order, that every land unit's rows partition the output — what
 * the kernels rely on for their counters to complete — and that the row split stores every bag
 * once.
 *
 * Plan of rank me (ea_kernel_fused_lean): positions k = 0..P−1 stand for destinations
 * (me + 1 + k) mod P (k = P−1 is me: local); position k has T_me · ⌈b_d / W⌉ tiles, numbered
 * k-major, then table t, then chunk c (samples [c·W, c·W + W) of d). tstart[k] = first tile of
 * position k, tstart[P] = all tiles; the first nR = tstart[P−1] are remote. Warps take order
 * positions; order position j is tile fco_ea_lean_order(j, nR, w).
 */
#ifndef FCO_OPS_EMBEDDING_ALLTOALL_PLAN_H_
#define FCO_OPS_EMBEDDING_ALLTOALL_PLAN_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define FCO_EA_HD static inline __host__ __device__
#else
#define FCO_EA_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
  FCO_EA_LEAN_THREADS = 256,        /* threads a block (kThreads)                          */
  FCO_EA_LEAN_STAGES = 3,           /* cp.async ring stages                                */
  FCO_EA_LEAN_ROWS = 4,             /* rows a chunk                                        */
  FCO_EA_LEAN_MAX_TILE_BAGS = 1024, /* W at most (shared memory for the staged offsets)    */
  FCO_EA_RING_ALIGN = 128           /* the rings start at a multiple of this (slack added) */
};

/* Dynamic shared memory of a block for tiles of W bags and G lanes a bag with a ring of S stages:
 * the row ring, the warps' offsets, the weights' ring, and the slack that aligns the ring. */
FCO_EA_HD size_t fco_ea_lean_smem_s(int G, int W, int S) {
  const size_t warps = FCO_EA_LEAN_THREADS / 32;
  return (size_t)S * FCO_EA_LEAN_ROWS * FCO_EA_LEAN_THREADS * 16 + warps * (size_t)(W + 1) * 4 +
         (size_t)(FCO_EA_LEAN_THREADS / G) * S * FCO_EA_LEAN_ROWS * 4 + FCO_EA_RING_ALIGN;
}
/* ... with the default FCO_EA_LEAN_STAGES. */
FCO_EA_HD size_t fco_ea_lean_smem(int G, int W) { return fco_ea_lean_smem_s(G, W, FCO_EA_LEAN_STAGES); }

/* Bags a warp tile holds (the probe's d2 rule): the smallest power of two that is ≥ the lane
 * groups of a warp (32/G) and gives a group ≥ `chunks` chunks at the mean bag length, at most
 * FCO_EA_LEAN_MAX_TILE_BAGS (which also ends the doubling when there are no indices: mean 0),
 * then halved while T · ⌈B / W⌉ tiles would not give every resident warp two (never below
 * 32/G). A power of two, a multiple of 32/G. The GPU launches choose `chunks` by the mean bag
 * (lean_tile_bags, src/cuda/embedding_alltoall_lean.cuh). */
FCO_EA_HD int fco_ea_lean_tile_bags(int G, double mean_len, int64_t B, int T, int64_t resident_warps,
                                    int chunks) {
  const int64_t RW = 32 / G;
  int64_t W = 1;
  while (W < FCO_EA_LEAN_MAX_TILE_BAGS &&
         (W < RW || (double)W * mean_len < (double)chunks * FCO_EA_LEAN_ROWS * (double)RW))
    W *= 2;
  while (W > RW && (B + W - 1) / W * T < 2 * resident_warps) W /= 2;
  return (int)W;
}

/* tstart[0..P] and tpk[0..P−1] (chunks a table group at position k) of rank me with Tg local
 * table groups (its tables, or ⌈T_me / nt⌉ groups of nt with FCO_EA_LEAN_TABLES), tiles of W
 * samples; bstart: the prefix of the per-rank batches [P + 1]. */
FCO_EA_HD void fco_ea_lean_tiles(int P, int me, int Tr, int W, const int64_t* bstart,
                                 uint32_t* tstart, uint32_t* tpk) {
  uint32_t n = 0;
  for (int k = 0; k < P; ++k) {
    const int d = (me + 1 + k) % P;
    const int64_t bd = bstart[d + 1] - bstart[d];
    tstart[k] = n;
    tpk[k] = (uint32_t)((bd + W - 1) / W);
    n += (uint32_t)Tr * tpk[k];
  }
  tstart[P] = n;
}

/* The order's end of the remote tiles: w = nR (mix 0: remote first) or nR + ⌈mix % · nL⌉
 * (FCO_EA_LEAN_MIX = mix, 1..100), nR remote and nL local tiles; nR = 0: 0. */
FCO_EA_HD uint32_t fco_ea_lean_w(uint32_t nR, uint32_t nL, int mix) {
  if (nR == 0 || mix <= 0) return nR;
  if (mix > 100) mix = 100;
  return nR + (uint32_t)(((uint64_t)nL * (uint32_t)mix + 99) / 100);
}

/* Tile at order position j: the nR remote tiles spread evenly over positions [0, w), the local
 * ones in the others, both kinds in their order — remote at j iff (j·nR) mod w < nR, then remote
 * tile ⌊j·nR/w⌋, else local tile nR + j − 1 − ⌊j·nR/w⌋; from w on, tile j. w = nR: tile j. */
FCO_EA_HD uint32_t fco_ea_lean_order(uint32_t j, uint32_t nR, uint32_t w) {
  if (j >= w) return j;
  const uint64_t a = (uint64_t)j * nR;
  const uint32_t q = (uint32_t)(a / w), rem = (uint32_t)(a - (uint64_t)q * w);
  return rem < nR ? q : nR + (j - 1 - q);
}

/* Tile → its position k, local table t and first sample i0 (of the destination's batch). */
FCO_EA_HD void fco_ea_lean_decode(uint32_t tile, const uint32_t* tstart, const uint32_t* tpk, int W,
                                  int* k, int* t, int64_t* i0) {
  int kk = 0;
  while (tile >= tstart[kk + 1]) ++kk;
  const uint32_t jj = tile - tstart[kk], n = tpk[kk];
  const uint32_t tt = jj / n;
  *k = kk;
  *t = (int)tt;
  *i0 = (int64_t)(jj - tt * n) * W;
}

/* Land units of one source at a destination with bme samples: slices of about land_bytes of the
 * source's Ts tables of vec bytes each, at least a row each (≤ bme); 1 (presence only) when the
 * source sends nothing. */
FCO_EA_HD int64_t fco_ea_lean_land_units(int64_t bme, int64_t Ts, int64_t vec, int64_t land_bytes) {
  const int64_t bytes = bme * Ts * vec;
  if (bytes <= 0) return 1;
  const int64_t units = (bytes + land_bytes - 1) / land_bytes;
  return units > bme ? bme : units;
}
/* Rows [*r0, *r1) of unit rem of `units` over bme rows (contiguous; the last ones may be empty). */
FCO_EA_HD void fco_ea_lean_land_rows(int64_t bme, int64_t units, int64_t rem, int64_t* r0, int64_t* r1) {
  const int64_t per = (bme + units - 1) / units;
  *r0 = rem * per < bme ? rem * per : bme;
  *r1 = *r0 + per < bme ? *r0 + per : bme;
}

/* A lane group's share of a ragged warp tile (the row split of lean_tile,
 * src/cuda/embedding_alltoall_lean.cuh): the tile's nb bags have relative offsets so[0..nb]
 * (so[0] = 0, nondecreasing); group r of RW streams positions [qa, qb) = [r · span / RW,
 * (r + 1) · span / RW), span = so[nb], and stores the bags [kb, ke): those whose end falls in
 * (qa, qb], group 0 also those ending at 0 (the empty bags in front) — every bag exactly once.
 * head: bag kb began before qa (the group completes it with what the groups before summed of it);
 * seg: 0 where [qa, qb) lies inside bag ke, begun before qa (the group only passes on a part of
 * it), else 1. tests/test_ea_plan.c checks the partition and the segmented scan on the CPU. */
typedef struct {
  int qa, qb, kb, ke, head, seg;
} fco_ea_share_t;
/* #{k < nb : so[k + 1] <= x}: the bags that end at or before x (a binary search). */
FCO_EA_HD int fco_ea_ended_by(const int* so, int nb, int x) {
  int lo = 0, hi = nb;
  while (lo < hi) {
    const int m = (lo + hi) >> 1;
    if (so[m + 1] <= x) lo = m + 1;
    else hi = m;
  }
  return lo;
}
FCO_EA_HD fco_ea_share_t fco_ea_row_share(const int* so, int nb, int r, int RW) {
  fco_ea_share_t h;
  const int64_t span = so[nb];
  h.qa = (int)(span * r / RW);
  h.qb = (int)(span * (r + 1) / RW);
  h.kb = r == 0 ? 0 : fco_ea_ended_by(so, nb, h.qa);
  h.ke = fco_ea_ended_by(so, nb, h.qb);
  h.head = h.kb < h.ke && so[h.kb] < h.qa;
  h.seg = !(h.ke < nb && so[h.ke] < h.qa);
  return h;
}

/* One claim from a queue of the claimed tile order (FCO_EA_LEAN_DYN): the queue is a 64-bit
 * counter (epoch << 32) + claims, never reset; base = this call's epoch << 32. The first claims of
 * a call find an older epoch: they lift the counter to base with max and retry (a claim counts
 * only once the counter carries this call's epoch, so no index is lost or given twice). Returns
 * the claimed index, or 0xffffffff when the counter carries a later epoch (cannot happen: epochs
 * only grow). The GPU kernel's lane 0 runs it (device atomics); tests/test_ea_plan.c runs it
 * from host threads. */
FCO_EA_HD uint32_t fco_ea_claim(unsigned long long* ctr, uint64_t base) {
  for (;;) {
#if defined(__CUDA_ARCH__)
    const unsigned long long old = atomicAdd(ctr, 1ull);
#else
    const unsigned long long old = __atomic_fetch_add(ctr, 1ull, __ATOMIC_RELAXED);
#endif
    if ((old >> 32) == (base >> 32)) return (uint32_t)old;
    if ((old >> 32) > (base >> 32)) return 0xffffffffu;
#if defined(__CUDA_ARCH__)
    atomicMax(ctr, (unsigned long long)base);
#else
    unsigned long long cur = __atomic_load_n(ctr, __ATOMIC_RELAXED);
    while (cur < base &&
           !__atomic_compare_exchange_n(ctr, &cur, (unsigned long long)base, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
#endif
  }
}

/* The next tile of a warp of impl 0's claimed lookup (ea_kernel_lean_stream's claimed order,
 * src/cuda/embedding_alltoall_lean.cuh), after the one it pooled, or a number ≥ ntiles when none
 * is left. Warp w of the launch's nw pools tile w first (none where w ≥ ntiles) without a claim:
 * a claim for every warp's first tile queued one atomic a warp on one address at the kernel's
 * start, which cost small batches up to 3 µs a call (one H100, P = 1: 256/8/64/8 7.49 → 4.59 µs;
 * full-size rows 0.995–1.008×, run `2026-12-05_nvidia-h100-x1_0a6e7c3-lookup`). The tiles
 * after the first nw are claimed: claim j gives tile nw + j, and a warp claims until it gets a tile
 * ≥ ntiles — so a launch makes ntiles claims where ntiles > nw (ntiles − nw tiles and nw end
 * claims) and none where ntiles ≤ nw, and the claim that gets ntiles − 1 is its final one: it sets
 * the queue back to 0 for the next launch (ordered after this one on the stream; a CUDA-graph
 * replay too). Lane 0 of a warp runs it on the GPU; tests/test_ea_plan.c from host threads,
 * launch after launch. Host check: T · tiles a table + nw < 2^31. */
FCO_EA_HD uint32_t fco_ea_lookup_next(unsigned int* q, uint32_t ntiles, uint32_t nw) {
  if (ntiles <= nw) return ntiles;
#if defined(__CUDA_ARCH__)
  const uint32_t j = atomicAdd(q, 1u);
  if (j == ntiles - 1u) atomicExch(q, 0u);
#else
  const uint32_t j = __atomic_fetch_add(q, 1u, __ATOMIC_RELAXED);
  if (j == ntiles - 1u) __atomic_store_n(q, 0u, __ATOMIC_RELAXED);
#endif
  return nw + j;
}

/* Whether a launch of either lean kernel has no more tiles than warps, whatever its tile size:
 * T tables over nb batches bstart[0..nb] (the fused kernel's destinations; the lookup's one
 * batch), tiles of at least 32 / G bags (lean_tile_bags never goes below the lane groups of a
 * warp; G: lanes a bag, a power of two ≤ 32), against `warps` resident for the launch. Then
 * every warp pools at most one tile and claiming balances nothing, while its claims (and the
 * fused kernel's empty-queue round) cost a fixed 0.3–4 µs: both kernels' default takes the
 * static order there (fco_ea_lookup_dyn; the fused kernel's FCO_EA_LEAN_DYN unset). One H200,
 * bf16, B / 256 (run 2026-12-05_nvidia-h200_571244b-gap): fused at P = 1 static vs claimed
 * 256/8/64/8 7.59 vs 10.28 µs, ragged 11.12 vs 15.40, 256/8/64/1 7.20 vs 8.63; one H100 (run
 * 2026-12-05_nvidia-h100-x1_0a6e7c3-lookup): fused at local P = 2 1.05–1.15× faster static on the
 * four B / 256 rows, the lookup (warp w's first tile unclaimed already) 4.26 vs 4.59 µs at
 * 256/8/64/8 and 6.40 vs 6.87 on 64/8/128/32 Zipf. Where warps pool a few tiles each the claims
 * balance ragged bags (4096/8/64/8 ragged, B / 16: claimed 2–3 % faster): claimed there. */
FCO_EA_HD int fco_ea_few_tiles(int64_t T, const int64_t* bstart, int nb, int G, int64_t warps) {
  const int64_t rw = G >= 32 ? 1 : 32 / (G < 1 ? 1 : G);
  int64_t tiles = 0;
  for (int d = 0; d < nb; d++) tiles += (bstart[d + 1] - bstart[d] + rw - 1) / rw;
  return T * tiles <= warps;
}

/* Whether impl 0's lookup claims its tiles (FCO_EA_LOOKUP_DYN unset: where bags hold ≥ 8 rows
 * on average and the launch has more tiles than warps, `few` = fco_ea_few_tiles; 0 / 1 force
 * it). Run 2026-12-04_nvidia-h200_dyn-ab (one H200, bf16 µs static → claimed): bags of ≥ 8 rows
 * 0.99–1.11× faster (ragged 16384/8/128/32 303.1 → 271.9, ragged 65536/8/64/8 190.2 → 177.9,
 * Zipf 171.6 → 165.6); shorter bags with many small tiles lose to the one queue's atomics (f32
 * 131072/8/32/4 169.9 → 197.3, 65536/8/64/1 46.3 → 48.2). */
FCO_EA_HD int fco_ea_lookup_dyn(double mean_len, int few, long long knob) {
  return knob < 0 ? mean_len >= 8.0 && !few : knob != 0;
}

#ifdef __cplusplus
}
#endif

#endif /* FCO_OPS_EMBEDDING_ALLTOALL_PLAN_H_ */
