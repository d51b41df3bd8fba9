/*
 * gemv_group_tma.cuh — the grouped GEMV tile fed by TMA from a producer warp (sm_90a): the
 * grouped one-shot's default tile since session 23 (src/cuda/gemv_allreduce.cu; groups of
 * kG = 8 tiles, or 4 where those stream W from more blocks (session 26, launch_grouped);
 * FCO_GEMV_GROUP_TMA=0 turns it off) for M 9..64 (M 9..32 since session 30) in bf16 / f16 on the
 * vector path. The same math and the same kind of result as
 * gemv_group_wgmma.cuh's GroupWgmma (out [kG][64][16] fp32 at the start of smem): warpgroup g
 * runs wgmma m64n{8kG}k16 on its half of the group's kG·16 columns, A = x [64][64 k], B = W
 * [kG·16][64 k], both K-major in the 128-byte swizzle, from an S-stage ring; a stage holds kKb
 * such 64-k boxes of x, then kKb of W.
 *
 * Why (gemv_group_probe, session 22, bench/probe/gemv_tma_tiles.cuh's tmawk): GroupWgmma's 256
 * threads issue the ring's cp.async copies themselves and pass two block barriers per slab;
 * here a ninth warp's one thread issues the TMA box loads and the 8 consumer warps only wait,
 * multiply and release (per stage a "full" mbarrier: the producer's arrive + the bytes, and an
 * "empty" one: one arrival per consumer warp once its wgmma reading the stage retired). What
 * made the probe's form of it tie cuBLAS at M = 64 (run 2026-12-02_nvidia-h200_38d4cd6-wk:
 * 22.17 µs vs cuBLAS 22.05 at 64×8192×4096, K in 2 slices): 128-column groups (kG = 8: x read
 * from L2 once per 128 W rows), kKb = 2 boxes a stage (256 contiguous bytes of each W row a
 * request: 11–18 %), and a producer loop on 32-bit counters without a division (a 64-bit
 * `q / num_k` a slab had made the producer the pace-setter: 6–10 %). Session 18's first form
 * of this file (64-column groups, one box a stage, 64-bit counters; commit fbf94bb) was 4–12 %
 * slower than GroupWgmma in the operator and was reverted. This form, in the operator (runs
 * 2026-12-02_nvidia-h200_418224d-skew, 5bdd21a-pair, P = 1, M = 64, graphs): 1.10–1.33× the
 * speed of GroupWgmma's groups of 4, faster than cuBLAS alone at 8192×28672 (119.3 vs 125.7 µs).
 * Session 24 (prime, w_policy, prefetch_w, to_owner and the operator's lean final loops; run
 * 2026-12-02_nvidia-h200_fe80fc1-tmapf): 37.2 vs cuBLAS's 36.7 µs at 8192², 113.6 vs 122.9
 * at 8192×28672 — the fixed cost a call ~5 µs instead of ~9. Also here: the
 * cluster hand-off of a group split in 2..4 (run's to_owner, hand_buf, pair_handoff).
 *
 * Maps: x [M][K] and W [N][K] of each local rank (the row stride is this rank's K: the vector
 * path's K·esize % 16 == 0 is TMA's stride rule), encoded on the host at every call (encode())
 * and passed in a __grid_constant__ kernel parameter (GroupMaps). A split group's slice is a
 * range of whole stages (kKb·64 k; group_slice cuts the split in those units); k past K reads
 * zeros (TMA fills outside the tensor), rows ≥ N too; x's box has M rows (x_rows), the
 * stage's other x rows hold whatever the ring held before.
 * Per call of run(): barriers initialised (for a block's first call possibly by prime(), which
 * also issued its first stages at the kernel's start), the ring filled from empty, all copies
 * consumed and every wgmma retired before the out fragments are written (out aliases the ring;
 * the barriers lie past it), barriers invalidated: nothing carries over between groups. All
 * kThreads = 288 threads of the block call run(); it begins with a block barrier and ends with
 * one (a pair's helper, to_owner: with the caller's cluster barrier instead).
 */
