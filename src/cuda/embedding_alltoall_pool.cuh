/*
 * embedding_alltoall_pool.cuh — the lookup every fco_embedding_alltoall kernel shares: pool_tile
 * (pool the bags of a tile into dst: the kB paths below, or the streaming path, pool_tile_stream,
 * where FCO_EA_STREAM picks it) and its device helpers (index loads, Unit: a 16-byte or
 * one-element piece of a row, bad-data reports through ErrCtx). Included by
 * embedding_alltoall.cu (impl 0's lookup) and embedding_alltoall_fused.cu (impl 1); parameters
 * and tiles: embedding_alltoall.cuh.
 *
 * Pooling: a bag is pooled by a group of G lanes of one warp (G = a power of two ≥ the 16-byte
 *   vectors of a row, ≤ 32). A group takes kB bags at once (kB = 1 or 4; FCO_EA_BAGS, auto: 4
 *   for rows ≤ 512 bytes and mean bag length ≤ 16): it loads their offsets together, then G
 *   indices (and weights) per bag, checks them and broadcasts them by shuffles; each lane then
 *   has kB · kU rows' 16-byte vectors in flight (kU = 8 for kB = 1; 2 for fp32, 1 for 16-bit
 *   types when kB = 4: what fits in 128 registers without spilling) before accumulating in
 *   fp32, each bag in bag order (the same order as the CPU reference, weights by fmaf, mean by
 *   one division). kB = 4 overlaps four bags' offsets → indices → rows chains, which dominate
 *   when bags are short. Loads are never predicated or branched around: a lane with nothing to
 *   read loads g_ea_dummy, and int32/int64 indices load into one register, so ptxas issues a
 *   whole batch before the first use (a conditional load compiled to a load plus a move that
 *   waits for it, and the rows meant to be in flight together went one or two at a time).
 *   Loop bounds are warp-uniform (warp max), so the full-mask shuffles never diverge. A row
 *   that is not a whole number of 16-byte vectors, or a misaligned pointer, takes the element
 *   path (same code, one element per unit).
 *   Bad data: a bag whose offsets decrease or leave [0, num_indices] is pooled as empty; an
 *   index outside [0, rows_t) is skipped; both are recorded in dev->err (first wins):
 *   code FCO_ERR_INVALID_ARGUMENT, peer = global table id, slot = FCO_EA_BAD_INDEX /
 *   FCO_EA_BAD_OFFSETS, want = position (in indices / in offsets), seen = the bad value. Only
 *   offsets[0 .. T_r·B], indices/weights[0 .. num_indices), rows [0, rows_t) and g_ea_dummy
 *   are ever read.
 */
#ifndef FCO_CUDA_EMBEDDING_ALLTOALL_POOL_CUH_
#define FCO_CUDA_EMBEDDING_ALLTOALL_POOL_CUH_

#include "cp_async.cuh"
#include "../ops/embedding_alltoall_plan.h" /* FCO_EA_RING_ALIGN */
#include "embedding_alltoall.cuh"

