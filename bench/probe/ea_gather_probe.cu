/*
 * ea_gather_probe.cu — the physical ceiling of random embedding-row gathers on this GPU (issue 4)
 *
 * One GPU, no communication. Is the pooled lookup (impl 0's ea_kernel_lookup: 45 % of 4300 GB/s
 * at 128-byte rows, 14 % at L = 1, 17–29 % for 32–64-byte rows in run a70f468) limited by our
 * kernel or by the memory system? Per row size (bf16 D = 16..256: 32..512 bytes) and bag length
 * L it times, with CUDA events (median of reps, index sets rotated), on 8 tables × 1M rows
 * (and 500k), uniform random indices (and one Zipf(1) case, fco-bench's formula), int64
 * indices, CSR offsets, sum pooling, out [B][T][D] bf16 written once; B such that every case
 * gathers 256 MiB of rows:
 *   seq        a contiguous 2 GiB read with 16-byte loads (calibrates "4300 GB/s")
 *   (a) read   every listed row read once with 16-byte loads, U rows in flight per lane
 *              (U·32/G per warp, G = lanes per row), nothing pooled, a checksum per warp step:
 *              the ceiling the issue's "≥ 75 % of HBM bandwidth" target must be compared with
 *   (b) pool   (a)'s loads, fixed L (no offsets), rows summed in bag order, out written
 *   (c) fco    fco's own lookup (lookup_tiles, the body of ea_kernel_lookup, and pool_tile:
 *              src/cuda/embedding_alltoall_pool.cuh, included), tiling and variant as
 *              embedding_alltoall.cu's fill_params / pick_variant (repeated here), grid as
 *              embedding_alltoall.cuh's launch(): min(tiles, co-resident blocks); a "#" line
 *              after each (c) row gives the blocks and tiles per block (the last wave's tail).
 *              kB = 4 (FCO_EA_BAGS auto for L ≤ 16) and kB = 1, __launch_bounds__(256, 2);
 *              "kB=0 stream @N": the library's streaming path (kB = 0, pool_tile_stream /
 *              stream_run, what FCO_EA_STREAM=1 runs: each lane group streams a run of
 *              consecutive bags of one table of its tile — 4 bags with this tiling — in chunks
 *              of kStreamRows rows copied by cp.async into a per-thread ring of kStreamStages
 *              chunks, kStreamSmem bytes of dynamic shared memory: (d2) inside the library,
 *              with its tiling, int64 positions and bad-data checks), compiled and launched as
 *              ea_kernel_lookup is: __launch_bounds__(256, kStreamMinBlocks) = @2 (both kernels'
 *              bound since run 80deada), the smem opt-in (cudaFuncSetAttribute), occupancy with
 *              that smem; @3: the same code at 3 blocks/SM (impl 0's bound before that run: 80
 *              registers), to tell occupancy from code
 *   (d1) stream  CSR streaming: a warp takes a tile of W bags of one table, stages their
 *              offsets in shared memory; each lane group streams its bags' contiguous index
 *              range in chunks of U rows, all U row loads issued before any accumulation and
 *              the next chunk's indices loaded meanwhile, flushing each bag (in bag order) when
 *              a row crosses its end offset: U rows in flight per lane whatever L is
 *   (d2) cp.async  (d1) with the rows gathered by 16-byte cp.async into a per-thread ring of S
 *              stages × U rows in shared memory: (S−1)·U..S·U rows in flight without registers
 *   (e) lean   (d2)'s design (W as d2's, S = 3, U = 4, 32-bit tile positions, the tile's offsets
 *              staged once) with the library's semantics: per-sample weights, mean, int32 or
 *              int64 indices, bad indices skipped (valid bit per ring slot) and counted, offsets
 *              checked while staged (a tile with a bad bag pooled bag by bag), __launch_bounds__
 *              (256, 4): src/cuda/embedding_alltoall_lean.cuh (the kernel; the library runs it as impl 0's lookup with FCO_EA_STREAM=2).
 *              Rows: the unweighted sum (int64, checked as the others), and "w+mean": weights
 *              wq(q)/2 ∈ {1/2, 1, 2} and mean pooling (all GB/s adds 4 B/row of weights). Once per
 *              table set (its last L), untimed "#" lines: int32 indices and offsets (weights +
 *              mean), and bad data (weights + mean; bad indices in good tiles, in a tile with a
 *              bad bag, in a bad bag — not read; offsets that decrease, go negative, pass N),
 *              checked against cpu_ref_gen including the two counters.
 * Check (#wrong), exact: table element (row g, column d) = (a(g) + c(d)) / 64 with a, c integers
 * in [−64, 63] (hashes), exact in bf16. Every partial sum of ≤ 32 such values is a multiple of
 * 2^−6 below 2^6 in magnitude: exact in fp32 in any order, so the fp32 bag sum equals the CPU's
 * integer sum / 64 and its one rounding to bf16 (round-to-nearest-even on both sides) is
 * bit-identical: tolerance 0, every output element compared (bitwise, on the GPU, against the
 * CPU-computed reference uploaded). (a): per warp step, the wrapping uint32 sum of every 32-bit
 * word of its rows, against the CPU's. (c) also fails a row on an error the lookup records, (e)
 * on a bad index or bag it counts in good data. (e) w+mean, exact too: weights are powers of two
 * (products exact), so a bag's fp32 sum is a multiple of 2^−7 below 2^17 in magnitude (bags of ≤
 * 2^14 rows): exact in any order, equal to the CPU's integer sum / 128; the mean's one division
 * (by a power of two here, by 2L + 3 in the bad-data check) is correctly rounded on both sides.
 *
 * Registers (nvcc 13.0 -Xptxas -v, sm_90; spills: bytes stored / loaded): seq 32; (a) U = 1, 2,
 * 4, 8, 16: 22, 26, 30, 47, 80; (b) U = 4, 8, 16: 51, 75, 126; (c) kB = 1: 127; kB = 4: 128,
 * 136 / 128 spilled (80-byte stack); kB = 0 @3: 80, 340 / 356 spilled (280-byte stack); kB = 0
 * @2: 128, 88 / 112 spilled (72-byte stack) — the (c) kernels are the library's own:
 * ea_kernel_lookup<bf16, true, 1, 4 / 0> compile to the same counts; (d1) U = 8, 16: 97, 152;
 * (d2) both 64, no spills; (e) int64 / int32 indices: 64 / 62 at (256, 4), no spills (stack 0).
 * In SASS, kB = 0's chunk loop (issue, wait, sum; about 890 instructions with the rolled flush
 * path, (d2)'s about 430, (e)'s about 590, 205 of them the rolled path with its eight divisions
 * for mean; without weights (e) branches around the weight copies and syncs) has no spill at
 * either bound: @3 spills in the per-run code around it (the run's offset check, stream_run's
 * set-up).
 *
 * Build and run (tests/gpu/run.sh does, with FCO_GPU_PROBE=1; argument: reps, default 5; exits
 * 77 when there is no GPU):
 *   nvcc -O3 -std=c++17 -arch=sm_90 -Isrc/cuda -Iinclude bench/probe/ea_gather_probe.cu \
 *     -o build/probe/ea_gather_probe
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "embedding_alltoall_pool.cuh"
#include "embedding_alltoall_lean.cuh"
#include "probe.h"

using bf16 = __nv_bfloat16;
using namespace fco;
using namespace fco::ea;

constexpr int kT = 8;                       /* tables */
constexpr int64_t kGatherBytes = 256ll << 20; /* rows gathered per case */
constexpr int kSets = 3;                    /* index sets rotated over the reps */
constexpr int kMaxRowBytes = 512;
constexpr int kMaxTileBags = 1024;          /* (d) warp tile, bags */