#ifndef FCO_CUDA_GEMV_GROUP_TMA_CUH_
#define FCO_CUDA_GEMV_GROUP_TMA_CUH_

#include "gemm_tile_wgmma.cuh"
#include "gemv_group_wgmma.cuh"

namespace fco {
namespace gemv {

/* FCO_GEMV_TRACE (a diagnostic build only, never defined by the Makefile): the first
 * kGtraceBlocks blocks (owners and helpers of the pairs in a pair launch) record %globaltimer at
 * points of a call (thread 0; the producer, thread 256, slots 3 and 12), the SM they run on
 * (slot 10), and a kernel after the call prints them (gemv_allreduce.cu's gtrace_print).
 * Slots 6 / 7 / 8 ("out", "handoff", "finish" in the print): run()'s out written, the cluster
 * hand-off, the pushes; in run_oneshot_rounds (the last round's): the hand-off done, the pushes
 * (or y) issued, the round's last barrier. Slots 11 / 12 ("entry", "pentry"): run() or
 * run_rounds() entered by thread 0 / by the producer thread (before their first block barrier;
 * "init", slot 2, is after it in run()); 13 / 14 ("ctx", "path"): thread 0 past the kernel's
 * context set-up and checks / at the start of the one-shot's group path. */
#ifdef FCO_GEMV_TRACE
constexpr int kGtraceBlocks = 288;
__device__ unsigned long long g_gtrace[kGtraceBlocks][16];
#define FCO_GTRACE(k)                                                              \
  do {                                                                             \
    if (blockIdx.x < ::fco::gemv::kGtraceBlocks) {                                 \
      unsigned long long t_;                                                       \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                       \
      ::fco::gemv::g_gtrace[blockIdx.x][k] = t_;                                   \
    }                                                                              \
  } while (0)
#define FCO_GTRACE_SM()                                                            \
  do {                                                                             \
    if (blockIdx.x < ::fco::gemv::kGtraceBlocks) {                                 \
      unsigned sm_;                                                                \
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm_));                             \
      ::fco::gemv::g_gtrace[blockIdx.x][10] = sm_;                                 \
    }                                                                              \
  } while (0)
#else
#define FCO_GTRACE(k) \
  do {                \
  } while (0)
#define FCO_GTRACE_SM() \
  do {                  \
  } while (0)
#endif

/* The kernel parameter with the tensor maps of the grid's local ranks (TMA reads a map from
 * param, const or global space); the kernels without TMA get the empty one. */
template <bool kTma>
struct GroupMaps {
  int unused;
};
template <>
struct GroupMaps<true> {
  CUtensorMap x[FCO_MAX_GPU_RANKS];
  CUtensorMap w[FCO_MAX_GPU_RANKS];
};

/* Split groups in clusters of split = 2..4 blocks (GarParams::pair; CTA 0 the owner, CTA sl
 * the helper of slice sl): the cluster barrier in two phases. Phase 1 (every helper arrives
 * relaxed at the kernel's start; the owner too at split 2, at split 3 and 4 only once its ring
 * is done, with release: cluster_arrive_release; the helper waits before the hand-off) says
 * the owner's buffer for the helper's slice is there to be written (GroupTma::hand_buf); phase 2
 * (pair_publish, the owner's pair_handoff: arrive release, wait acquire) publishes the
 * helpers' partials to the owner. All threads of every block, once each. */
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void pair_publish() { /* phase 2 */
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
/* addr (a shared address of this block) in CTA `cta` of the cluster, as a shared::cluster
 * address (mapa). */
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t cta) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(cta));
  return r;
}
/* The owner's side, once its ring is done (or drained): at split 3 and 4 its phase-1 arrival
 * (the helpers may now store into the ring), then both phases. */
__device__ __forceinline__ void pair_handoff(int split) {
  if (split > 2) cluster_arrive_release();
  cluster_wait();
  pair_publish();
}