namespace fco {
namespace ea {

/* ---- small device helpers ---------------------------------------------------------------- */
/* Index loads in two steps: ld_index_raw, an int64 or a zero-extended int32 into one 64-bit
 * register (two predicated loads, no branch), then ix_fix (the sign) once every load of the
 * batch is issued. A branch on the index type, or a conversion right after each load, puts a
 * move that waits for the load before the next one: the loads meant to be in flight together
 * would go one at a time. p: the element, or g_ea_dummy when there is none to read. */
__device__ __forceinline__ int64_t ld_index_raw(const void* p, int idx64) {
  uint64_t v;
  asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t"
      "@q ld.global.nc.u64 %0, [%1];\n\t"
      "@!q ld.global.nc.u32 %0, [%1];\n\t}"
      : "=l"(v)
      : "l"(p), "r"(idx64));
  return (int64_t)v;
}
__device__ __forceinline__ int64_t ix_fix(int64_t x, int idx64) {
  return idx64 ? x : (int64_t)(int32_t)(uint32_t)x;
}
/* A valid address for the loads of lanes that have nothing to load (never written). One per
 * .cu that includes this (internal linkage: no relocatable device code). */
namespace {
__device__ uint4 g_ea_dummy;
}  // namespace
__device__ __forceinline__ const void* ix_addr(const void* base, int idx64, int64_t i, bool in) {
  return in ? (const void*)((const char*)base + (i << (idx64 ? 3 : 2))) : (const void*)&g_ea_dummy;
}

/* One index (or offset) i of base, sign fixed: for loads that are not batched. */
__device__ __forceinline__ int64_t ld_index(const void* base, int idx64, int64_t i) {
  return ix_fix(ld_index_raw(ix_addr(base, idx64, i, true), idx64), idx64);
}

__device__ __forceinline__ int warp_max(int x) { return __reduce_max_sync(0xffffffffu, (unsigned)x); }
/* The same for x ≥ 0 of 64 bits: the high words' max, then the low words of the lanes that
 * hold it. */
__device__ __forceinline__ int64_t warp_max64(int64_t x) {
  const unsigned xh = (unsigned)((uint64_t)x >> 32);
  const unsigned h = __reduce_max_sync(0xffffffffu, xh);
  const unsigned l = __reduce_max_sync(0xffffffffu, xh == h ? (unsigned)x : 0u);
  return (int64_t)(((uint64_t)h << 32) | l);
}

template <typename T>
__device__ __forceinline__ float to_f32(T x);
template <>
__device__ __forceinline__ float to_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_f32<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

/* A unit of a row: 16 bytes (kVec) or one element. */
template <typename T, bool kVec>
struct Unit;
template <typename T>
struct Unit<T, true> {
  using U = uint4;
  static constexpr int kE = Pack<T>::kN;
  /* x = row[u] when pred, else a load of g_ea_dummy (not used). Every lane loads into x's
   * registers unconditionally: with `if (pred) x = __ldg(..)` the compiler loads into
   * temporaries and moves them, and each move waits for its load, so the rows meant to be in
   * flight together went one or two at a time. */
  __device__ static __forceinline__ void load(U& x, const T* row, int u, bool pred) {
    x = __ldg(pred ? (const uint4*)row + u : &g_ea_dummy);
  }
  __device__ static __forceinline__ void unpack(const U& x, float* f) { Pack<T>::unpack(x, f); }
  __device__ static __forceinline__ void store(T* dst, int u, const float* f) {
    st_global_v4((uint4*)dst + u, Pack<T>::pack(f));
  }
};
template <typename T>
struct Unit<T, false> {
  using U = T;
  static constexpr int kE = 1;
  __device__ static __forceinline__ void load(U& x, const T* row, int u, bool pred) {
    if (pred) x = __ldg(row + u);
  }
  __device__ static __forceinline__ void unpack(const U& x, float* f) { f[0] = to_f32<T>(x); }
  __device__ static __forceinline__ void store(T* dst, int u, const float* f) { Pack<T>::store(dst + u, f[0]); }
};

/* The streaming lookups' per-row and per-bag steps (pool_tile_stream below, and the lean
 * kernel, embedding_alltoall_lean.cuh): row unit x (valid, at index position q) into the bag's
 * fp32 sum — fmaf with its weight, else an add — and the bag's store: divided once by its length
 * for mean (skipped rows counted), stored by the lanes that own a unit (on), acc cleared. */
template <typename T>
__device__ __forceinline__ void bag_add(float (&acc)[Pack<T>::kN], const uint4& x,
                                        const float* psw, int64_t q) {
  float f[Pack<T>::kN];
  Pack<T>::unpack(x, f);
  if (psw) {
    const float wt = __ldg(psw + q);
#pragma unroll
    for (int e = 0; e < Pack<T>::kN; ++e) acc[e] = fmaf(wt, f[e], acc[e]);
  } else {
#pragma unroll
    for (int e = 0; e < Pack<T>::kN; ++e) acc[e] += f[e];
  }
}
template <typename T>
__device__ __forceinline__ void bag_store(float (&acc)[Pack<T>::kN], bool mean, int64_t len,
                                          T* dst, int unit, bool on) {
  if (mean && len > 0) {
    const float n = (float)len;
#pragma unroll
    for (int e = 0; e < Pack<T>::kN; ++e) acc[e] = acc[e] / n;
  }
  if (on) st_global_v4((uint4*)dst + unit, Pack<T>::pack(acc));
#pragma unroll
  for (int e = 0; e < Pack<T>::kN; ++e) acc[e] = 0.f;
}

struct ErrCtx {
  fco_async_err_t* err;
  int* done;      /* shared: this block already recorded (limits host-memory atomics) */
  int32_t table0; /* global id of local table 0 */
};

__device__ __forceinline__ void note_bad(const ErrCtx& e, int t, int kind, int64_t pos, int64_t value) {
  if (*(volatile int*)e.done) return;
  *(volatile int*)e.done = 1;
  record_error(e.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_EMBEDDING_ALLTOALL, e.table0 + t, kind,
               (uint64_t)pos, (uint64_t)value);
}

/* ---- the streaming path (kB = 0, FCO_EA_STREAM; rows of ≤ 512 bytes, 16-byte units) ------
 * A lane group of G lanes (one 16-byte unit of the row per lane) takes a run of consecutive bags
 * of one table — consecutive samples, so their index ranges are one contiguous range
 * [off[k0], off[k0 + nb]) — and streams it: chunks of kStreamRows positions, each chunk's rows
 * gathered by cp.async into a per-thread ring of kStreamStages chunks in shared memory, so
 * (kStreamStages − 1) · kStreamRows .. kStreamStages · kStreamRows rows are in flight per lane
 * whatever the bag lengths are (the kB paths keep at most kB · kU, and every bag restarts the
 * offsets → indices → rows chain). Indices are loaded one chunk ahead of their rows' copies;
 * weights are prefetched into L1 with the copies and read when the rows are summed. Rows are
 * consumed in position order, so each bag is still summed in bag order (fmaf with weights, mean
 * by one division): bit-identical to the kB paths and the CPU. A bag is stored when the stream
 * crosses its end offset (empty bags as zeros). A thread reads only ring slots it copied itself:
 * no barrier. Why: bench/probe/ea_gather_probe.cu's variant d2 (this design, run 0174fbf on H200)
 * reached 72–81 % of 4300 GB/s for 128–512-byte rows at L = 8 and 32, where the kB paths reached
 * 42–71 %. This code did not (runs 41b9bcb, be83f48: slower than the kB paths in impl 0's lookup,
 * faster in the fused kernel only for short bags), so FCO_EA_STREAM's default uses it only there
 * (stream_auto, embedding_alltoall.cu; docs/embedding_alltoall_history.md has the numbers).
 * Bad data: the run's offsets are checked first (each within [0, num_indices], none below its
 * predecessor — exactly "every bag valid" of the kB paths); a run with a bad bag is pooled bag
 * by bag (a bad bag stored as zeros and reported as there). An index outside its table is
 * skipped (its copy reads nothing) and reported. */
constexpr int kStreamStages = 3;
constexpr int kStreamRows = 4;
static_assert(kStreamStages * kStreamRows <= 32, "the valid bits of a ring fit one word");
/* Dynamic shared memory of a kB = 0 kernel: the ring [stage][row][thread] of 16-byte units, and
 * the slack that aligns it (ea_ring). */
constexpr int kStreamSmem = kStreamStages * kStreamRows * kThreads * 16 + FCO_EA_RING_ALIGN;
/* Blocks per SM a kB = 0 kernel is compiled for (__launch_bounds__): 2, 128 registers, impl 0's
 * lookup and the fused kernel alike. At 3 (80 registers) the run set-up spilled and the gather
 * probe timed the same code 1.1–1.8× slower than at 2 on every case (run 80deada); at 4 (64) the
 * row loop spilled too. */
constexpr int kStreamMinBlocks = 2;
extern __shared__ __align__(16) uint4 g_ea_ring[];

/* The rings' base: the dynamic shared memory rounded up to FCO_EA_RING_ALIGN (128) bytes, which
 * every launch adds to its dynamic size. Dynamic shared memory starts right after a kernel's
 * static __shared__ variables, 16-byte aligned only: the fused lean kernel's 480 bytes of them
 * put its ring at 96 mod 128, so every 128-byte line a warp copied with cp.async straddled two
 * shared-memory wavefronts — twice the LDGSTS wavefronts and twice the L2 requests (same sectors)
 * of impl 0's lookup, whose ring starts at 0: ncu, run 7bf1d5b-ncu, P = 1 Zipf bf16, 313 vs 235
 * µs. */
__device__ __forceinline__ uint4* ea_ring() {
  const uint32_t a = smem_u32(g_ea_ring);
  return g_ea_ring + (((0u - a) & (uint32_t)(FCO_EA_RING_ALIGN - 1)) >> 4);
}

struct StreamRun {
  const void* idx;  /* rk.indices */
  const float* psw; /* per-sample weights or nullptr */
  const void* off;  /* rk.offsets */
  int idx64;
  int64_t rows;     /* rows of the table */
};

/* Pool the bags k0 .. k0 + nb − 1 (positions [qb, qe) of the indices, bag j ending at off[k0 +
 * j + 1], or at qe when single) into o + j · stride. The G lanes of a group call it together. */
template <typename T>
__device__ __forceinline__ void stream_run(const StreamRun& r, const T* table, int64_t k0, int nb,
                                           int64_t qb, int64_t qe, bool single, T* o,
                                           int64_t stride, int gl, int nunits, bool mean, int tl,
                                           const ErrCtx& ec) {
  using Un = Unit<T, true>;
  constexpr int kE = Un::kE, kS = kStreamStages, kU = kStreamRows;
  uint4* const g_ring = ea_ring();
  const uint32_t ring = smem_u32(g_ring + threadIdx.x);
  const bool lane_on = gl < nunits;
  const int64_t nch = (qe - qb + kU - 1) / kU;
  /* bag state: cur, its start and end position */
  int cur = 0;
  int64_t bstart = qb;
  int64_t bend = single ? qe : ld_index(r.off, r.idx64, k0 + 1);
  float acc[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) acc[e] = 0.f;
  auto flush = [&]() {
    bag_store<T>(acc, mean, bend - bstart, o + (int64_t)cur * stride, gl, lane_on);
    ++cur;
    bstart = bend;
    if (cur < nb)
      bend = single || cur + 1 == nb ? qe : ld_index(r.off, r.idx64, k0 + cur + 1);
  };
  /* One chunk ahead: the raw indices of chunk i. */
  int64_t nx[kU];
  auto load_ix = [&](int64_t i) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t q = qb + i * kU + u;
      nx[u] = ld_index_raw(ix_addr(r.idx, r.idx64, q, q < qe), r.idx64);
    }
  };
  /* Issue chunk i's copies (rows from nx) into stage s, keep its valid bits, prefetch its
   * weights into L1 (read when the rows are consumed); always commit (the wait counts groups). */
  uint32_t okb = 0; /* bit s·kU + u: row u of stage s is valid */
  auto issue = [&](int64_t i, int s) {
    uint32_t okc = 0;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t q = qb + i * kU + u;
      const bool in = q < qe;
      const int64_t ix = ix_fix(nx[u], r.idx64);
      const bool ok = in && (uint64_t)ix < (uint64_t)r.rows; /* 0 <= ix < rows */
      if (in && !ok && gl == 0) note_bad(ec, tl, FCO_EA_BAD_INDEX, q, ix);
      okc |= (uint32_t)ok << u;
      const bool cp = ok && lane_on;
      const uint32_t slot = (uint32_t)((s * kU + u) * kThreads);
      cp_async16(ring + slot * 16,
                 cp ? (const void*)((const uint4*)(table + ix * (int64_t)nunits * kE) + gl)
                    : (const void*)&g_ea_dummy,
                 cp ? 16 : 0);
      if (r.psw && ok) asm volatile("prefetch.global.L1 [%0];" ::"l"(r.psw + q)); /* its weight */
    }
    okb = (okb & ~(((1u << kU) - 1) << (s * kU))) | okc << (s * kU);
    cp_async_commit();
  };
  load_ix(0);