/* ---- data: values, indices (host and device) ------------------------------------------- */
__host__ __device__ inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
__host__ __device__ inline uint64_t mix64(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__host__ __device__ inline int val_a(int64_t g) {
  return (int)(mix32((uint32_t)g ^ mix32((uint32_t)(g >> 32) + 0x51ed27u)) & 127u) - 64;
}
__host__ __device__ inline int val_c(int d) { return (int)(mix32((uint32_t)d + 0x12345u) & 127u) - 64; }

/* fp32 → bf16 bits, round to nearest even (finite inputs): as __float2bfloat16_rn. */
static inline uint16_t bf16_rne(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

__global__ void init_table(bf16* w, int64_t nrows, int D) {
  const int nv = D / 8;
  const int64_t n = nrows * nv;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t g = e / nv;
    const int d0 = (int)(e - g * nv) * 8;
    const int a = val_a(g);
    __align__(16) bf16 v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __float2bfloat16_rn((float)(a + val_c(d0 + i)) * (1.0f / 64.0f));
    *(uint4*)(w + g * D + d0) = *(const uint4*)v;
  }
}

/* Table-local row ids, [T][B·L] table-major (fco's layout for sum pooling with offsets k·L). */
__global__ void gen_indices(int64_t* idx, int64_t n, int64_t rows, uint64_t seed, int zipf) {
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n;
       p += (int64_t)gridDim.x * blockDim.x) {
    const uint64_t h = mix64((uint64_t)p ^ (seed << 40));
    int64_t x;
    if (!zipf) {
      x = (int64_t)(h % (uint64_t)rows);
    } else { /* Zipf(1) by inversion, hot rows scattered by a bijection (as fco-bench) */
      const double u = (double)(h >> 11) / 9007199254740992.0;
      x = (int64_t)floor(exp(u * log((double)rows + 1.0))) - 1;
      x = x < 0 ? 0 : x >= rows ? rows - 1 : x;
      const uint64_t m = 1000003ull;
      if (rows % (int64_t)m) x = (int64_t)(((uint64_t)x * m) % (uint64_t)rows);
    }
    idx[p] = x;
  }
}

__global__ void gen_offsets(int64_t* off, int64_t nbags, int L) {
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k <= nbags;
       k += (int64_t)gridDim.x * blockDim.x)
    off[k] = k * L;
}

/* Per-sample weight of position q for the weighted rows: wq(q) / 2 with wq(q) in {1, 2, 4}
 * (powers of two: every product with a table value is exact). */
__host__ __device__ inline int wq(int64_t q) {
  return 1 << (int)(mix64((uint64_t)q ^ (0x77e1ull << 44)) % 3u);
}
__global__ void gen_weights(float* w, int64_t n) {
  for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < n;
       q += (int64_t)gridDim.x * blockDim.x)
    w[q] = 0.5f * (float)wq(q);
}
/* int64 → int32 copy (the (e) int32 check's indices and offsets). */
__global__ void narrow_i32(const int64_t* a, int32_t* b, int64_t n) {
  for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < n;
       q += (int64_t)gridDim.x * blockDim.x)
    b[q] = (int32_t)a[q];
}

/* Bitwise compare of n16 16-byte words; mismatching bf16 elements added to *wrong. */
__global__ void compare(const uint4* a, const uint4* b, int64_t n16, unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
       i += (int64_t)gridDim.x * blockDim.x) {
    const uint4 x = a[i], y = b[i];
    const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      bad += ((xs[j] ^ ys[j]) & 0xffffu ? 1 : 0) + ((xs[j] ^ ys[j]) >> 16 ? 1 : 0);
  }
  if (bad) atomicAdd(wrong, bad);
}

/* ---- seq: contiguous read ----------------------------------------------------------------- */
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__global__ void __launch_bounds__(256) seq_read(const uint4* p, int64_t n16, unsigned* sink) {
  constexpr int kU = 8;
  unsigned acc = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kU - 1) * stride < n16; i += kU * stride) {
    uint4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) v[u] = ld_stream(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kU; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = ld_stream(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc; /* keeps the loads; practically never stores */
}

/* ---- (a) read / (b) pool: the flat row list --------------------------------------------- */
struct GP {
  const bf16* w;
  const int64_t* idx; /* [T][B·L] */
  bf16* out;          /* [B][T][D] (b) */
  uint32_t* chk;      /* per warp step (a) */
  int64_t rows;       /* per table */
  int D, lg_G;        /* G = D·2/16 lanes per row */
  int L, lg_L, lg_B, lg_NT; /* NT = B·L positions per table; all powers of two */
  int64_t N;          /* positions (rows gathered) */
  uint32_t zero;      /* 0, unknown to the compiler (pin_loads) */
};
__device__ __forceinline__ void unpack8(const uint4& x, float* f) { Pack<bf16>::unpack(x, f); }
/* Makes every use of the batch's rows depend on its last load (values unchanged: zero is 0 at
 * run time), so ptxas cannot sink loads below the first use: without it, (a) compiled to 32
 * registers with about two rows in flight whatever U, and (b) U = 8 unpacked row 0 before
 * issuing rows 1..7. With the loads in program order (checked in SASS), all U are in flight. */
template <int kU>
__device__ __forceinline__ void pin_loads(uint4 (&x)[kU], uint32_t zero) {
  uint32_t z = x[0].w;
#pragma unroll
  for (int u = 1; u < kU; ++u) z &= x[u].w;
  z &= zero;
#pragma unroll
  for (int u = 0; u < kU; ++u) x[u].x |= z, x[u].y |= z, x[u].z |= z, x[u].w |= z;
}

/* Warp step: RW = 32/G lane groups; group r takes run = (a) U, (b) max(U, L) consecutive
 * positions, U at a time: U index loads, then U row loads, then (b) accumulation in position
 * order, the bag stored after its last row. */
template <int kU, int kPool>
__global__ void __launch_bounds__(256) gather_flat(const GP p) {
  const int lane = threadIdx.x & 31;
  const int G = 1 << p.lg_G, gl = lane & (G - 1), r = lane >> p.lg_G, RW = 32 >> p.lg_G;
  const int run = kPool ? max(kU, p.L) : kU;
  const int64_t per_step = (int64_t)RW * run;
  const int64_t nsteps = p.N / per_step;
  const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const int64_t B = (int64_t)1 << p.lg_B;
  for (int64_t s = gw; s < nsteps; s += nw) {
    const int64_t p0 = s * per_step + (int64_t)r * run;
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.f;
    uint32_t cs = 0;
    for (int c = 0; c < run; c += kU) {
      int64_t ix[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) ix[u] = __ldg(p.idx + p0 + c + u);
      uint4 x[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t t = (p0 + c + u) >> p.lg_NT;
        x[u] = __ldg((const uint4*)(p.w + (t * p.rows + ix[u]) * p.D) + gl);
      }
      pin_loads<kU>(x, p.zero);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if constexpr (!kPool) {
          cs += x[u].x + x[u].y + x[u].z + x[u].w;
        } else {
          float f[8];
          unpack8(x[u], f);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[e] += f[e];
          const int64_t pos = p0 + c + u;
          if (((pos + 1) & (p.L - 1)) == 0) {
            const int64_t k = pos >> p.lg_L, t = k >> p.lg_B, b = k & (B - 1);
            st_global_v4((uint4*)(p.out + (b * kT + t) * p.D) + gl, Pack<bf16>::pack(acc));
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[e] = 0.f;
          }
        }
      }
    }
    if constexpr (!kPool) {
      cs = __reduce_add_sync(0xffffffffu, cs);
      if (lane == 0) p.chk[s] = cs;
    }
  }
}