template <int kG, int kKb = 2>
struct GroupTma {
  static constexpr int BN = kG * kTileN, BK = 64, SK = kKb * BK; /* SK: k a stage */
  static constexpr int kConsumers = 256, kThreads = kConsumers + 32, kWarps = kThreads / 32;
  static constexpr int kXBox = 64 * 128, kWBox = BN * 128; /* bytes of one 64-k box */
  static constexpr int kXBytes = kKb * kXBox, kWBytes = kKb * kWBox;
  static constexpr int kStageBytes = kXBytes + kWBytes; /* a multiple of 1024 */
  static constexpr int kFit = (200 * 1024 - 1024 - 256) / kStageBytes;
  static constexpr int kStages = kFit > 12 ? 12 : kFit;
  static constexpr int kBarOff = kStages * kStageBytes; /* from the 1024-aligned ring base */
  static constexpr size_t kOutBytes = (size_t)kG * 64 * kTileN * 4;
  static constexpr size_t kPipeBytes = 1024 + (size_t)kBarOff + 2 * kStages * 8;
  static constexpr size_t kSmemBytes = kPipeBytes > kOutBytes ? kPipeBytes : kOutBytes;
  /* Pair hand-off (split 2 in clusters of 2, see hand_buf): the helper's partial lands in the
   * owner's shared memory past the barriers, kOutBytes more. */
  static constexpr size_t kPairOff = ((size_t)kBarOff + 2 * kStages * 8 + 15) / 16 * 16;
  /* Rounds (run_rounds, FCO_GEMV_ROUNDS): two more mbarriers past the pair buffer, hand_full
   * (the owner's: its expect-tx arrival + the helper's st.async bytes) and hand_empty (the
   * helper's: the owner's arrival once it has read the buffer). Every launch of this tile asks
   * the same bytes. */
  static constexpr size_t kRoundBarOff = kPairOff + kOutBytes;
  static constexpr size_t kSmemPairBytes = 1024 + kRoundBarOff + 16;
  static_assert(kStageBytes % 1024 == 0 && kStages >= 3, "stage layout: at least 3 stages");
  static_assert(kOutBytes <= (size_t)kBarOff, "out must not reach the barriers");
  /* Clusters of up to kMaxCluster blocks (split 3, 4: out and the helpers' slices in the ring) */
  static constexpr int kMaxCluster = 4;
  static_assert((size_t)kMaxCluster * kOutBytes <= (size_t)kBarOff,
                "a cluster's slices must fit in the owner's ring");

  /* x's box: M rows (at most 64), so that no row of it lies past x (session 30: rows filled
   * as zeros outside the tensor cost the TMA time — at P = 1, 8192×4096, M 1 / 16 / 32 on
   * 64-row boxes 25.3 / 22.4 / 20.5 µs against 20.4 at M 64, run
   * 2026-12-03_nvidia-h200_0c2bdbb-tma32). The stage's rows ≥ M keep what the ring held
   * before: they only reach out's rows ≥ M, which are never read. stage_tx: a stage's bytes. */
  __host__ __device__ static constexpr int x_rows(int M) { return M < 64 ? (M > 0 ? M : 1) : 64; }
  __host__ __device__ static constexpr int stage_tx(int M) { return kKb * x_rows(M) * 128 + kWBytes; }

  /* Host: the maps of x [M][K] and W [N][K] (2-byte elements, rows K apart). Returns nullptr
   * on success, else what failed (the caller falls back to the mma.sync tile, same groups). */
  static const char* encode(CUtensorMap* mx, CUtensorMap* mw, const void* x, int M,
                            const void* w, int N, int64_t K) {
    tile::TmaEncodeFn fn = tile::tma_encode_fn();
    if (!fn) return "cuTensorMapEncodeTiled not found";
    const CUtensorMapDataType dt = CU_TENSOR_MAP_DATA_TYPE_UINT16; /* a copy: bits are bits */
    const cuuint32_t one[2] = {1, 1};
    const cuuint64_t stride[1] = {(cuuint64_t)K * 2};
    {
      const cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)M};
      const cuuint32_t box[2] = {BK, (cuuint32_t)x_rows(M)};
      if (fn(mx, dt, 2, const_cast<void*>(x), dim, stride, box, one,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return "cuTensorMapEncodeTiled(x)";
    }
    {
      const cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)N};
      const cuuint32_t box[2] = {BK, (cuuint32_t)BN};
      if (fn(mw, dt, 2, const_cast<void*>(w), dim, stride, box, one,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return "cuTensorMapEncodeTiled(W)";
    }
    return nullptr;
  }