#pragma unroll
  for (int s = 0; s < kS - 1; ++s) {
    issue(s, s);
    load_ix(s + 1);
  }
  auto take = [&](const uint4& x, int64_t q) { bag_add<T>(acc, x, r.psw, q); };
  /* Chunk i is in stage i mod kS. A chunk inside one bag (no bag ends in it: most, for L > kU)
   * is summed unrolled, its kU ring reads issued together; a chunk that crosses bag ends goes row
   * by row through a rolled loop, so flush (its division for mean) is inlined once, not per row.
   * Slots and valid bits are addressed at run time. */
  int s = 0, s_issue = kS - 1;
#pragma unroll 1
  for (int64_t i = 0; i < nch; ++i) {
    issue(i + kS - 1, s_issue);
    load_ix(i + kS);
    cp_async_wait<kS - 1>(); /* chunk i (stage s) landed */
    const int64_t q0 = qb + i * kU;
    const int nq = (int)min((int64_t)kU, qe - q0);
    const uint32_t okc = okb >> (s * kU);
    const uint4* slot0 = g_ring + s * kU * kThreads + threadIdx.x;
    if (q0 + nq <= bend) {
      uint4 x[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) x[u] = slot0[u * kThreads];
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (u < nq && (okc >> u & 1u)) take(x[u], q0 + u);
    } else {
#pragma unroll 1
      for (int u = 0; u < nq; ++u) {
        while (q0 + u >= bend) flush();
        if (okc >> u & 1u) take(slot0[u * kThreads], q0 + u);
      }
    }
    s = s + 1 == kS ? 0 : s + 1;
    s_issue = s_issue + 1 == kS ? 0 : s_issue + 1;
  }
  cp_async_wait<0>();
  while (cur < nb) flush(); /* the last bag, trailing empty ones */
}