/* ---- (c) fco's lookup: the library's lookup_tiles (ea_kernel_lookup's body) ---------------- */
/* kMinBlocks: __launch_bounds__'s blocks per SM, as ea_kernel_lookup (2 for kB = 1, 4;
 * kStreamMinBlocks = 2 for kB = 0) or, for kB = 0, 3 (the bound run 80deada measured). */
template <typename T, bool kVec, int kNV, int kB, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) fco_lookup(const __grid_constant__ EaParams p) {
  lookup_tiles<T, kVec, kNV, kB>(p);
}

/* ---- (d) CSR streaming ----------------------------------------------------------------- */
struct SP {
  const bf16* w;
  const int64_t* idx;
  const int64_t* off; /* [T·B + 1] */
  bf16* out;
  int64_t rows, B;
  int D, lg_G;
  int W;              /* bags per warp tile, a multiple of RW, ≤ kMaxTileBags */
  uint32_t zero;      /* 0 (pin_loads) */
};
namespace {
__device__ int64_t g_dummy_idx;
}
/* Tile j: table t = j / tpt, bags [t·B + (j mod tpt)·W, +nb). Offsets of the tile relative to
 * its first, int32 (a tile spans < 2^31 positions here), in so[0..nb]. Lane group r owns the
 * tile's bags [r·W/RW, (r+1)·W/RW) ∩ [0, nb): positions [so[kb], so[ke]) of idx, contiguous. */
struct TileCtx {
  int64_t t, kfirst, pfirst; /* table, first bag (global k), its first position */
  int kb, ke;                /* the group's bags, tile-local */
};
__device__ __forceinline__ TileCtx stage_tile(const SP& p, int64_t j, int64_t tpt, int* so, int lane,
                                              int r, int RW) {
  TileCtx c;
  c.t = j / tpt;
  const int64_t b0 = (j - c.t * tpt) * p.W;
  const int nb = (int)min((int64_t)p.W, p.B - b0);
  c.kfirst = c.t * p.B + b0;
  __syncwarp();
  c.pfirst = __ldg(p.off + c.kfirst);
  for (int i = lane; i <= nb; i += 32) so[i] = (int)(__ldg(p.off + c.kfirst + i) - c.pfirst);
  __syncwarp();
  const int bpg = p.W / RW;
  c.kb = min(r * bpg, nb);
  c.ke = min(c.kb + bpg, nb);
  return c;
}
/* Store the pooled bag kl (tile-local) and clear acc. */
__device__ __forceinline__ void flush_bag(const SP& p, const TileCtx& c, int kl, int gl, float* acc) {
  const int64_t b = c.kfirst + kl - c.t * p.B;
  st_global_v4((uint4*)(p.out + (b * kT + c.t) * p.D) + gl, Pack<bf16>::pack(acc));
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] = 0.f;
}
/* Row at (tile-local) position q with index ix: accumulate it into its bag, flushing every bag
 * that ends at or before q first (empty bags flushed as zeros). */
__device__ __forceinline__ void take_row(const SP& p, const TileCtx& c, const int* so, int q,
                                         const uint4& x, bool ok, int gl, int& cur, int& next_end,
                                         float* acc) {
  while (q >= next_end) {
    flush_bag(p, c, cur, gl, acc);
    ++cur;
    next_end = so[cur + 1];
  }
  if (ok) {
    float f[8];
    unpack8(x, f);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] += f[e];
  }
}

template <int kU>
__global__ void __launch_bounds__(256) stream_regs(const SP p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int* so = (int*)smem + warp * (p.W + 1);
  const int G = 1 << p.lg_G, gl = lane & (G - 1), r = lane >> p.lg_G, RW = 32 >> p.lg_G;
  const int64_t tpt = (p.B + p.W - 1) / p.W, ntiles = tpt * kT;
  const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t j = gw; j < ntiles; j += nw) {
    const TileCtx c = stage_tile(p, j, tpt, so, lane, r, RW);
    const int qb = so[c.kb], qe = so[c.ke];
    const int64_t* ip = p.idx + c.pfirst;
    const bf16* tb = p.w + c.t * p.rows * p.D;
    int cur = c.kb, next_end = c.kb < c.ke ? so[c.kb + 1] : qe;
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.f;
    int64_t nx[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) nx[u] = __ldg(qb + u < qe ? ip + qb + u : &g_dummy_idx);
    for (int q0 = qb; q0 < qe; q0 += kU) {
      uint4 x[kU];
      bool ok[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        ok[u] = q0 + u < qe && nx[u] >= 0 && nx[u] < p.rows;
        x[u] = __ldg(ok[u] ? (const uint4*)(tb + nx[u] * p.D) + gl : (const uint4*)&g_ea_dummy);
      }
      pin_loads<kU>(x, p.zero);
#pragma unroll
      for (int u = 0; u < kU; ++u) /* the next chunk's indices, while the rows are in flight */
        nx[u] = __ldg(q0 + kU + u < qe ? ip + q0 + kU + u : &g_dummy_idx);
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (q0 + u < qe) take_row(p, c, so, q0 + u, x[u], ok[u], gl, cur, next_end, acc);
    }
    for (; cur < c.ke; ++cur) flush_bag(p, c, cur, gl, acc); /* the last bag, trailing empties */
  }
}

__device__ __forceinline__ void cp_async16(void* smem_dst, const void* src, bool ok) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(smem_dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(ok ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kN>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(kN) : "memory"); }

/* (d2): ring[stage][u][thread] of uint4 (a thread reads only what it copied: no barrier), then
 * the offsets (kWarps × (W + 1) int32). Chunk i of the group's positions goes to stage i mod kS;
 * chunk i + kS − 1 is issued before chunk i is waited for; indices one chunk ahead of that. */
template <int kS, int kU>
__global__ void __launch_bounds__(256) stream_cpasync(const SP p) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* ring = (uint4*)smem;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int* so = (int*)(ring + kS * kU * 256) + warp * (p.W + 1);
  const int G = 1 << p.lg_G, gl = lane & (G - 1), r = lane >> p.lg_G, RW = 32 >> p.lg_G;
  const int64_t tpt = (p.B + p.W - 1) / p.W, ntiles = tpt * kT;
  const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t j = gw; j < ntiles; j += nw) {
    const TileCtx c = stage_tile(p, j, tpt, so, lane, r, RW);
    const int qb = so[c.kb], qe = so[c.ke];
    const int64_t* ip = p.idx + c.pfirst;
    const bf16* tb = p.w + c.t * p.rows * p.D;
    int cur = c.kb, next_end = c.kb < c.ke ? so[c.kb + 1] : qe;
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.f;
    const int nch = (qe - qb + kU - 1) / kU;
    int64_t nx[kU];
    auto load_ix = [&](int i) {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int q = qb + i * kU + u;
        nx[u] = __ldg(i < nch && q < qe ? ip + q : &g_dummy_idx);
      }
    };
    auto issue = [&](int i) { /* chunk i from nx (its indices) */
      if (i < nch) {
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const int q = qb + i * kU + u;
          const bool ok = q < qe && nx[u] >= 0 && nx[u] < p.rows;
          cp_async16(&ring[((i % kS) * kU + u) * 256 + threadIdx.x],
                     ok ? (const uint4*)(tb + nx[u] * p.D) + gl : (const uint4*)&g_ea_dummy, ok);
        }
      }
      cp_commit(); /* always: the wait below counts groups */
    };
    load_ix(0);