  /* Where the helper of slice sl (1 .. split − 1) of a cluster of split blocks stores its
   * partial in the owner ([kG][64][16] fp32, as out; a shared-window address in this block,
   * the same offset in every block of the cluster, mapa'd to CTA 0 by the helper). Split 2:
   * the pair buffer past the barriers (the launch asks kSmemPairBytes), free while the owner's
   * ring still runs, so the helper stores as soon as it is done. Split 3, 4: slot sl of kOutBytes
   * from smem's start, inside the owner's ring (out is slot 0), free only once that ring is
   * done: the owner's phase-1 arrival waits for it (session 25; kOutBytes past the barriers for
   * every helper would not fit in shared memory beside the 4-stage ring). */
  __device__ static __forceinline__ uint32_t hand_buf(unsigned char* smem, int split, int sl) {
    return split == 2 ? ((smem_u32(smem) + 1023u) & ~1023u) + (uint32_t)kPairOff
                      : smem_u32(smem) + (uint32_t)((size_t)sl * kOutBytes);
  }
  /* m64nNk16 fragment: d[4j + q] is row (warp % 4)·16 + lane/4 + 8·(q/2), column
   * 8j + 2·(lane % 4) + q % 2 of this warpgroup's BN/2 columns (as GroupWgmma). The float index
   * in out [kG][64][16] of d[4j + q] (q = 0 or 2; d[4j + q + 1] the next column beside it), for
   * consumer thread tid. */
  __device__ static __forceinline__ int frag_at(int tid, int j, int q) {
    const int wg = tid >> 7, lane = tid & 31, row0 = ((tid >> 5) & 3) * 16 + (lane >> 2);
    const int col = wg * (BN / 2) + 8 * j + 2 * (lane & 3);
    const int row = row0 + 8 * (q >> 1);
    return ((col / kTileN) * 64 + row) * kTileN + col % kTileN;
  }
  /* ns (FCO_GEMV_TMA_STAGES): ring stages in use, 2..kStages (fewer bytes in flight a block:
   * the first stage of every block arrives sooner when all blocks fill their rings at once);
   * anything else: kStages. */
  __device__ static __forceinline__ int ring_stages(int ns) {
    return ns < 2 || ns > kStages ? kStages : ns;
  }
  /* L2 policy of W's boxes: evict first. W is read once a call; without the hint its stream
   * (the whole L2 several times over at these shapes) evicts what the kernel reads again —
   * the rank table, x, the flags — and the next call's first reads of them go to DRAM behind
   * the ring's first stages (run 2026-12-02_nvidia-h200_5913396-prime). */
  __device__ static __forceinline__ uint64_t w_policy() {
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
  }
  /* One thread: stage s of the ring ← the kKb boxes of x, then of W (policy pol), at k0 (the
   * full barrier's expected bytes first: tx, stage_tx(M)). */
  __device__ static __forceinline__ void issue(const void* mx, const void* mw, int tx,
                                               uint32_t pipe, uint32_t full, int s, int k0,
                                               int n0, uint64_t pol) {
    const uint32_t st = pipe + (uint32_t)s * kStageBytes;
    tile::mbar_arrive_expect_tx(full + 8 * s, (uint32_t)tx);
#pragma unroll
    for (int b = 0; b < kKb; ++b)
      tile::tma_load_2d(st + b * kXBox, mx, full + 8 * s, k0 + b * BK, 0);
#pragma unroll
    for (int b = 0; b < kKb; ++b)
      tile::tma_load_2d_hint(st + kXBytes + b * kWBox, mw, full + 8 * s, k0 + b * BK, n0, pol);
  }
  __device__ static __forceinline__ void init_bars(uint32_t full, uint32_t empty) {
    for (int s = 0; s < kStages; ++s) {
      tile::mbar_init(full + 8 * s, 1);
      tile::mbar_init(empty + 8 * s, kConsumers / 32);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }

  /* The PDL prologue (before griddepcontrol.wait: W only, and only into L2), the producer
   * thread: L2 prefetches (TMA's tensor prefetch, the same boxes through the same map) of the
   * W boxes of stages st0 .. st0 + num_st − 1 in the ring's order, about `bytes` of them (at
   * least one box). Session 24 (run 2026-12-02_nvidia-h200_1f6beb9-pdlknobs): the one-tile
   * kernels' prefetch_tile, 16 rows issued by threads 0..15, made the owner blocks read their
   * rank view ~3 µs late (FCO_GEMV_PDL_PREFETCH=0: on time, but 0.1–0.6 µs slower a call). */
  __device__ static __forceinline__ void prefetch_w(const void* mw, int st0, int num_st, int n0,
                                                    uint32_t bytes) {
#if FCO_WGMMA_COMPILED
    if (threadIdx.x != kConsumers || bytes == 0) return;
    int boxes = (int)((bytes + kWBox - 1) / kWBox);
    if (boxes > num_st * kKb) boxes = num_st * kKb;
    for (int b = 0; b < boxes; ++b) tile::tma_prefetch_2d(mw, (st0 * kKb + b) * BK, n0);
#endif
  }

  /* All threads, at the kernel's start, before anything else uses this shared memory (and
   * after griddepcontrol.wait where the kernel has one: x may be the previous kernel's
   * output): the producer thread initialises the barriers and issues the first
   * min(ns, num_st) stages of the block's first run() (the same arguments), so its first bytes
   * are on their way while the block still loads its rank view (session 24: in run
   * 2026-12-02_nvidia-h200_0c41359-gtrace the first issue came ~2.1 µs after the kernel's
   * start). Returns that count (every thread): pass it to that run() as `primed`, or, where
   * the block leaves without it, to drain(). */
  __device__ static __forceinline__ int prime(const void* mx, const void* mw, int tx, int st0,
                                              int num_st, int n0, unsigned char* smem, int ns) {
#if FCO_WGMMA_COMPILED
    ns = ring_stages(ns);
    const int kp = num_st < ns ? num_st : ns;
    if (kp > 0 && threadIdx.x == kConsumers) { /* kp 0: run() initialises as unprimed */
      const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
      const uint32_t full = pipe + kBarOff, empty = full + kStages * 8;
      init_bars(full, empty);
      const uint64_t pol = w_policy();
      for (int kt = 0; kt < kp; ++kt) issue(mx, mw, tx, pipe, full, kt, (st0 + kt) * SK, n0, pol);
      FCO_GTRACE(3);
    }
    return kp;
#else
    return 0;
#endif
  }
  /* The producer thread of a block that primed kp stages and leaves without the run() that
   * consumes them: wait until they have landed (no copy may write shared memory that is no
   * longer this block's). Other threads: nothing. */
  __device__ static __forceinline__ void drain(unsigned char* smem, int kp) {
#if FCO_WGMMA_COMPILED
    if (threadIdx.x != kConsumers) return;
    const uint32_t full = ((smem_u32(smem) + 1023u) & ~1023u) + kBarOff;
    for (int s = 0; s < kp; ++s) tile::mbar_wait(full + 8 * s, 0u);
#endif
  }

  /* A consumer thread (tid < kConsumers): num_st stages from the ring, the next at slot s of
   * phase ph (both advanced), added into d (this thread's m64n(BN/2) fragments), each stage
   * released (its empty barrier, one arrival a warp) once the wgmma reading it retired; the
   * last one only where release_last (run_rounds: the ring runs on; run: discarded after).
   * Returns with every wgmma retired. */
  template <typename T>
  __device__ static __forceinline__ void consume(float* d, uint32_t pipe, uint32_t full,
                                                 uint32_t empty, int num_st, int ns, int& s,
                                                 int& ph, bool release_last) {
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
    const uint32_t b_off = kXBytes + (uint32_t)wg * (BN / 2) * 128;
    int ps = 0;
#pragma unroll 1
    for (int kt = 0; kt < num_st; ++kt) {
      tile::mbar_wait(full + 8 * s, (uint32_t)ph);
      if (kt == 0 && tid == 0) FCO_GTRACE(4);
      const uint32_t st = pipe + (uint32_t)s * kStageBytes;
      tile::wgmma_fence();
#pragma unroll
      for (int b = 0; b < kKb; ++b)
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          WgmmaN<T, BN / 2>::run(d, tile::wgmma_desc(st + b * kXBox + kk * 32, 16, 1024),
                                 tile::wgmma_desc(st + b_off + b * kWBox + kk * 32, 16, 1024));
      tile::wgmma_commit();
      tile::wgmma_wait<1>(); /* stage kt − 1 retired (this warpgroup): release it */
      if (kt > 0) {
        __syncwarp();
        if (lane == 0) tile::mbar_arrive(empty + 8 * ps);
      }
      ps = s;
      if (++s == ns) s = 0, ph ^= 1;
    }
    tile::wgmma_wait<0>();
    if (tid == 0) FCO_GTRACE(5);
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) asm volatile("" : "+f"(d[i])::"memory");
    if (release_last && num_st > 0) {
      __syncwarp();
      if (lane == 0) tile::mbar_arrive(empty + 8 * ps);
    }
  }

