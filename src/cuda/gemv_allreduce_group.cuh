/*
 * gemv_allreduce_group.cuh — fco_gemv_allreduce's grouped-tile schedules (M 9..64, bf16 /
 * f16; FCO_GEMV_GROUP and the default TMA tile at M 9..64): a group's K slice through the tile
 * the launcher chose (group_slice: gemv_group_tma.cuh, gemv_group_wgmma.cuh or
 * gemv_group_tile.cuh), the TMA kernel's prologue (group_prime, group_prefetch), a split
 * group's helpers (run_split_helper: the split area, or the cluster hand-off) and the grouped
 * one-shot (run_oneshot_group). Split from gemv_allreduce_sched.cuh (its parameters, context
 * and helpers) in session 25, the code unchanged; included by gemv_allreduce.cu only.
 */
#ifndef FCO_CUDA_GEMV_ALLREDUCE_GROUP_CUH_
#define FCO_CUDA_GEMV_ALLREDUCE_GROUP_CUH_

#include "gemv_allreduce_sched.cuh"
#include "gemv_group_tile.cuh"
#include "gemv_group_tma.cuh"
#include "gemv_group_wgmma.cuh"

namespace fco {
namespace {

/* kTma: the ring stages of K slice sl of p.split (whole stages of SK k; TMA coordinates are
 * 32-bit): s0 .. s0 + n − 1. */
template <int kG>
__device__ __forceinline__ void tma_slice(const GarParams& p, int64_t K, int sl, int& s0, int& n) {
  using G = gemv::GroupTma<kG>;
  const int stages = (int)((K + G::SK - 1) / G::SK);
  s0 = (int)((int64_t)stages * sl / p.split);
  n = (int)((int64_t)stages * (sl + 1) / p.split) - s0;
}

/* impl 1 with grouped tiles (FCO_GEMV_GROUP, M 9..64, bf16 / f16): as run_oneshot, but the
 * block's unit of work is a group of kG consecutive tiles, q·kG .. q·kG + kG − 1, for groups
 * q = b, b + B, ... (gemv_group_wgmma.cuh or gemv_group_tile.cuh computes the group's partials
 * into shared memory, x shared by its tiles). Per group: store every tile ([T][M][16] in the
 * slot as run_oneshot: fp32 with FCO_GEMV_GROUP_FP32=1, else in the dtype, the slot's first
 * half) into slot `me` of every rank, one flag per group (sig[me][b] = (e << 32) | (j + 1),
 * j = the group's index in this block). Then per group: wait for the peers' flags, sum the P
 * slots in rank order, bias, round, write y. Bit-identical on every rank (every rank sums the
 * same values in the same order). */
/* All threads: group q's partial over K slice sl of p.split (whole 64-element slabs; slice 0
 * when not split) into smem's out [kG][64][16]. kWg: the wgmma tile (the launcher's choice:
 * every local rank on the vector path), where this image has it (sm_90a; another target runs
 * the mma.sync tile); else the mma.sync tile. Two kernels, not a branch: with both tiles in one
 * kernel the wgmma path ran at the mma.sync tile's 255 registers with spills (session 14,
 * ptxas; the probe's kernel of the same tile: 55 registers). kTma (with kWg, FCO_GEMV_GROUP_TMA,
 * kG = 8): the wgmma math fed by TMA from a producer warp (gemv_group_tma.cuh, 288 threads; the
 * maps in c.mx / c.mw), a third kernel; its split slices are whole ring stages (kKb·64 k);
 * primed and to_owner are GroupTma::run's (kTma only). */
template <typename T, int kMT, int kG, bool kWg, bool kTma>
__device__ __forceinline__ void group_slice(const GarParams& p, const Ctx& c, int q, int sl,
                                            unsigned char* smem, int primed = 0,
                                            uint32_t to_owner = 0) {
  if constexpr (kTma) { /* slices of whole ring stages (SK k each), zeros past K */
    int s0, n;
    tma_slice<kG>(p, c.K, sl, s0, n);
    gemv::GroupTma<kG>::template run<T>(c.mx, c.mw, gemv::GroupTma<kG>::stage_tx(p.M), s0, n,
                                        q * kG * kTileN, smem, p.tma_stages, primed, to_owner);
    return;
  }
  int64_t k0 = 0, k1 = c.K;
  if (p.split > 1) {
    const int64_t slabs = (c.K + 63) / 64;
    k0 = slabs * sl / p.split * 64;
    k1 = min(c.K, slabs * (sl + 1) / p.split * 64);
  }
  const T* w = (const T*)c.w + k0;
  const T* x = (const T*)c.x + k0;
  if constexpr (kWg && FCO_WGMMA_COMPILED)
    gemv::GroupWgmma<kG>::run(w, x, p.M, p.N, k1 - k0, c.K, q * kG * kTileN, smem);
  else
    gemv::group_tile<T, kMT, kG>(w, x, p.M, p.N, k1 - k0, c.K, q * kG * kTileN, c.vec, smem);
}

/* Two-phase grouped tiles (kImpl 2): group q = b + jj·B, the jj-th of block b, in
 * TwoPhaseOrder (owned elsewhere first). The jj a block computes first, from the kernel
 * parameters alone (rank: p.rank), so that the kernel's prologue can prime that group's ring
 * (group_prime); run_twophase_group's order starts with the same jj. */
__device__ __forceinline__ int twophase_first(const GarParams& p, int kG, int b, int B, int rank) {
  const int Q = (p.T + kG - 1) / kG;
  bool remote;
  return TwoPhaseOrder(b, p.nranks, rank, (Q - b + B - 1) / B).at(0, remote);
}

/* kTma: block bi's first call of group_slice (owners bi < B: group bi + jj0·B, slice 0 — jj0
 * from twophase_first in impl 2, else 0; split helpers: as run_split_helper), from the kernel
 * parameters alone: its group q and ring stages s0 .. s0 + n − 1. False where the block has no
 * group. */
template <int kG>
__device__ __forceinline__ bool first_slice(const GarParams& p, int64_t K, int bi, int B, int jj0,
                                            int& q, int& s0, int& n) {
  int sl = 0;
  q = bi + jj0 * B;
  if (bi >= B) {
    if (p.split < 2) return false;
    q = (bi - B) / (p.split - 1);
    sl = 1 + (bi - B) % (p.split - 1);
  }
  if (q >= (p.T + kG - 1) / kG) return false;
  tma_slice<kG>(p, K, sl, s0, n);
  return true;
}

/* kTma, all threads at the kernel's start (GroupTma::prime): that first call primed, before
 * the rank view is loaded. Returns the stages issued (0 where the block has no group), the
 * `primed` of that call. */
template <int kG>
__device__ __forceinline__ int group_prime(const GarParams& p, const void* mx, const void* mw,
                                           int64_t K, int bi, int B, int jj0, unsigned char* smem) {
  int q, s0, n;
  if (!first_slice<kG>(p, K, bi, B, jj0, q, s0, n)) return 0;
  return gemv::GroupTma<kG>::prime(mx, mw, gemv::GroupTma<kG>::stage_tx(p.M), s0, n,
                                   q * kG * kTileN, smem, p.tma_stages);
}

/* kTma with PDL, before griddepcontrol.wait: L2 prefetches of the first p.prefetch_bytes of
 * the W boxes that first call reads first (GroupTma::prefetch_w; every block, helpers too). */
template <int kG>
__device__ __forceinline__ void group_prefetch(const GarParams& p, const void* mw, int64_t K,
                                               int bi, int B, int jj0) {
  int q, s0, n;
  if (first_slice<kG>(p, K, bi, B, jj0, q, s0, n))
    gemv::GroupTma<kG>::prefetch_w(mw, s0, n, q * kG * kTileN, p.prefetch_bytes);
}

/* Split groups: the split area's slice sl (1..split-1), [T][M][16] fp32 as a slot. */
__device__ __forceinline__ char* split_area(const GarParams& p, const Ctx& c, const RankView& v,
                                            int sl) {
  return v.peer_data[c.me] + c.hoff + p.split_off + (size_t)(sl - 1) * p.split_slice_bytes;
}
/* Helper h's flag: row me of this rank's own signals, which no other flag of this op uses. */
__device__ __forceinline__ uint64_t* split_flag(const Ctx& c, const RankView& v, int h) {
  return v.peer_sig[c.me] + (size_t)c.me * FCO_SIG_SLOTS + h;
}

/* A split helper (block b ≥ B): h = b − B takes group h / (split − 1), slice 1 + h % (split − 1);
 * its partial goes to that slice's split area, then the flag (release: the owner's acquire and
 * L2 reads see the stores). */
template <typename T, int kMT, int kG, bool kWg, bool kTma>
__device__ __forceinline__ void run_split_helper(const GarParams& p, const Ctx& c,
                                                 const RankView& v, unsigned char* smem,
                                                 int primed) {
  const int h = c.b - c.B, q = h / (p.split - 1), sl = 1 + h % (p.split - 1);
  /* A cluster's helper: its fragments straight into the owner's buffer for slice sl (CTA 0 of
   * the cluster; GroupTma::run's to_owner), then publish. */
  uint32_t to_owner = 0;
  if constexpr (kTma)
    if (p.pair) to_owner = gemv::GroupTma<kG>::hand_buf(smem, p.split, sl);
  group_slice<T, kMT, kG, kWg, kTma>(p, c, q, sl, smem, primed, to_owner);
  if constexpr (kTma) {
    if (p.pair) {
      gemv::pair_publish();
      if (threadIdx.x == 0) FCO_GTRACE(7);
      return;
    }
  }
  const int per = 4 * p.M; /* float4s per tile */
  const size_t tile_bytes = (size_t)p.M * kTileN * 4;
  const float4* out = reinterpret_cast<const float4*>(smem); /* [kG][64][16] */
  char* area = split_area(p, c, v, sl);
  for (int idx = threadIdx.x; idx < kG * per; idx += blockDim.x) {
    const int tw = idx / per, ii = idx - tw * per;
    const int t = q * kG + tw;
    if (t >= p.T) break;
    __stcg((float4*)(area + (size_t)t * tile_bytes + (size_t)ii * 16),
           out[(tw * 64 + (ii >> 2)) * 4 + (ii & 3)]);
  }
  signal_block(threadIdx.x == 0 ? split_flag(c, v, h) : nullptr, sig_value(c.e, 0));
}

/* A thread's float4s of a group's [nt][M][16] partials, idx = i, i + step, ... < nt·4M, as
 * (tw, ii) = (idx / 4M, idx % 4M) kept by increments: no division a float4 (session 24: with
 * one, and the checks of finish4_at, the grouped tile's last loop ran ~108 instructions a
 * float4, ~2.9 µs at M 64; run 2026-12-02_nvidia-h200_34bb36f-icache). */
struct GroupWalk {
  int tw0, ii0, dtw, dii, per;
  __device__ __forceinline__ GroupWalk(int i, int step, int per_) : per(per_) {
    tw0 = i / per;
    ii0 = i - tw0 * per;
    dtw = step / per;
    dii = step - dtw * per;
  }
  __device__ __forceinline__ void next(int& tw, int& ii) const {
    ii += dii;
    tw += dtw;
    if (ii >= per) ii -= per, ++tw;
  }
};

/* An owner block's group q, all threads: slice 0 through the tile into out (smem), then the
 * helpers' slices made available — a cluster's hand-off (pair_handoff: they are in this block's
 * shared memory), or the split area's flags (one group a block then: the launcher's rule).
 * False (every thread) where a helper's flag timed out. */
template <typename T, int kMT, int kG, bool kWg, bool kTma>
__device__ __forceinline__ bool group_owner_slice(const GarParams& p, const Ctx& c,
                                                  const RankView& v, int q, unsigned char* smem,
                                                  const WaitCtx& wc, int primed) {
  group_slice<T, kMT, kG, kWg, kTma>(p, c, q, 0, smem, primed);
  bool pair = false;
  if constexpr (kTma) pair = p.pair != 0;
  if (pair) {
    gemv::pair_handoff(p.split); /* the helpers' slices are in this block's shared memory */
    if (threadIdx.x == 0) FCO_GTRACE(7);
  } else if (p.split > 1) {
    const int i = threadIdx.x;
    bool ok = true;
    if (i < p.split - 1)
      ok = wait_ge(split_flag(c, v, q * (p.split - 1) + i), sig_value(c.e, 0), wc, c.me,
                   q * (p.split - 1) + i);
    if (__syncthreads_or(!ok)) return false;
  }
  return true;
}

/* Where a group's partial lies once group_owner_slice returned: out [kG][64][16] fp32 at the
 * start of smem, plus a split group's other slices — a cluster's in this block's shared memory
 * (slice 1 at hand_buf, slice sl ≥ 2 kOutBytes·sl past out), else in the split area. */
template <int kG, bool kTma>
struct GroupSlices {
  const float4* out;
  const float4* pb; /* a cluster's slice 1, else nullptr */
  __device__ __forceinline__ GroupSlices(const GarParams& p, unsigned char* smem) {
    out = reinterpret_cast<const float4*>(smem);
    pb = nullptr;
    if constexpr (kTma)
      if (p.pair)
        pb = reinterpret_cast<const float4*>(
            smem + (gemv::GroupTma<kG>::hand_buf(smem, p.split, 1) - smem_u32(smem)));
  }
  /* float4 ii of tile t = q·kG + tw: the slices summed in slice order (the same sum at every
   * call, through either hand-off). */
  __device__ __forceinline__ float4 sum(const GarParams& p, const Ctx& c, const RankView& v, int t,
                                        int tw, int ii) const {
    constexpr int kOutF4 = kTma ? (int)(gemv::GroupTma<kG>::kOutBytes / 16) : 0;
    const int o = tw * 256 + ii; /* out [tw][ii / 4][16]: float4 tw·256 + ii */
    float4 r = out[o];
    if (pb) {
      r = add4(r, pb[o]);
      for (int sl = 2; sl < p.split; ++sl) r = add4(r, out[sl * kOutF4 + o]);
    } else {
      const size_t tile_bytes = (size_t)p.M * kTileN * 4;
      for (int sl = 1; sl < p.split; ++sl)
        r = add4(r, __ldcg((const float4*)(split_area(p, c, v, sl) + (size_t)t * tile_bytes +
                                           (size_t)ii * 16)));
    }
    return r;
  }
};

/* The pushed partials of the grouped tiles: p.group_half (bf16 / f16, FCO_GEMV_GROUP_FP32
 * unset) rounded to the dtype, 8 bytes a float4 (a slot's tile t at t·M·16·2): half the bytes
 * that cross the link; else fp32. */
template <typename T>
struct GroupPush {
  bool half;
  size_t tile_push; /* bytes of a tile in a slot */
  __device__ __forceinline__ explicit GroupPush(const GarParams& p) {
    half = sizeof(T) == 2 && p.group_half;
    tile_push = (size_t)p.M * kTileN * (half ? 2 : 4);
  }
  __device__ __forceinline__ size_t off(int t, int ii) const {
    return (size_t)t * tile_push + (size_t)ii * (half ? 8 : 16);
  }
  __device__ __forceinline__ void store(char* dst, float4 r) const {
    if (half)
      st_global_v2(dst, make_uint2(pack2<T>(r.x, r.y), pack2<T>(r.z, r.w)));
    else
      st_global_v4(dst, make_uint4(__float_as_uint(r.x), __float_as_uint(r.y),
                                   __float_as_uint(r.z), __float_as_uint(r.w)));
  }
  __device__ __forceinline__ float4 load(const char* src) const {
    if (!half) return __ldcg((const float4*)src);
    const uint2 u = __ldcg((const uint2*)src);
    return unpack4<T>(u.x, u.y);
  }
};

/* The grouped one-shot's first half for one float4 (tile t, float4 ii) of a group's summed
 * slices r: at one rank y straight from it (nothing to reduce; `fast`: finish4_at's unchecked
 * store), else pushed into slot `me` of every rank (this one's too). */
template <typename T>
__device__ __forceinline__ void oneshot_group_push4(const GarParams& p, const Ctx& c,
                                                    const RankView& v, const GroupPush<T>& push,
                                                    int t, int ii, bool fast, float4 r) {
  if (c.P == 1) {
    if (fast)
      finish4_at<T, false>(p, c, t, ii, r);
    else
      finish4_at<T>(p, c, t, ii, r);
    return;
  }
  const size_t off = c.hoff + (size_t)c.me * p.slot_bytes + push.off(t, ii);
  for (int k = 1; k <= c.P; ++k) push.store(v.peer_data[(c.me + k) % c.P] + off, r);
}

/* The grouped one-shot's second half, all threads of a block: per group q = q0, q0 + B, ...
 * (the j-th), wait for every peer's flag sig_value(e, j) in slot q0 (the owner's), sum the P
 * slots in rank order, bias, round, write y — tiles tw_lo .. tw_lo + nt − 1 of each group (all
 * kG by an owner; a half each by a pair's owner and helper with GarParams::fin_split). */
template <typename T, int kG>
__device__ __forceinline__ void oneshot_group_reduce(const GarParams& p, const Ctx& c,
                                                     const RankView& v, const WaitCtx& wc, int q0,
                                                     int tw_lo = 0, int nt = kG) {
  const int i = threadIdx.x, step = blockDim.x;
  const int per = 4 * p.M; /* float4s per tile */
  const int Q = (p.T + kG - 1) / kG;
  const GroupPush<T> push(p);
  const bool yvec = !c.bias && p.N % 4 == 0 && (uintptr_t)c.y % (4 * sizeof(T)) == 0;
  const GroupWalk gw(i, step, per);
  const char* mine = v.peer_data[c.me] + c.hoff;
  uint32_t j = 0;
  for (int q = q0; q < Q; q += c.B, ++j) {
    bool ok = true;
    if (i < c.P && i != c.me)
      ok = wait_ge(v.peer_sig[c.me] + (size_t)i * FCO_SIG_SLOTS + q0, sig_value(c.e, j), wc, i,
                   q0);
    if (__syncthreads_or(!ok)) return;
    const int t0 = q * kG + tw_lo, lim = max(0, min(nt, p.T - t0)) * per;
    const bool fast = yvec && (int64_t)(t0 + nt) * kTileN <= p.N;
    int tw = gw.tw0, ii = gw.ii0;
    for (int idx = i; idx < lim; idx += step, gw.next(tw, ii)) {
      const int t = t0 + tw;
      const size_t off = push.off(t, ii);
      float4 acc = push.load(mine + off); /* rank 0's 4 partials of this thread */
      for (int r = 1; r < c.P; ++r)
        acc = add4(acc, push.load(mine + (size_t)r * p.slot_bytes + off));
      if (fast)
        finish4_at<T, false>(p, c, t, ii, acc);
      else
        finish4_at<T>(p, c, t, ii, acc);
    }
  }
}

/* Rounds: the groups owner cq (of B) takes, q = cq, cq + B, ... < the groups of kG tiles. */
template <int kG>
__device__ __forceinline__ int rounds_of(const GarParams& p, int cq, int B) {
  return ((p.T + kG - 1) / kG - cq + B - 1) / B;
}

/* Whether the TMA tile's one-shot runs run_oneshot_rounds: rounds, or a pair's split finalise
 * (one group a block too). */
__device__ __forceinline__ bool rounds_path(const GarParams& p) {
  return p.rounds > 1 || p.fin_split;
}

/* Rounds (FCO_GEMV_ROUNDS = R ≥ 2 on the TMA tile, impl 1: p.rounds; the launcher runs
 * ceil(groups / R) owner blocks, split 1 or cluster pairs): a block — an owner, or a pair's
 * owner and helper (slice 1) — takes its groups q = b, b + B, ... as rounds of one TMA ring that
 * runs on (GroupTma::run_rounds): while its consumer warps finish group r (the helper's slice
 * handed over, the sums pushed to every rank and flagged), the producer already streams group
 * r + 1's W. On two GPUs group r's partials then cross the link while group r + 1 computes; with
 * one group a block every push trails the last wgmma (docs/gemv_allreduce.md, "Rounds"). The
 * hand-off of a round, without the cluster barrier (which would stop the producers too): the
 * helper st.async's its fragments into the owner's pair buffer, their bytes counted on the
 * owner's hand_full (the owner's expect-tx arrival, once a round); the owner adds its own
 * fragments in place (slice 0 + slice 1, as GroupSlices::sum) and, once it has pushed the
 * group, arrives on the helper's hand_empty, which the helper waits for before its next
 * round's stores. Split 1: the owner's fragments go to the same buffer, no hand-off. Then the
 * owner's second half as run_oneshot_group's (oneshot_group_reduce): the same slots, flags and
 * values, so ranks may differ in R only where their owner blocks agree (B is in the
 * FCO_CHECK_ARGS hash).
 *
 * p.fin_split (pairs, FCO_GEMV_PAIR_FIN; also with one group a block, R = 1): the owner and
 * the helper each finalise half of the group — side s (0 the owner, 1 the helper) the tiles
 * s·kG/2 .. of warpgroup s's columns. Warpgroup 1 − s st.async's its fragments into the
 * peer's buffer (counted on the peer's hand_full), warpgroup s adds the peer's into its own in
 * place (slice 0 + slice 1), and both blocks push their half: half the hand-off bytes a block
 * and half the push (or, at one rank, y) loop. The flags stay the owner's (slot b, one a group
 * once both halves are pushed: the helper's thread 0 arrives on the owner's hand_empty after
 * its pushes, GroupTma::arrive_pushed, and the owner's flag threads wait for it; at one rank,
 * without flags, only the owner's next stores into the helper's buffer wait for it), so what
 * crosses to other ranks — slots, values, flags — is the one-shot's, and ranks need not
 * agree on the knob; the second half is then split the same way (both wait for slot b's
 * flags). hand_empty: the owner's counts the helper's "pushed" arrivals (every round; at one
 * rank all but the last), the helper's the owner's "read" ones (rounds before the last), as
 * without fin_split. */
template <typename T, int kG>
__device__ __forceinline__ void run_oneshot_rounds(const GarParams& p, const Ctx& c,
                                                   const RankView& v, unsigned char* smem,
                                                   const WaitCtx& wc, int primed) {
  using G = gemv::GroupTma<kG>;
  const int tid = threadIdx.x, B = c.B, per = 4 * p.M;
  if (tid == 0) FCO_GTRACE(14);
  const bool helper = c.b >= B;
  const int side = helper ? 1 : 0;
  const int cq = helper ? c.b - B : c.b; /* the owner's index (split ≤ 2: one helper each) */
  const int nr = rounds_of<kG>(p, cq, B);
  const bool fin2 = p.fin_split != 0; /* implies a pair */
  int s0, n;
  tma_slice<kG>(p, c.K, side, s0, n);
  const uint32_t pb = G::hand_buf(smem, 2, 1); /* the pair buffer, out in split 1 too */
  float* out = reinterpret_cast<float*>(smem + (pb - smem_u32(smem))); /* [kG][64][16] */
  const uint32_t hfull = G::hand_full(smem), hempty = G::hand_empty(smem);
  const uint32_t peer = (uint32_t)(side ^ 1);
  uint32_t ro = 0, rb = 0; /* the peer's buffer and hand_full */
  if (p.pair) {
    gemv::cluster_wait(); /* phase 1: the peer block's hand barriers are initialised */
    ro = gemv::cluster_map(pb, peer);
    rb = gemv::cluster_map(hfull, peer);
  }
  if (helper && !fin2) {
    G::template run_rounds<T>(
        c.mx, c.mw, G::stage_tx(p.M), s0, n, cq * kG * kTileN, B * kG * kTileN, nr, smem,
        p.tma_stages, primed,
        [&](int r, float* d) {
          if (r > 0) tile::mbar_wait(hempty, (uint32_t)(r - 1) & 1u);
          G::hand_frags(ro, rb, d);
        });
    return;
  }
  /* The tiles this block finalises: all kG, or its half (fin2). */
  const int tw_lo = fin2 ? side * (kG / 2) : 0, nt = fin2 ? kG / 2 : kG;
  const GroupPush<T> push(p);
  const bool yvec = !c.bias && p.N % 4 == 0 && (uintptr_t)c.y % (4 * sizeof(T)) == 0;
  const GroupWalk gw(tid, G::kConsumers, per);
  uint64_t* flag_out = nullptr; /* the owner's thread i < P, i != me: peer i's flag for it */
  if (!helper && tid < c.P && tid != c.me)
    flag_out = v.peer_sig[tid] + (size_t)c.me * FCO_SIG_SLOTS + c.b;
  /* fin2, the owner's flag threads: they wait for the helper's pushes of a round before they
   * flag it (and so, behind the barrier after them, the owner's next round's stores into the
   * helper's buffer wait too). At one rank no flags: the owner's sending warpgroup waits for
   * the helper's "pushed" (= buffer read) arrival of round r − 1 before its stores of round r,
   * as the helper does, and the helper skips the last round's arrival (nobody waits for it). */
  const bool wait_helper = fin2 && flag_out;
  G::template run_rounds<T>(
      c.mx, c.mw, G::stage_tx(p.M), s0, n, cq * kG * kTileN, B * kG * kTileN, nr, smem,
      p.tma_stages, primed,
      [&](int r, float* d) {
        if (fin2) {
          if ((tid >> 7) != side) { /* the peer's half: into its buffer */
            if (r > 0 && (helper || c.P == 1)) tile::mbar_wait(hempty, (uint32_t)(r - 1) & 1u);
            G::hand_frags(ro, rb, d);
          } else { /* this block's half: the peer's slice added in place */
            if (tid == side * 128)
              tile::mbar_arrive_expect_tx(hfull, (uint32_t)(G::kOutBytes / 2));
            tile::mbar_wait(hfull, (uint32_t)r & 1u);
            G::keep_frags(out, d, true);
          }
        } else {
          if (p.pair) { /* the helper's slice of this round in the buffer */
            if (tid == 0) tile::mbar_arrive_expect_tx(hfull, (uint32_t)G::kOutBytes);
            tile::mbar_wait(hfull, (uint32_t)r & 1u);
          }
          G::keep_frags(out, d, p.pair != 0);
        }
        tile::bar_sync_all(G::kConsumers);
        if (tid == 0) FCO_GTRACE(6); /* FCO_GEMV_TRACE: the round's hand-off done */
        const int t0 = (cq + r * B) * kG + tw_lo, lim = max(0, min(nt, p.T - t0)) * per;
        const bool fast = yvec && (int64_t)(t0 + nt) * kTileN <= p.N;
        const float4* o4 = reinterpret_cast<const float4*>(out) + tw_lo * 256;
        int tw = gw.tw0, ii = gw.ii0;
        for (int idx = tid; idx < lim; idx += G::kConsumers, gw.next(tw, ii))
          oneshot_group_push4<T>(p, c, v, push, t0 + tw, ii, fast, o4[tw * 256 + ii]);
        if (tid == 0) FCO_GTRACE(7); /* its pushes (or y) issued */
        /* fin2: the owner's flags (and its next round's stores into the helper's buffer, behind
         * the barrier below) wait for the helper's pushes of this round. */
        if (wait_helper) G::wait_pushed(hempty, (uint32_t)r & 1u);
        tile::bar_sync_all(G::kConsumers); /* out read, every push issued: signal_block's order */
        if (tid == 0) FCO_GTRACE(8); /* the round's last barrier (fin2: after the helper's pushes) */
        if (flag_out) st_release_sys(flag_out, sig_value(c.e, (uint32_t)r));
        if (tid == 0 && p.pair) {
          if (fin2 && helper) {
            if (c.P > 1 || r + 1 < nr) G::arrive_pushed(hempty, c.P > 1);
          } else if (r + 1 < nr) {
            tile::mbar_arrive_cluster(hempty, peer);
          }
        }
      });
  if (c.P > 1) oneshot_group_reduce<T, kG>(p, c, v, wc, cq, tw_lo, nt);
}

/* Rounds, a block that leaves without run_oneshot_rounds (its argument check failed): its
 * primed stages landed and, in a pair, the peer block never left waiting. Without fin_split
 * (only an owner checks): every round's hand-off taken (thread 0: each hand_full awaited,
 * hand_empty arrived but after the last). With fin_split (both check; they fail alike unless
 * one timed out): the block goes through every round's exchange as run_oneshot_rounds does,
 * zeros for its fragments, and pushes nothing. */
template <int kG>
__device__ __forceinline__ void rounds_bail(const GarParams& p, const Ctx& c, unsigned char* smem,
                                            int primed) {
  using G = gemv::GroupTma<kG>;
  G::drain(smem, primed);
  if (!p.pair) return;
  gemv::cluster_wait();
  const int tid = threadIdx.x;
  const bool helper = c.b >= c.B;
  const int side = helper ? 1 : 0;
  const int nr = rounds_of<kG>(p, helper ? c.b - c.B : c.b, c.B);
  const uint32_t hfull = G::hand_full(smem), hempty = G::hand_empty(smem);
  if (!p.fin_split) {
    if (tid != 0) return;
    for (int r = 0; r < nr; ++r) {
      tile::mbar_arrive_expect_tx(hfull, (uint32_t)G::kOutBytes);
      tile::mbar_wait(hfull, (uint32_t)r & 1u);
      if (r + 1 < nr) tile::mbar_arrive_cluster(hempty, 1u);
    }
    return;
  }
  const uint32_t peer = (uint32_t)(side ^ 1);
  const uint32_t ro = gemv::cluster_map(G::hand_buf(smem, 2, 1), peer);
  const uint32_t rb = gemv::cluster_map(hfull, peer);
  float zeros[G::BN / 4];
#pragma unroll
  for (int i = 0; i < G::BN / 4; ++i) zeros[i] = 0.f;
  for (int r = 0; r < nr; ++r) {
    if (tid < G::kConsumers && (tid >> 7) != side) {
      if (helper && r > 0) tile::mbar_wait(hempty, (uint32_t)(r - 1) & 1u);
      G::hand_frags(ro, rb, zeros);
    }
    if (tid == 0) {
      tile::mbar_arrive_expect_tx(hfull, (uint32_t)(G::kOutBytes / 2));
      tile::mbar_wait(hfull, (uint32_t)r & 1u);
      if (helper) {
        G::arrive_pushed(hempty, false);
      } else {
        G::wait_pushed(hempty, (uint32_t)r & 1u);
        if (r + 1 < nr) tile::mbar_arrive_cluster(hempty, peer);
      }
    }
    __syncthreads();
  }
}

template <typename T, int kMT, int kG, bool kWg, bool kTma>
__device__ __forceinline__ void run_oneshot_group(const GarParams& p, const Ctx& c,
                                                  const RankView& v, unsigned char* smem,
                                                  const WaitCtx& wc, int primed) {
  const int i = threadIdx.x, step = blockDim.x;
  if (i == 0) FCO_GTRACE(14);
  const int per = 4 * p.M; /* float4s per tile */
  const int Q = (p.T + kG - 1) / kG;
  /* Every rank sums the same rounded values in rank order: y stays the same bits on all. */
  const GroupPush<T> push(p);
  /* y's 4 columns of a float4 as one unchecked vector store (finish4_at<T, false>) in every
   * group whose columns are all < N, where there is no bias and every row of y is aligned. */
  const bool yvec = !c.bias && p.N % 4 == 0 && (uintptr_t)c.y % (4 * sizeof(T)) == 0;
  const GroupWalk gw(i, step, per);
  uint64_t* flag_out = nullptr; /* thread q < P, q != me: peer q's flag for this block */
  if (i < c.P && i != c.me) flag_out = v.peer_sig[i] + (size_t)c.me * FCO_SIG_SLOTS + c.b;
  const GroupSlices<kG, kTma> gs(p, smem);
  uint32_t j = 0;
  for (int q = c.b; q < Q; q += c.B, ++j) {
    if (!group_owner_slice<T, kMT, kG, kWg, kTma>(p, c, v, q, smem, wc, j == 0 ? primed : 0))
      return;
    const int t0 = q * kG, lim = min(kG, p.T - t0) * per;
    const bool fast = yvec && (int64_t)(t0 + kG) * kTileN <= p.N;
    int tw = gw.tw0, ii = gw.ii0;
    for (int idx = i; idx < lim; idx += step, gw.next(tw, ii)) {
      const int t = t0 + tw;
      oneshot_group_push4<T>(p, c, v, push, t, ii, fast, gs.sum(p, c, v, t, tw, ii));
    }
    if (i == 0) FCO_GTRACE(8);
    signal_block(flag_out, sig_value(c.e, j)); /* also: out read before the next group */
  }
  if (c.P > 1) oneshot_group_reduce<T, kG>(p, c, v, wc, c.b);
}

/* impl 2 with grouped tiles (M 33..64, bf16 / f16; the same groups, tiles, K splits and partial
 * slots as run_oneshot_group): group q = b + jj·B is owned by rank (b + jj) mod P (as
 * run_twophase's tiles). A block computes the groups owned elsewhere first (their partials
 * cross the link while it computes its own) and pushes each partial only to its owner, into
 * slot `me` (rounded to the dtype as the one-shot's), flag sig[me][b] at the owner = the
 * group's index among this block's groups that owner owns. Then its own groups: wait for the
 * P − 1 peers' partials, sum the P in rank order (this rank's own in fp32 from shared memory),
 * bias, round, write y, and push the rounded group into every peer's gather area ([T][M][16]
 * in the dtype, past the P slots), flag sig[me][B + b]. Last, the groups owned elsewhere:
 * wait for the owner's gather flag, copy its rounded values into y. Each output is reduced
 * once, by its owner, and every rank holds the owner's bits. A rank sends (P − 1)/P of its
 * partials and 1/P of y to each peer — the one-shot sends all of its partials to each. */
template <typename T, int kMT, int kG, bool kWg, bool kTma>
__device__ __forceinline__ void run_twophase_group(const GarParams& p, const Ctx& c,
                                                   const RankView& v, unsigned char* smem,
                                                   const WaitCtx& wc, int primed) {
  using V = typename Raw4<T>::V;
  const int i = threadIdx.x, step = blockDim.x, P = c.P, me = c.me, b = c.b;
  const int per = 4 * p.M; /* float4s per tile */
  const int Q = (p.T + kG - 1) / kG, nt = (Q - b + c.B - 1) / c.B; /* this block's groups */
  const size_t gtile_bytes = (size_t)p.M * kTileN * sizeof(T);
  const size_t gather_off = c.hoff + (size_t)P * p.slot_bytes;
  const GroupPush<T> push(p);
  const bool yvec = !c.bias && p.N % 4 == 0 && (uintptr_t)c.y % (4 * sizeof(T)) == 0;
  const GroupWalk gw(i, step, per);
  const GroupSlices<kG, kTma> gs(p, smem);
  const char* mine = v.peer_data[me] + c.hoff;
  /* The order: groups owned elsewhere, in jj order, then this rank's; twophase_first (the
   * prologue's primed group) is the first of it. */
  const TwoPhaseOrder ord(b, P, me, nt);
  for (int pos = 0; pos < nt; ++pos) {
    bool remote;
    const int jj = ord.at(pos, remote), q = b + jj * c.B;
    if (!group_owner_slice<T, kMT, kG, kWg, kTma>(p, c, v, q, smem, wc, pos == 0 ? primed : 0))
      return;
    const int t0 = q * kG, lim = min(kG, p.T - t0) * per;
    int tw = gw.tw0, ii = gw.ii0;
    if (remote) { /* (1) the partial to its owner only */
      char* dst = v.peer_data[ord.owner(jj)] + c.hoff + (size_t)me * p.slot_bytes;
      for (int idx = i; idx < lim; idx += step, gw.next(tw, ii)) {
        const int t = t0 + tw;
        push.store(dst + push.off(t, ii), gs.sum(p, c, v, t, tw, ii));
      }
      ord.signal_partial(v, c, jj);
      continue;
    }
    /* (2) this rank's group: the peers' partials, the sum in rank order, y, the gathers */
    if (!ord.wait_partials(v, c, wc, jj)) return;
    const bool fast = yvec && (int64_t)(t0 + kG) * kTileN <= p.N;
    for (int idx = i; idx < lim; idx += step, gw.next(tw, ii)) {
      const int t = t0 + tw;
      const float4 own = gs.sum(p, c, v, t, tw, ii);
      const size_t off = push.off(t, ii);
      float4 acc = me == 0 ? own : push.load(mine + off);
      for (int r = 1; r < P; ++r)
        acc = add4(acc, r == me ? own : push.load(mine + (size_t)r * p.slot_bytes + off));
      const V out = fast ? finish4_at<T, false>(p, c, t, ii, acc) : finish4_at<T>(p, c, t, ii, acc);
      const size_t goff = gather_off + (size_t)t * gtile_bytes + (size_t)ii * sizeof(V);
      for (int r = 1; r < P; ++r) *(V*)(v.peer_data[(me + r) % P] + goff) = out;
    }
    ord.signal_gather(v, c, jj);
  }
  /* (3) the groups owned elsewhere: the owner's rounded values into y */
  for (int jj = 0; jj < nt; ++jj) {
    if (ord.owner(jj) == me) continue;
    if (!ord.wait_gather(v, c, wc, jj)) return;
    const int t0 = (b + jj * c.B) * kG, lim = min(kG, p.T - t0) * per;
    const bool fast = yvec && (int64_t)(t0 + kG) * kTileN <= p.N;
    int tw = gw.tw0, ii = gw.ii0;
    for (int idx = i; idx < lim; idx += step, gw.next(tw, ii)) {
      const int t = t0 + tw;
      const V in = __ldcg((const V*)(mine + (size_t)P * p.slot_bytes + (size_t)t * gtile_bytes +
                                     (size_t)ii * sizeof(V)));
      if (fast)
        store4_at<T, false>(p, c, t, ii, in);
      else
        store4_at<T>(p, c, t, ii, in);
    }
  }
}

}  // namespace
}  // namespace fco

#endif  // FCO_CUDA_GEMV_ALLREDUCE_GROUP_CUH_