#pragma unroll
    for (int i = 0; i < kS - 1; ++i) {
      issue(i);
      load_ix(i + 1);
    }
    for (int i = 0; i < nch; ++i) {
      issue(i + kS - 1);
      load_ix(i + kS);
      cp_wait<kS - 1>(); /* chunk i landed (this thread's copies) */
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int q = qb + i * kU + u;
        if (q < qe) {
          const uint4 x = ring[((i % kS) * kU + u) * 256 + threadIdx.x];
          /* an index out of range was zero-filled: adding zeros skips it */
          take_row(p, c, so, q, x, true, gl, cur, next_end, acc);
        }
      }
    }
    cp_wait<0>();
    for (; cur < c.ke; ++cur) flush_bag(p, c, cur, gl, acc);
  }
}

/* ---- host ------------------------------------------------------------------------------- */
static int ilog2(int64_t x) {
  int l = 0;
  while (((int64_t)1 << l) < x) ++l;
  return l;
}
static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Ctx {
  int sms, reps;
  cudaStream_t st;
  cudaEvent_t ev[2];
  bf16* w;
  int64_t* idx[kSets];
  int64_t* off;
  bf16 *out, *ref;
  uint32_t* chk;
  unsigned* sink;
  unsigned long long* wrong;
  fco_dev_rank_t* dev;
  fco_async_err_t* err;
  float* psw;                 /* (e) weights [max_n] */
  int32_t *idx32, *off32;     /* (e) int32 check: set 0's indices, the offsets */
  unsigned long long* nbad;   /* (e) [0] indices skipped, [1] bags pooled as empty */
  uint16_t* h_ref;
  int64_t* h_idx;
  std::vector<uint32_t> h_chk;
  double seq_gbs;
};

/* Median µs of launch(set): 2 warm-up launches, reps timed (one launch between two events,
 * index set rotating), then one untimed launch on set 0, the one the check reads. */
template <class F>
static float time_it(Ctx& c, F launch) {
  for (int r = 0; r < 2; ++r) launch(r % kSets);
  std::vector<float> t;
  for (int r = 0; r < c.reps; ++r) {
    CK(cudaEventRecord(c.ev[0], c.st));
    launch((r + 2) % kSets);
    CK(cudaEventRecord(c.ev[1], c.st));
    CK(cudaEventSynchronize(c.ev[1]));
    float ms = 0.f;
    CK(cudaEventElapsedTime(&ms, c.ev[0], c.ev[1]));
    t.push_back(ms * 1000.f);
  }
  launch(0);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(c.st));
  return median(t);
}

struct Case {
  int64_t rows;
  int rb, L, zipf;
  int64_t N, B;
  int D, G;
};
struct Row {
  std::string what;
  Case cs;
  std::string variant;
  int inflight, per_sm;
  float us;
  double gathered, all_bytes;
  double ref_a; /* µs of the best (a) for this table set, 0 for (a) itself → filled later */
  long long wrong;
};
static std::vector<Row> g_rows;
static long long g_check_wrong; /* failures of the (e) checks that have no row */

static int occupancy(const void* k, size_t smem) {
  int n = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, 256, smem));
  return n;
}

static long long check_out(Ctx& c, const Case& cs) {
  const int64_t n16 = cs.B * kT * cs.D / 8;
  CK(cudaMemset(c.wrong, 0, 8));
  compare<<<c.sms * 8, 256, 0, c.st>>>((const uint4*)c.out, (const uint4*)c.ref, n16, c.wrong);
  unsigned long long w = 0;
  CK(cudaMemcpyAsync(&w, c.wrong, 8, cudaMemcpyDeviceToHost, c.st));
  CK(cudaStreamSynchronize(c.st));
  return (long long)w;
}
static void poison(Ctx& c, const Case& cs) {
  CK(cudaMemsetAsync(c.out, 0xff, (size_t)cs.B * kT * cs.D * 2, c.st)); /* bf16 NaN */
}
static void add_row(const char* what, const Case& cs, const std::string& v, int inflight, int per_sm,
                    float us, bool pooled, bool offsets, long long wrong, double extra_bytes = 0) {
  Row r;
  r.what = what;
  r.cs = cs;
  r.variant = v;
  r.inflight = inflight;
  r.per_sm = per_sm;
  r.us = us;
  r.gathered = (double)cs.N * cs.rb;
  r.all_bytes = r.gathered + cs.N * 8.0 + (pooled ? (double)cs.B * kT * cs.rb : 0.0) +
                (offsets ? (cs.B * kT + 1) * 8.0 : 0.0) + extra_bytes;
  r.ref_a = 0;
  r.wrong = wrong;
  g_rows.push_back(r);
  printf("# %-10s rb %3d L %2d %-16s %8.1f us %7.0f GB/s #wrong %lld\n", what, cs.rb, cs.L, v.c_str(),
         us, r.gathered / (us * 1e3), wrong);
  fflush(stdout);
}

static GP flat_params(Ctx& c, const Case& cs, int set, int U, bool pool) {
  GP p;
  p.w = c.w;
  p.idx = c.idx[set];
  p.out = c.out;
  p.chk = c.chk;
  p.rows = cs.rows;
  p.D = cs.D;
  p.lg_G = ilog2(cs.G);
  p.L = pool ? cs.L : 1;
  p.lg_L = ilog2(p.L);
  p.lg_B = ilog2(cs.B);
  p.lg_NT = ilog2(cs.N / kT);
  p.N = cs.N;
  p.zero = 0;
  (void)U;
  return p;
}

/* (a): per warp step (32/G groups × U positions), Σ over its rows of the row's word sum. */
template <int kU>
static void run_read(Ctx& c, const Case& cs, const char* what) {
  auto k = gather_flat<kU, 0>;
  const int per_sm = occupancy((const void*)k, 0);
  const int RW = 32 / cs.G;
  const float us = time_it(c, [&](int set) {
    k<<<c.sms * per_sm, 256, 0, c.st>>>(flat_params(c, cs, set, kU, false));
  });
  /* word sum of a row, by a(g) (128 values): the row is (a + c(d)) / 64 in bf16 */
  uint32_t S[128];
  for (int a = -64; a < 64; ++a) {
    uint32_t s = 0;
    for (int d = 0; d < cs.D; d += 2)
      s += (uint32_t)bf16_rne((float)(a + val_c(d)) / 64.f) |
           ((uint32_t)bf16_rne((float)(a + val_c(d + 1)) / 64.f) << 16);
    S[a + 64] = s;
  }
  const int64_t per = (int64_t)RW * kU, nsteps = cs.N / per, npt = cs.N / kT;
  c.h_chk.resize((size_t)nsteps);
  CK(cudaMemcpy(c.h_chk.data(), c.chk, (size_t)nsteps * 4, cudaMemcpyDeviceToHost));
  long long wrong = 0;
  for (int64_t s = 0; s < nsteps; ++s) {
    uint32_t want = 0;
    for (int64_t q = s * per; q < (s + 1) * per; ++q) want += S[val_a((q / npt) * cs.rows + c.h_idx[q]) + 64];
    wrong += want != c.h_chk[(size_t)s];
  }
  add_row(what, cs, "(a) read U=" + std::to_string(kU), kU, per_sm, us, false, false, wrong);
}