  /* All kThreads threads. Stages st0 .. st0 + num_st − 1 (SK k each) of columns n0 .. n0 +
   * BN − 1; out: [kG][64][16] fp32 at the start of smem when done (rows ≥ M hold
   * anything, never read). mx, mw: this rank's maps (generic addresses of the kernel parameter).
   * primed: what prime() returned for this call (its barriers are initialised and its first
   * stages issued), else 0. ns: as ring_stages; prime()'s when primed. to_owner: a cluster's
   * helper, hand_buf's address (else 0); its partial goes there in the owner instead of out
   * (see below), and it returns without the final block barrier: the caller's pair_publish
   * follows at once. */
  template <typename T>
  __device__ static __forceinline__ void run(const void* mx, const void* mw, int tx, int st0,
                                             int num_st, int n0, unsigned char* smem, int ns,
                                             int primed = 0, uint32_t to_owner = 0) {
#if FCO_WGMMA_COMPILED
    const int tid = threadIdx.x;
    const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
    const uint32_t full = pipe + kBarOff, empty = full + kStages * 8;
    ns = ring_stages(ns);
    if (tid == 0) FCO_GTRACE(11);
    if (tid == kConsumers) FCO_GTRACE(12);
    __syncthreads(); /* the previous group's out (aliasing the ring) has been read */
    if (tid == 0 && !primed) init_bars(full, empty);
    __syncthreads(); /* (primed: the producer's initialisation too) */
    if (tid == 0) FCO_GTRACE(2);
    float d[BN / 4]; /* m64n(BN/2): BN/4 per consumer thread */
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) d[i] = 0.f;
    if (tid >= kConsumers) { /* the producer warp: one thread issues */
      if (tid == kConsumers) { /* 32-bit counters, no division per stage */
        int kt = primed, s = primed == ns ? 0 : primed, ph = primed == ns ? 1 : 0;
        const uint64_t pol = w_policy();
#pragma unroll 1
        for (int k0 = (st0 + kt) * SK; kt < num_st; ++kt, k0 += SK) {
          if (kt >= ns) tile::mbar_wait(empty + 8 * s, (uint32_t)ph ^ 1u);
          issue(mx, mw, tx, pipe, full, s, k0, n0, pol);
          if (kt == 0) FCO_GTRACE(3);
          if (++s == ns) s = 0, ph ^= 1;
        }
      }
      __syncwarp(); /* converged before the block barrier below (an aligned one) */
    } else {
      int s = 0, ph = 0;
      consume<T>(d, pipe, full, empty, num_st, ns, s, ph, false);
    }
    __syncthreads(); /* every copy consumed, every wgmma retired: out may reuse the ring */
    if (tid == 0)
      for (int s = 0; s < kStages; ++s) {
        tile::mbar_inval(full + 8 * s);
        tile::mbar_inval(empty + 8 * s);
      }
    /* to_owner (a cluster's helper): the fragments go straight into the owner's buffer for
     * this slice (CTA 0 of the cluster, through the cluster's shared window) once phase 1 of
     * the cluster barrier says it is free; the caller's pair_publish makes them visible. Else
     * into out at the start of this block's smem. Same layout either way. */
    uint32_t remote = 0;
    if (to_owner) {
      cluster_wait();
      remote = cluster_map(to_owner, 0);
    }
    if (tid < kConsumers) {
      /* Columns col, col + 1 (q = 0, 1 and 2, 3) side by side: one 8-byte store each pair. */
      float* out = reinterpret_cast<float*>(smem);
#pragma unroll
      for (int j = 0; j < BN / 16; ++j)
#pragma unroll
        for (int q = 0; q < 4; q += 2) {
          const int at = frag_at(tid, j, q);
          if (to_owner)
            asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(remote + 4u * at),
                         "f"(d[4 * j + q]), "f"(d[4 * j + q + 1])
                         : "memory");
          else
            *reinterpret_cast<float2*>(&out[at]) = make_float2(d[4 * j + q], d[4 * j + q + 1]);
        }
    }
    if (to_owner) return; /* the caller publishes (pair_publish: all threads) */
    __syncthreads();
    if (tid == 0) FCO_GTRACE(6);