/* pool_tile's streaming path: the tile's nt × ns bags as runs of one table (see above); run w
 * = group, group + groups, ...: table t = w mod nt, samples [(w / nt) · per, +per). */
template <typename T>
__device__ __forceinline__ void pool_tile_stream(const EaParams& p, const EaRank& rk, int t0,
                                                 int nt, int64_t b0, int ns, T* dst,
                                                 int64_t stride, const ErrCtx& ec) {
  constexpr int kE = Unit<T, true>::kE;
  const int G = p.lanes, nunits = p.D / kE;
  const int lane = threadIdx.x & 31;
  const int groups = kWarps * (32 / G);
  const int group = (threadIdx.x >> 5) * (32 / G) + lane / G, gl = lane & (G - 1);
  const int gpt = max(1, groups / nt); /* runs per table */
  const int per = (ns + gpt - 1) / gpt; /* bags per run */
  const int64_t nidx = rk.num_indices;
  StreamRun r{rk.indices, rk.psw, rk.offsets, rk.idx64, 0};
  for (int w = group; w < nt * gpt; w += groups) {
    const int t = w % nt, i0 = (w / nt) * per;
    const int nb = min(per, ns - i0);
    if (nb <= 0) continue;
    const int64_t row0 = p.row_base[rk.row_base0 + t0 + t];
    r.rows = p.row_base[rk.row_base0 + t0 + t + 1] - row0;
    const T* table = (const T*)rk.weight + row0 * (int64_t)p.D;
    const int64_t k0 = (int64_t)(t0 + t) * p.B + b0 + i0;
    T* o = dst + (int64_t)i0 * stride + (int64_t)t * p.D;
    /* The run's offsets: all within [0, nidx] and non-decreasing? (L1 after the first.) */
    int64_t prev = ld_index(rk.offsets, rk.idx64, k0);
    const int64_t qb = prev;
    bool good = prev >= 0 && prev <= nidx;
    for (int j = 1; j <= nb; ++j) {
      const int64_t x = ld_index(rk.offsets, rk.idx64, k0 + j);
      good = good && x >= prev && x <= nidx;
      prev = x;
    }
    /* Good: one run of nb bags. Else bag by bag, a bad bag empty (one call site: registers). */
    for (int j = 0; j < (good ? 1 : nb); ++j) {
      int64_t lo = qb, hi = prev;
      if (!good) {
        lo = ld_index(rk.offsets, rk.idx64, k0 + j);
        hi = ld_index(rk.offsets, rk.idx64, k0 + j + 1);
        if (lo < 0 || hi < lo || hi > nidx) {
          if (gl == 0) note_bad(ec, t0 + t, FCO_EA_BAD_OFFSETS, k0 + j, hi);
          lo = hi = 0;
        }
      }
      stream_run<T>(r, table, k0 + j, good ? nb : 1, lo, hi, !good, o + (int64_t)j * stride,
                    stride, gl, nunits, p.mean, t0 + t, ec);
    }
  }
}