template <int kU>
static void run_pool(Ctx& c, const Case& cs, const char* what) {
  auto k = gather_flat<kU, 1>;
  const int per_sm = occupancy((const void*)k, 0);
  poison(c, cs);
  const float us = time_it(c, [&](int set) {
    k<<<c.sms * per_sm, 256, 0, c.st>>>(flat_params(c, cs, set, kU, true));
  });
  add_row(what, cs, "(b) pool U=" + std::to_string(kU), kU, per_sm, us, true, false, check_out(c, cs));
}

static EaParams g_ep; /* ~9 KB */
/* Launched as embedding_alltoall.cuh's launch() does: kB = 0 with kStreamSmem bytes of dynamic
 * shared memory (the row ring; opt-in beyond 48 KB), the grid from the occupancy with that
 * smem, capped at the tiles. */
template <int kB, int kMinBlocks = 2>
static void run_fco(Ctx& c, const Case& cs, const char* what, bool autopick) {
  auto k = fco_lookup<bf16, true, 1, kB, kMinBlocks>;
  const int smem = kB == 0 ? kStreamSmem : 0;
  if (smem > 0) CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int per_sm = occupancy((const void*)k, (size_t)smem);
  EaParams& p = g_ep;
  memset(&p, 0, sizeof p);
  /* as fill_params / pick_variant for one rank, bf16, sum, int64 indices, no weights */
  p.nranks = 1;
  p.num_local = 1;
  p.B = cs.B;
  p.T = kT;
  p.D = cs.D;
  p.bstart[1] = cs.B;
  p.toff[1] = kT;
  const int per_warp = 32 / cs.G;
  p.tile_t[0] = kT < per_warp ? kT : per_warp;
  p.tile_s[0] = kWarps * per_warp * kBagsPerLane / p.tile_t[0];
  p.cpg[0] = 1;
  p.land_split[0] = 1;
  p.lanes = cs.G;
  p.esize = 2;
  p.sig_every = 1;
  p.mix = -1;
  p.decode = 1;
  for (int t = 0; t <= kT; ++t) p.row_base[t] = (int64_t)t * cs.rows;
  EaRank& r = p.r[0];
  r.weight = (const char*)c.w;
  r.offsets = c.off;
  r.out = (char*)c.out;
  r.dev = c.dev;
  r.num_indices = cs.N;
  r.row_base0 = 0;
  r.rank = 0;
  r.idx64 = 1;
  const int64_t ntask = ea_chunks(p, 0, p.B) * ea_tgroups(p, 0);
  const int64_t cap = (int64_t)per_sm * c.sms;
  p.blocks_per_rank = (uint32_t)(ntask < cap ? ntask : cap);
  CK(cudaMemset(c.err, 0, sizeof(fco_async_err_t)));
  poison(c, cs);
  EaParams* pp = &p;
  const float us = time_it(c, [&](int set) {
    pp->r[0].indices = c.idx[set];
    k<<<pp->blocks_per_rank, kThreads, smem, c.st>>>(*pp);
  });
  fco_async_err_t e;
  CK(cudaMemcpy(&e, c.err, sizeof e, cudaMemcpyDeviceToHost));
  long long wrong = check_out(c, cs);
  if (e.code) {
    printf("# fco lookup reported an error: code %d table %d slot %d pos %llu value %llu\n", e.code,
           e.peer, e.slot, (unsigned long long)e.want, (unsigned long long)e.seen);
    ++wrong;
  }
  /* rows in flight per lane: pool_tile's kB · kU (bf16), the stream's ring (as d2's S · U) */
  const int fly = kB == 0 ? kStreamStages * kStreamRows : kB * (kB > 1 ? 1 : 8);
  std::string v = std::string("(c) fco kB=") + std::to_string(kB);
  if (kB == 0) v += " stream @" + std::to_string(kMinBlocks);
  add_row(what, cs, v + (autopick ? " *" : ""), fly, per_sm, us, true, true, wrong);
  printf("#   %u blocks (%d a SM), %lld tiles: %.2f a block\n", p.blocks_per_rank, per_sm,
         (long long)ntask, (double)ntask / p.blocks_per_rank);
}

/* (d) warp tile W: ≥ 4 chunks of U rows per lane group where bags allow, and ≥ 2 tiles per
 * resident warp. */
static int tile_bags(const Case& cs, int U, int resident_warps) {
  const int RW = 32 / cs.G;
  int64_t W = 1;
  while (W < RW || W * cs.L < 4ll * U * RW) W *= 2;
  if (W > kMaxTileBags) W = kMaxTileBags;
  while (W > RW && (cs.B + W - 1) / W * kT < 2ll * resident_warps) W /= 2;
  return (int)W;
}
static SP stream_params(Ctx& c, const Case& cs, int set, int W) {
  SP p;
  p.w = c.w;
  p.idx = c.idx[set];
  p.off = c.off;
  p.out = c.out;
  p.rows = cs.rows;
  p.B = cs.B;
  p.D = cs.D;
  p.lg_G = ilog2(cs.G);
  p.W = W;
  p.zero = 0;
  return p;
}
template <int kU>
static void run_stream(Ctx& c, const Case& cs, const char* what) {
  auto k = stream_regs<kU>;
  const size_t so = (size_t)kWarps * (kMaxTileBags + 1) * 4;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)so));
  const int per_sm = occupancy((const void*)k, so);
  const int W = tile_bags(cs, kU, c.sms * per_sm * kWarps);
  const size_t smem = (size_t)kWarps * (W + 1) * 4;
  poison(c, cs);
  const float us = time_it(c, [&](int set) {
    k<<<c.sms * per_sm, 256, smem, c.st>>>(stream_params(c, cs, set, W));
  });
  add_row(what, cs, "(d1) stream U=" + std::to_string(kU) + " W=" + std::to_string(W), kU, per_sm,
          us, true, true, check_out(c, cs));
}
template <int kS, int kU>
static void run_cpasync(Ctx& c, const Case& cs, const char* what) {
  auto k = stream_cpasync<kS, kU>;
  const size_t ring = (size_t)kS * kU * 256 * 16;
  const size_t so = (size_t)kWarps * (kMaxTileBags + 1) * 4;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(ring + so)));
  int per_sm = occupancy((const void*)k, ring + so);
  const int W = tile_bags(cs, kU, c.sms * std::max(per_sm, 1) * kWarps);
  const size_t smem = ring + (size_t)kWarps * (W + 1) * 4;
  per_sm = occupancy((const void*)k, smem);
  poison(c, cs);
  const float us = time_it(c, [&](int set) {
    k<<<c.sms * per_sm, 256, smem, c.st>>>(stream_params(c, cs, set, W));
  });
  add_row(what, cs,
          "(d2) cp.async S=" + std::to_string(kS) + " U=" + std::to_string(kU) + " W=" +
              std::to_string(W),
          kS * kU, per_sm, us, true, true, check_out(c, cs));
}