#else
    __trap(); /* not built for sm_90a: the launcher must not pick this tile */
#endif
  }

  /* Rounds: the hand-off barriers past the pair buffer (kRoundBarOff). */
  __device__ static __forceinline__ uint32_t hand_full(unsigned char* smem) {
    return ((smem_u32(smem) + 1023u) & ~1023u) + (uint32_t)kRoundBarOff;
  }
  __device__ static __forceinline__ uint32_t hand_empty(unsigned char* smem) {
    return hand_full(smem) + 8u;
  }
  /* A helper's two partials (columns col, col + 1 of a fragment) into the owner's buffer at
   * `addr`, their 8 bytes counted on the owner's hand_full `bar` (both shared::cluster
   * addresses, mapa'd to the owner). */
  __device__ static __forceinline__ void hand_store(uint32_t addr, uint32_t bar, float a, float b) {
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::
            "r"(addr),
        "f"(a), "f"(b), "r"(bar)
        : "memory");
  }
  /* The pair's split finalise (GarParams::fin_split): the helper's thread 0, once every thread
   * of the helper has issued its pushes of a round (after a barrier of them), arrives on the
   * owner's hand_empty with release at cluster scope behind a system-scope fence, so that the
   * owner's flag threads, which wait with acquire at cluster scope (wait_pushed), release the
   * helper's pushes with their own (st.release.sys: cumulative). */
  __device__ static __forceinline__ void arrive_pushed(uint32_t bar, bool fence) {
    if (fence) asm volatile("fence.acq_rel.sys;\n" ::: "memory");
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(
                     cluster_map(bar, 0))
                 : "memory");
  }
  __device__ static __forceinline__ void wait_pushed(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n .reg .pred p, q;\n .reg .u32 n;\n mov.u32 n, 0;\n"
        "FCO_PUSHED_WAIT:\n"
        " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
        " @p bra FCO_PUSHED_DONE;\n"
        " add.u32 n, n, 1;\n"
        " setp.lt.u32 q, n, 0x4000000;\n"
        " @q bra FCO_PUSHED_WAIT;\n"
        " trap;\n"
        "FCO_PUSHED_DONE:\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
  }
  /* A consumer thread's fragments d (frag_at's layout) into the peer's pair buffer at `ro`,
   * counted on its hand_full `rb` (both mapa'd): a whole partial, or — with the split
   * finalise, called by the warpgroup whose columns the peer finalises — that half. */
  __device__ static __forceinline__ void hand_frags(uint32_t ro, uint32_t rb, const float* d) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int j = 0; j < BN / 16; ++j)