/* pool_tile's kB paths (kB bags per lane group): pool the ns × nt bags (sample b0 + i, local
 * table t0 + t) of a tile into dst + i · stride + t · D (elements). All threads of the block; no
 * synchronisation inside. */
template <typename T, bool kVec, int kNV, int kB>
__device__ __forceinline__ void pool_tile_bags(const EaParams& p, const EaRank& rk, int t0,
                                               int nt, int64_t b0, int ns, T* dst,
                                               int64_t stride, const ErrCtx& ec) {
  using Un = Unit<T, kVec>;
  constexpr int kE = Un::kE;
  /* Rows in flight per lane: kB · kU (as many as fit in 128 registers without spilling in the
   * loops below: check ptxas / SASS when changing). */
  constexpr int kU = kB > 1 ? (kE == 4 ? 2 : 1) : (kNV == 1 ? 8 : 2);
  const int D = p.D, G = p.lanes, nunits = D / kE;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gl = lane & (G - 1), gi = lane / G;
  const int per_step = kWarps * (32 / G);
  const int nbags = ns * nt;
  const int steps = (nbags + per_step - 1) / per_step;
  const int64_t nidx = rk.num_indices;
  const int chunk_units = G * kNV;
  const int nchunks = (nunits + chunk_units - 1) / chunk_units;
  const int bag0 = warp * (32 / G) + gi;
  for (int s0 = 0; s0 < steps; s0 += kB) {
    int64_t lo[kB], hi[kB], rows[kB];
    const T* table[kB];
    /* Offsets of the kB bags first (all loads in flight), then their checks. */
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      const int bag = (s0 + j) * per_step + bag0;
      const bool have = bag < nbags;
      const int i = have ? bag / nt : 0;
      const int64_t k = (int64_t)(t0 + bag - i * nt) * p.B + b0 + i;
      lo[j] = ld_index_raw(ix_addr(rk.offsets, rk.idx64, k, have), rk.idx64);
      hi[j] = ld_index_raw(ix_addr(rk.offsets, rk.idx64, k + 1, have), rk.idx64);
    }
    int64_t maxit = 0; /* 64-bit: a bag may hold ≥ 2^31 · G indices (num_indices ≤ 2^40) */
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      const int bag = (s0 + j) * per_step + bag0;
      const int i = bag < nbags ? bag / nt : 0;
      const int t = t0 + (bag < nbags ? bag - i * nt : 0);
      lo[j] = bag < nbags ? ix_fix(lo[j], rk.idx64) : 0;
      hi[j] = bag < nbags ? ix_fix(hi[j], rk.idx64) : 0;
      if (lo[j] < 0 || hi[j] < lo[j] || hi[j] > nidx) {
        if (gl == 0) note_bad(ec, t, FCO_EA_BAD_OFFSETS, (int64_t)t * p.B + b0 + i, hi[j]);
        lo[j] = hi[j] = 0;
      }
      const int64_t row0 = p.row_base[rk.row_base0 + t];
      rows[j] = p.row_base[rk.row_base0 + t + 1] - row0;
      table[j] = (const T*)rk.weight + row0 * (int64_t)D;
      maxit = max(maxit, (hi[j] - lo[j] + G - 1) / G);
    }
    const int64_t iters = warp_max64(maxit);
    for (int cc = 0; cc < nchunks; ++cc) {
      const int u0 = cc * chunk_units + gl;
      float acc[kB][kNV][kE];
#pragma unroll
      for (int j = 0; j < kB; ++j)
#pragma unroll
        for (int v = 0; v < kNV; ++v)
#pragma unroll
          for (int e = 0; e < kE; ++e) acc[j][v][e] = 0.0f;
      for (int64_t it = 0; it < iters; ++it) {
        int64_t idx[kB];
        float w[kB];
        bool ok[kB];
#pragma unroll
        for (int j = 0; j < kB; ++j) {
          const int64_t pos = lo[j] + (int64_t)it * G + gl;
          const bool in = pos < hi[j];
          idx[j] = ld_index_raw(ix_addr(rk.indices, rk.idx64, pos, in), rk.idx64);
          /* w is used only with weights, and only where in */
          w[j] = __ldg(rk.psw && in ? rk.psw + pos : (const float*)&g_ea_dummy);
        }
        int cnt = 0;
#pragma unroll
        for (int j = 0; j < kB; ++j) {
          const int64_t pos = lo[j] + (int64_t)it * G + gl;
          const bool in = pos < hi[j];
          idx[j] = ix_fix(idx[j], rk.idx64);
          ok[j] = in && idx[j] >= 0 && idx[j] < rows[j];
          if (in && !ok[j] && cc == 0) {
            const int bag = (s0 + j) * per_step + bag0;
            note_bad(ec, t0 + bag % nt, FCO_EA_BAD_INDEX, pos, idx[j]);
          }
          cnt = max(cnt, (int)max((int64_t)0, min((int64_t)G, hi[j] - (lo[j] + (int64_t)it * G))));
        }
        const int nq = warp_max(cnt);
        for (int q0 = 0; q0 < nq; q0 += kU) {
          typename Un::U x[kB][kU][kNV];
          float wq[kB][kU];
          bool okq[kB][kU];
#pragma unroll
          for (int j = 0; j < kB; ++j)
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              const int q = q0 + u < G ? q0 + u : G - 1;
              const int64_t iq = __shfl_sync(0xffffffffu, (long long)idx[j], q, G);
              wq[j][u] = __shfl_sync(0xffffffffu, w[j], q, G);
              okq[j][u] = __shfl_sync(0xffffffffu, (int)ok[j], q, G) && q0 + u < nq;
              const T* row = table[j] + iq * (int64_t)D;
#pragma unroll
              for (int v = 0; v < kNV; ++v) {
                const int un = u0 + v * G;
                Un::load(x[j][u][v], row, un, okq[j][u] && un < nunits);
              }
            }
#pragma unroll
          for (int j = 0; j < kB; ++j)
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              if (!okq[j][u]) continue;
#pragma unroll
              for (int v = 0; v < kNV; ++v) {
                if (u0 + v * G >= nunits) continue;
                float f[kE];
                Un::unpack(x[j][u][v], f);
                if (rk.psw) {
#pragma unroll
                  for (int e = 0; e < kE; ++e) acc[j][v][e] = fmaf(wq[j][u], f[e], acc[j][v][e]);
                } else {
#pragma unroll
                  for (int e = 0; e < kE; ++e) acc[j][v][e] += f[e];
                }
              }
            }
        }
      }
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const int bag = (s0 + j) * per_step + bag0;
        if (bag >= nbags) continue;
        const int64_t len = hi[j] - lo[j];
        if (p.mean && len > 0) {
          const float n = (float)len;
#pragma unroll
          for (int v = 0; v < kNV; ++v)
#pragma unroll
            for (int e = 0; e < kE; ++e) acc[j][v][e] = acc[j][v][e] / n;
        }
        const int i = bag / nt;
        T* o = dst + (int64_t)i * stride + (int64_t)(bag - i * nt) * D;