/* (e): the dynamic shared memory for tile W (ring, offsets, weights: see embedding_alltoall_lean.cuh). */
static size_t lean_smem(const Case& cs, int W, bool wm, int S, int U) {
  return (size_t)S * U * kThreads * 16 + (size_t)kWarps * (W + 1) * 4 +
         (wm ? (size_t)(kThreads / cs.G) * S * U * 4 : 0) + FCO_EA_RING_ALIGN; /* ea_ring's slack */
}
/* (e) set-up: smem opt-in, W as (d2)'s (tile_bags with its U), blocks a SM with that smem. */
template <typename I, int kS, int kU>
static int lean_setup(Ctx& c, const Case& cs, bool wm, int* per_sm) {
  auto k = ea_kernel_lean_stream<bf16, I, kS, kU>;
  const size_t most = lean_smem(cs, kMaxTileBags, wm, kS, kU);
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most));
  const int W = tile_bags(cs, kU, c.sms * std::max(occupancy((const void*)k, most), 1) * kWarps);
  *per_sm = occupancy((const void*)k, lean_smem(cs, W, wm, kS, kU));
  return W;
}
static_assert(kT <= kLeanMaxTables, "(e)'s row_base");
static LeanParams lean_params(Ctx& c, const Case& cs, const void* idx, const void* off, int W,
                              bool wm) {
  LeanParams p;
  memset(&p, 0, sizeof p);
  p.weight = c.w;
  p.indices = idx;
  p.offsets = off;
  p.psw = wm ? c.psw : nullptr;
  p.out = c.out;
  p.nbad = c.nbad;
  p.num_indices = cs.N;
  p.B = cs.B;
  p.stride = (int64_t)kT * cs.D;
  for (int t = 0; t <= kT; ++t) p.row_base[t] = (int64_t)t * cs.rows;
  p.T = kT;
  p.D = cs.D;
  p.lg_G = ilog2(cs.G);
  p.W = W;
  p.mean = wm ? 1 : 0;
  return p;
}
static void read_nbad(Ctx& c, unsigned long long* n) {
  CK(cudaMemcpy(n, c.nbad, 2 * sizeof *n, cudaMemcpyDeviceToHost));
}
/* (e) timed, int64 indices: wm = false the unweighted sum (against cpu_ref), true weights and
 * mean (against cpu_ref_gen's, computed before). Good data: both counters must stay 0. */
template <int kS, int kU>
static void run_lean(Ctx& c, const Case& cs, const char* what, bool wm) {
  auto k = ea_kernel_lean_stream<bf16, int64_t, kS, kU>;
  int per_sm = 0;
  const int W = lean_setup<int64_t, kS, kU>(c, cs, wm, &per_sm);
  const size_t smem = lean_smem(cs, W, wm, kS, kU);
  LeanParams p = lean_params(c, cs, c.idx[0], c.off, W, wm);
  CK(cudaMemsetAsync(c.nbad, 0, 16, c.st));
  poison(c, cs);
  const float us = time_it(c, [&](int set) {
    p.indices = c.idx[set];
    k<<<c.sms * per_sm, kThreads, smem, c.st>>>(p);
  });
  long long wrong = check_out(c, cs);
  unsigned long long nbad[2];
  read_nbad(c, nbad);
  if (nbad[0] || nbad[1]) {
    printf("# (e) counted bad data in good data: %llu indices, %llu bags\n", nbad[0], nbad[1]);
    ++wrong;
  }
  add_row(what, cs,
          std::string("(e) lean ") + (wm ? "w+mean " : "") + "S=" + std::to_string(kS) + " U=" +
              std::to_string(kU) + " W=" + std::to_string(W),
          kS * kU, per_sm, us, true, true, wrong, wm ? cs.N * 4.0 : 0.0);
}
/* One untimed (e) launch with weights and mean on set 0 (idx, off of type I), out poisoned and
 * the counters zeroed first: #wrong against c.ref, the counters in nbad. */
template <typename I, int kS, int kU>
static long long lean_once(Ctx& c, const Case& cs, const void* idx, const void* off,
                           unsigned long long* nbad) {
  int per_sm = 0;
  const int W = lean_setup<I, kS, kU>(c, cs, true, &per_sm);
  CK(cudaMemsetAsync(c.nbad, 0, 16, c.st));
  poison(c, cs);
  auto k = ea_kernel_lean_stream<bf16, I, kS, kU>;
  k<<<c.sms * per_sm, kThreads, lean_smem(cs, W, true, kS, kU), c.st>>>(
      lean_params(c, cs, idx, off, W, true));
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(c.st));
  read_nbad(c, nbad);
  return check_out(c, cs);
}

/* CPU reference of set 0 for bag length L: out[b][t][d] = bf16((Σ_l a(g) + L·c(d)) / 64). */
static void cpu_ref(Ctx& c, const Case& cs) {
  const int64_t nb = cs.B * kT;
  std::vector<int> cc(cs.D);
  for (int d = 0; d < cs.D; ++d) cc[d] = val_c(d);
  unsigned nth = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> th;
  for (unsigned i = 0; i < nth; ++i)
    th.emplace_back([&, i] {
      for (int64_t k = (int64_t)i; k < nb; k += nth) { /* k = t·B + b */
        const int64_t t = k / cs.B, b = k - t * cs.B;
        int sa = 0;
        for (int l = 0; l < cs.L; ++l) sa += val_a(t * cs.rows + c.h_idx[k * cs.L + l]);
        uint16_t* o = c.h_ref + (b * kT + t) * cs.D;
        for (int d = 0; d < cs.D; ++d) o[d] = bf16_rne((float)(sa + cs.L * cc[d]) / 64.f);
      }
    });
  for (auto& x : th) x.join();
  CK(cudaMemcpy(c.ref, c.h_ref, (size_t)nb * cs.D * 2, cudaMemcpyHostToDevice));
}

/* CPU reference of set 0 (c.h_idx) for any offsets off (host), the kernels' semantics: a bag
 * whose offsets decrease or leave [0, N] is zeros, an index outside [0, rows) is skipped; wm:
 * weights wq(q) / 2 and mean pooling. Exact as cpu_ref: Σ wq·a and Σ wq over a bag are integers,
 * the GPU's fp32 sum (multiples of 2^−7 below 2^17 in magnitude for bags of ≤ 2^14 rows) is exact
 * in any order, and the mean's one division (by the length, skipped rows counted) is correctly
 * rounded on both sides. bad[0], bad[1]: the skipped indices (in valid bags) and bad bags. */
static void cpu_ref_gen(Ctx& c, const Case& cs, const int64_t* off, bool wm, long long* bad) {
  const int64_t nb = cs.B * kT;
  std::vector<int> cc(cs.D);
  for (int d = 0; d < cs.D; ++d) cc[d] = val_c(d);
  unsigned nth = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<long long> bi(nth, 0), bb(nth, 0);
  std::vector<std::thread> th;
  for (unsigned i = 0; i < nth; ++i)
    th.emplace_back([&, i] {
      for (int64_t k = (int64_t)i; k < nb; k += nth) { /* k = t·B + b */
        const int64_t t = k / cs.B, b = k - t * cs.B;
        int64_t lo = off[k], hi = off[k + 1];
        if (lo < 0 || hi < lo || hi > cs.N) ++bb[i], lo = hi = 0;
        long long sa = 0, sw = 0;
        for (int64_t q = lo; q < hi; ++q) {
          const int64_t ix = c.h_idx[q];
          if (ix < 0 || ix >= cs.rows) {
            ++bi[i];
            continue;
          }
          const int w = wm ? wq(q) : 1;
          sa += (long long)w * val_a(t * cs.rows + ix);
          sw += w;
        }
        uint16_t* o = c.h_ref + (b * kT + t) * cs.D;
        for (int d = 0; d < cs.D; ++d) {
          float v = (float)(sa + sw * cc[d]) / (wm ? 128.f : 64.f);
          if (wm && hi > lo) v = v / (float)(hi - lo);
          o[d] = bf16_rne(v);
        }
      }
    });
  for (auto& x : th) x.join();
  bad[0] = bad[1] = 0;
  for (unsigned i = 0; i < nth; ++i) bad[0] += bi[i], bad[1] += bb[i];
  CK(cudaMemcpy(c.ref, c.h_ref, (size_t)nb * cs.D * 2, cudaMemcpyHostToDevice));
}

