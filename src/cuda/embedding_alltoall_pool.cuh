/*
 * embedding_alltoall_pool.cuh — the lookup every fco_embedding_alltoall kernel shares: pool_tile
 * (pool the bags of a tile into dst) and its device helpers (index loads, Unit: a 16-byte or
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

__device__ __forceinline__ int warp_max(int x) { return __reduce_max_sync(0xffffffffu, (unsigned)x); }

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

/* Pool the ns × nt bags (sample b0 + i, local table t0 + t) of a tile into
 * dst + i · stride + t · D (elements). All threads of the block; no synchronisation inside. */
template <typename T, bool kVec, int kNV, int kB>
__device__ __forceinline__ void pool_tile(const EaParams& p, const EaRank& rk, int t0, int nt,
                                          int64_t b0, int ns, T* dst, int64_t stride,
                                          const ErrCtx& ec) {
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
    int maxit = 0;
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
      maxit = max(maxit, (int)((hi[j] - lo[j] + G - 1) / G));
    }
    const int iters = warp_max(maxit);
    for (int cc = 0; cc < nchunks; ++cc) {
      const int u0 = cc * chunk_units + gl;
      float acc[kB][kNV][kE];
#pragma unroll
      for (int j = 0; j < kB; ++j)
#pragma unroll
        for (int v = 0; v < kNV; ++v)
#pragma unroll
          for (int e = 0; e < kE; ++e) acc[j][v][e] = 0.0f;
      for (int it = 0; it < iters; ++it) {
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