#pragma unroll
        for (int v = 0; v < kNV; ++v)
          if (u0 + v * G < nunits) Un::store(o, u0 + v * G, acc[j][v]);
      }
    }
  }
}

/* Pool the ns × nt bags (sample b0 + i, local table t0 + t) of a tile into
 * dst + i · stride + t · D (elements): kB = 0 the streaming path, else kB bags per lane group. */
template <typename T, bool kVec, int kNV, int kB>
__device__ __forceinline__ void pool_tile(const EaParams& p, const EaRank& rk, int t0, int nt,
                                          int64_t b0, int ns, T* dst, int64_t stride,
                                          const ErrCtx& ec) {
  if constexpr (kB == 0) {
    static_assert(kVec && kNV == 1, "the streaming path: 16-byte units, rows of <= 512 bytes");
    pool_tile_stream<T>(p, rk, t0, nt, b0, ns, dst, stride, ec);
  } else {
    pool_tile_bags<T, kVec, kNV, kB>(p, rk, t0, nt, b0, ns, dst, stride, ec);
  }
}

/* impl 0's lookup (ea_kernel_lookup's whole body; also what bench/probe/ea_gather_probe.cu
 * times): this block's tiles part, part + bpr, ... of its local rank, pooled [B, T_r, D] into
 * ws[0, S) (P > 1) or out (P == 1). */