/* (e) with int32 indices and offsets (set 0 narrowed), weights and mean: after run_lean's
 * weighted row (c.ref is its reference). */
static void check_lean_i32(Ctx& c, const Case& cs, const char* what) {
  narrow_i32<<<c.sms * 8, 256, 0, c.st>>>(c.idx[0], c.idx32, cs.N);
  narrow_i32<<<c.sms * 8, 256, 0, c.st>>>(c.off, c.off32, cs.B * kT + 1);
  unsigned long long n[2];
  long long wrong = lean_once<int32_t, 3, 4>(c, cs, c.idx32, c.off32, n);
  wrong += (n[0] || n[1]) ? 1 : 0;
  printf("# %-10s rb %3d L %2d (e) check: int32 indices, weights + mean: #wrong %lld\n", what, cs.rb,
         cs.L, wrong);
  g_check_wrong += wrong;
}

/* (e) on bad data, weights and mean on, set 0 and the offsets k·L (h_off: the host's copy)
 * altered: bad indices in a good tile, in a tile with a bad bag (fallback), in a bad bag (not
 * read: not counted), and offsets that decrease (table 3), go negative (table 6) and pass N (the
 * last). Against cpu_ref_gen, counters included; set 0 and the offsets restored after. Uploads
 * on c.st (pageable sources: a plain cudaMemcpy could still be in flight when c.st runs). */
static void check_lean_bad(Ctx& c, const Case& cs, const char* what, std::vector<int64_t>& h_off) {
  const int64_t L = cs.L, nbag = cs.B * kT;
  const int64_t kd = 3 * cs.B + cs.B / 2, kn = 6 * cs.B + cs.B / 3 + 1;
  const int64_t pos[] = {5, cs.N / 3 + 7, (kd - 1) * L, kn * L, cs.N - 1 - L};
  const int64_t val[] = {-1, cs.rows, cs.rows + (1ll << 40), -(1ll << 40), cs.rows + 1};
  constexpr int kBad = 5;
  int64_t keep[kBad];
  for (int i = 0; i < kBad; ++i) {
    keep[i] = c.h_idx[pos[i]];
    c.h_idx[pos[i]] = val[i];
    CK(cudaMemcpyAsync(c.idx[0] + pos[i], &val[i], 8, cudaMemcpyHostToDevice, c.st));
  }
  h_off[kd] = h_off[kd + 1] + 3;
  h_off[kn] = -5;
  h_off[nbag] = cs.N + 1;
  CK(cudaMemcpyAsync(c.off, h_off.data(), (size_t)(nbag + 1) * 8, cudaMemcpyHostToDevice, c.st));
  long long want[2];
  cpu_ref_gen(c, cs, h_off.data(), true, want);
  unsigned long long n[2];
  long long wrong = lean_once<int64_t, 3, 4>(c, cs, c.idx[0], c.off, n);
  if ((long long)n[0] != want[0] || (long long)n[1] != want[1]) ++wrong;
  printf("# %-10s rb %3d L %2d (e) check: bad data, weights + mean: #wrong %lld, indices skipped %llu "
         "(want %lld), bags empty %llu (want %lld)\n",
         what, cs.rb, cs.L, wrong, n[0], want[0], n[1], want[1]);
  g_check_wrong += wrong;
  for (int i = 0; i < kBad; ++i) {
    c.h_idx[pos[i]] = keep[i];
    CK(cudaMemcpyAsync(c.idx[0] + pos[i], &keep[i], 8, cudaMemcpyHostToDevice, c.st));
  }
  for (int64_t k : {kd, kn, nbag}) h_off[k] = k * L;
  gen_offsets<<<c.sms * 8, 256, 0, c.st>>>(c.off, nbag, cs.L);
  CK(cudaStreamSynchronize(c.st));
}

struct Config {
  int64_t rows;
  int rb, zipf;
  std::vector<int> Ls;
};