#pragma unroll
      for (int h = 0; h < 4; h += 2)
        hand_store(ro + 4u * (uint32_t)frag_at(tid, j, h), rb, d[4 * j + h], d[4 * j + h + 1]);
  }
  /* A consumer thread's fragments d into out [kG][64][16] at their places, `add`: plus what the
   * peer stored there (slice 0 + slice 1: float addition commutes, so either block's sum is
   * GroupSlices::sum's bits). */
  __device__ static __forceinline__ void keep_frags(float* out, const float* d, bool add) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int j = 0; j < BN / 16; ++j)
#pragma unroll
      for (int h = 0; h < 4; h += 2) {
        float2* o = reinterpret_cast<float2*>(out + frag_at(tid, j, h));
        float2 v = make_float2(d[4 * j + h], d[4 * j + h + 1]);
        if (add) {
          const float2 in = *o;
          v.x += in.x;
          v.y += in.y;
        }
        *o = v;
      }
  }
  /* One thread of every block of a cluster pair, at the kernel's start, before its phase-1
   * cluster arrival (which publishes the initialisation to the peer block). */
  __device__ static __forceinline__ void init_round_bars(unsigned char* smem) {
    tile::mbar_init(hand_full(smem), 1);
    tile::mbar_init(hand_empty(smem), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }

  /* Rounds (FCO_GEMV_ROUNDS; gemv_allreduce_group.cuh's run_oneshot_rounds). All kThreads
   * threads. The ring runs on across `rounds` groups — columns n0 + r·dn for r = 0 .. rounds −
   * 1, each over the same stages st0 .. st0 + num_st − 1 — so the producer issues group r + 1's
   * stages while the consumers finish group r: no refill and no block barrier between groups.
   * After group r the consumer threads (only they; named barrier 1 of kConsumers threads is
   * theirs) call fin(r, d) with their fragments (frag_at's layout, every wgmma retired); fin
   * must not touch the ring. primed, ns: as run(). Ends with a block barrier, the ring's
   * barriers invalidated. */
  template <typename T, typename Fin>
  __device__ static __forceinline__ void run_rounds(const void* mx, const void* mw, int tx,
                                                    int st0, int num_st, int n0, int dn,
                                                    int rounds,
                                                    unsigned char* smem, int ns, int primed,
                                                    Fin&& fin) {
#if FCO_WGMMA_COMPILED
    const int tid = threadIdx.x;
    const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
    const uint32_t full = pipe + kBarOff, empty = full + kStages * 8;
    ns = ring_stages(ns);
    if (tid == 0) FCO_GTRACE(11);
    if (tid == kConsumers) FCO_GTRACE(12);
    if (tid == 0 && !primed) init_bars(full, empty);
    __syncthreads(); /* (primed: the producer's initialisation too) */
    if (tid >= kConsumers) {
      if (tid == kConsumers) { /* every stage of every round, one counter of stages issued */
        const int total = rounds * num_st;
        int g = primed, kt = primed, n = n0;
        int s = primed == ns ? 0 : primed, ph = primed == ns ? 1 : 0;
        const uint64_t pol = w_policy();
#pragma unroll 1
        for (; g < total; ++g) {
          if (kt == num_st) kt = 0, n += dn;
          if (g >= ns) tile::mbar_wait(empty + 8 * s, (uint32_t)ph ^ 1u);
          issue(mx, mw, tx, pipe, full, s, (st0 + kt) * SK, n, pol);
          ++kt;
          if (++s == ns) s = 0, ph ^= 1;
        }
      }
      __syncwarp(); /* converged before the block barrier below (an aligned one) */
    } else {
      int s = 0, ph = 0;
#pragma unroll 1
      for (int r = 0; r < rounds; ++r) {
        float d[BN / 4];
#pragma unroll
        for (int i = 0; i < BN / 4; ++i) d[i] = 0.f;
        consume<T>(d, pipe, full, empty, num_st, ns, s, ph, true);
        fin(r, d);
      }
    }
    __syncthreads();
    if (tid == 0)
      for (int s = 0; s < kStages; ++s) {
        tile::mbar_inval(full + 8 * s);
        tile::mbar_inval(empty + 8 * s);
      }
#else
    __trap(); /* not built for sm_90a: the launcher must not pick this tile */
#endif
  }
};

}  // namespace gemv
}  // namespace fco

#endif /* FCO_CUDA_GEMV_GROUP_TMA_CUH_ */