template <typename T, bool kVec, int kNV, int kB>
__device__ __forceinline__ void lookup_tiles(const EaParams& p) {
  __shared__ int err_done;
  const uint32_t li = blockIdx.x / p.blocks_per_rank;
  const uint32_t part = blockIdx.x - li * p.blocks_per_rank;
  const EaRank& rk = p.r[li];
  if (threadIdx.x == 0) err_done = 0;
  __syncthreads();
  const int me = rk.rank;
  const ErrCtx ec{rk.dev->err, &err_done, p.toff[me]};
  const int Tme = ea_tables(p, me), ntg = ea_tgroups(p, me);
  const int tile_t = p.tile_t[me], tile_s = p.tile_s[me];
  T* base = (T*)(p.nranks > 1 ? rk.ws : rk.out);
  const int64_t ntask = ea_chunks(p, me, p.B) * ntg;
  for (int64_t task = part; task < ntask; task += p.blocks_per_rank) {
    const int64_t c = task / ntg;
    const int t0 = (int)(task - c * ntg) * tile_t;
    const int64_t b0 = c * tile_s;
    const int nt = min(tile_t, Tme - t0);
    const int ns = (int)min((int64_t)tile_s, p.B - b0);
    pool_tile<T, kVec, kNV, kB>(p, rk, t0, nt, b0, ns, base + (b0 * Tme + t0) * (int64_t)p.D,
                                (int64_t)Tme * p.D, ec);
  }
}

}  // namespace ea
}  // namespace fco

#endif /* FCO_CUDA_EMBEDDING_ALLTOALL_POOL_CUH_ */