int main(int argc, char** argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    printf("ea_gather_probe: no GPU, nothing measured (skip)\n");
    return 77;
  }
  Ctx c;
  c.reps = argc > 1 ? std::max(1, atoi(argv[1])) : 5;
  int dev = 0, l2 = 0;
  CK(cudaSetDevice(dev));
  CK(cudaDeviceGetAttribute(&c.sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  CK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
  CK(cudaEventCreate(&c.ev[0]));
  CK(cudaEventCreate(&c.ev[1]));

  const int64_t max_rows = 1000000;
  const int64_t max_n = kGatherBytes / 32; /* positions at 32-byte rows */
  const size_t table_bytes = (size_t)kT * max_rows * kMaxRowBytes;
  CK(cudaMalloc(&c.w, table_bytes));
  for (int s = 0; s < kSets; ++s) CK(cudaMalloc(&c.idx[s], (size_t)max_n * 8));
  CK(cudaMalloc(&c.off, (size_t)(max_n + 1) * 8));
  CK(cudaMalloc(&c.out, (size_t)kGatherBytes));
  CK(cudaMalloc(&c.ref, (size_t)kGatherBytes));
  CK(cudaMalloc(&c.chk, (size_t)max_n / 16 * 4));
  CK(cudaMalloc(&c.sink, 4));
  CK(cudaMalloc(&c.wrong, 8));
  CK(cudaMalloc(&c.err, sizeof(fco_async_err_t)));
  CK(cudaMalloc(&c.dev, sizeof(fco_dev_rank_t)));
  CK(cudaMalloc(&c.psw, (size_t)max_n * 4));
  CK(cudaMalloc(&c.idx32, (size_t)max_n * 4));
  CK(cudaMalloc(&c.off32, (size_t)(max_n + 1) * 4));
  CK(cudaMalloc(&c.nbad, 16));
  gen_weights<<<c.sms * 8, 256, 0, c.st>>>(c.psw, max_n);
  std::vector<int64_t> h_off;
  {
    fco_dev_rank_t d;
    memset(&d, 0, sizeof d);
    d.err = c.err;
    CK(cudaMemcpy(c.dev, &d, sizeof d, cudaMemcpyHostToDevice));
  }
  CK(cudaMallocHost(&c.h_ref, (size_t)kGatherBytes));
  CK(cudaMallocHost(&c.h_idx, (size_t)max_n * 8));

  int mem_khz = 0;
  (void)cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev);
  printf("# ea_gather_probe: %s, %d SMs, L2 %d MiB, %.0f MHz mem clock, %d-bit bus, %d reps (median)\n",
         prop.name, c.sms, l2 >> 20, mem_khz / 1e3, prop.memoryBusWidth, c.reps);
  printf("# bf16 rows, %d tables, int64 indices, sum pooling, %lld MiB of rows gathered per case, "
         "%d index sets rotated\n", kT, (long long)(kGatherBytes >> 20), kSets);

  /* seq ceiling: 2 GiB of the table buffer (written first), best of three grids */
  init_table<<<c.sms * 8, 256, 0, c.st>>>(c.w, (int64_t)(table_bytes / kMaxRowBytes), kMaxRowBytes / 2);
  CK(cudaStreamSynchronize(c.st));
  {
    const int64_t n16 = (2ll << 30) / 16;
    float best = 1e30f;
    for (int mult : {2, 4, 8}) {
      const float us = time_it(c, [&](int) {
        seq_read<<<c.sms * mult, 256, 0, c.st>>>((const uint4*)c.w, n16, c.sink);
      });
      best = std::min(best, us);
    }
    c.seq_gbs = (2ll << 30) / (best * 1e3);
    printf("# seq: contiguous read of 2 GiB, 16-byte loads: %.1f us, %.0f GB/s (%.1f %% of 4300)\n",
           best, c.seq_gbs, 100.0 * c.seq_gbs / 4300.0);
  }

  const std::vector<int> Lall = {1, 2, 4, 8, 32};
  const std::vector<Config> cfgs = {
      {1000000, 32, 0, Lall},  {1000000, 64, 0, Lall}, {1000000, 128, 0, Lall},
      {1000000, 256, 0, Lall}, {1000000, 512, 0, Lall}, {1000000, 256, 1, {32}},
      {500000, 256, 0, {8, 32}}, {500000, 128, 0, {1, 8}},
  };
  int64_t have_rows = -1;
  int have_rb = -1;
  for (const Config& cf : cfgs) {
    Case cs;
    cs.rows = cf.rows;
    cs.rb = cf.rb;
    cs.zipf = cf.zipf;
    cs.D = cf.rb / 2;
    cs.G = cf.rb / 16;
    cs.N = kGatherBytes / cf.rb;
    char what[32];
    snprintf(what, sizeof what, "%lldk %s", (long long)(cf.rows / 1000), cf.zipf ? "zipf" : "unif");
    if (have_rows != cf.rows || have_rb != cf.rb) {
      init_table<<<c.sms * 8, 256, 0, c.st>>>(c.w, kT * cf.rows, cs.D);
      have_rows = cf.rows;
      have_rb = cf.rb;
    }
    for (int s = 0; s < kSets; ++s)
      gen_indices<<<c.sms * 8, 256, 0, c.st>>>(c.idx[s], cs.N, cf.rows, 1000u * cf.rb + 10u * s + cf.zipf,
                                               cf.zipf);
    CK(cudaMemcpyAsync(c.h_idx, c.idx[0], (size_t)cs.N * 8, cudaMemcpyDeviceToHost, c.st));
    CK(cudaStreamSynchronize(c.st));
    printf("# %s rows %d B: table %.0f MiB (%.1fx L2), %lld rows gathered\n", what, cf.rb,
           (double)kT * cf.rows * cf.rb / (1 << 20), (double)kT * cf.rows * cf.rb / l2, (long long)cs.N);
    /* (a): L plays no part (nothing pooled) */
    cs.L = 1;
    cs.B = cs.N / kT;
    const size_t first_a = g_rows.size();
    run_read<1>(c, cs, what);
    run_read<2>(c, cs, what);
    run_read<4>(c, cs, what);
    run_read<8>(c, cs, what);
    run_read<16>(c, cs, what);
    float best_a = 1e30f;
    for (size_t i = first_a; i < g_rows.size(); ++i) best_a = std::min(best_a, g_rows[i].us);
    for (size_t i = first_a; i < g_rows.size(); ++i) g_rows[i].ref_a = best_a;
    for (int L : cf.Ls) {
      cs.L = L;
      cs.B = cs.N / ((int64_t)kT * L);
      gen_offsets<<<c.sms * 8, 256, 0, c.st>>>(c.off, cs.B * kT, L);
      h_off.resize((size_t)(cs.B * kT + 1));
      for (int64_t k = 0; k <= cs.B * kT; ++k) h_off[(size_t)k] = k * L;
      cpu_ref(c, cs);
      const size_t first = g_rows.size();
      run_pool<4>(c, cs, what);
      run_pool<8>(c, cs, what);
      run_pool<16>(c, cs, what);
      if (L <= 16) {
        run_fco<4>(c, cs, what, true);
        run_fco<1>(c, cs, what, false);
      } else {
        run_fco<1>(c, cs, what, true);
        run_fco<4>(c, cs, what, false);
      }
      /* the streaming path: at 3 blocks/SM, then as the library compiles it (kStreamMinBlocks) */
      run_fco<0, 3>(c, cs, what, false);
      run_fco<0, kStreamMinBlocks>(c, cs, what, false);
      run_stream<8>(c, cs, what);
      run_stream<16>(c, cs, what);
      run_cpasync<3, 4>(c, cs, what);
      run_cpasync<4, 8>(c, cs, what);
      run_lean<3, 4>(c, cs, what, false);
      long long nbad_ref[2];
      cpu_ref_gen(c, cs, h_off.data(), true, nbad_ref); /* the weighted rows' reference */
      run_lean<3, 4>(c, cs, what, true);
      if (L == cf.Ls.back()) { /* once a table set: int32, then bad data (its own reference) */
        check_lean_i32(c, cs, what);
        check_lean_bad(c, cs, what, h_off);
      }
      for (size_t i = first; i < g_rows.size(); ++i) g_rows[i].ref_a = best_a;
    }
  }

  printf("\n# GB/s = rows gathered (N · row bytes) / median µs; %%4300 of 4300 GB/s; %%seq of the seq "
         "read above (%.0f GB/s);\n", c.seq_gbs);
  printf("# %%(a) = the best (a) read of the same table set (row bytes, rows, dist) / this variant's time; "
         "all GB/s adds index (8 B/row), offset and out bytes\n");
  printf("# fly = rows in flight per lane (a, b, d1: U; c: kB·kU, kB=0 its ring's stages·rows; d2, e: S·U), "
         "b/SM = blocks per SM (256 threads); * = the kB fco picks with FCO_EA_STREAM=0 (FCO_EA_BAGS auto); "
         "kB=0 stream @N = the library's streaming path (FCO_EA_STREAM=1), __launch_bounds__(256, N)\n");
  printf("# (e) lean = d2's design with the library's semantics (embedding_alltoall_lean.cuh); w+mean: weights and "
         "mean pooling on (all GB/s adds 4 B/row of weights)\n");
  printf("#wrong: (a) warp-step checksums that differ; others bf16 elements of out that differ from the CPU "
         "reference (tolerance 0)\n\n");
  printf("| rows | dist | row B | L | B | variant | fly | b/SM | us | GB/s | %%4300 | %%seq | %%(a) | all GB/s | #wrong |\n");
  printf("| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Row& r : g_rows) {
    const bool is_a = r.variant.rfind("(a)", 0) == 0;
    const double gbs = r.gathered / (r.us * 1e3);
    char L[16], B[24];
    if (is_a) snprintf(L, sizeof L, "-"), snprintf(B, sizeof B, "-");
    else snprintf(L, sizeof L, "%d", r.cs.L), snprintf(B, sizeof B, "%lld", (long long)r.cs.B);
    printf("| %lldk | %s | %d | %s | %s | %s | %d | %d | %.1f | %.0f | %.1f | %.1f | %.1f | %.0f | %lld |\n",
           (long long)(r.cs.rows / 1000), r.cs.zipf ? "zipf" : "unif", r.cs.rb, L, B, r.variant.c_str(),
           r.inflight, r.per_sm, r.us, gbs, 100.0 * gbs / 4300.0, 100.0 * gbs / c.seq_gbs,
           100.0 * r.ref_a / r.us, r.all_bytes / (r.us * 1e3), r.wrong);
  }
  long long total_wrong = g_check_wrong;
  for (const Row& r : g_rows) total_wrong += r.wrong;
  printf("\n# wrong in all (rows and the (e) checks): %lld\n", total_wrong);
  return total_wrong ? 1 : 0;
}
