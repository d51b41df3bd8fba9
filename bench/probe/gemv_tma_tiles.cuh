/*
 * gemv_tma_tiles.cuh — gemv_group_probe's TMA tiles (issue 3, M = 64): tmaws (session 13: a
 * producer warp, 64-column groups; session 22: traced forms, the 32-bit producer, wide stages,
 * the k split, x multicast) and tmawk (session 14: 128- / 256-column groups with K split into
 * slices; session 22: wide stages), the split-K sum, and the ring / trace helpers. The probe's
 * header (gemv_group_probe.cu) says what each row measures and which runs recorded them.
 * Included once, by gemv_group_probe.cu (after gemv_group_wgmma.cuh, `bf16` and `smem_u32`).
 */
#ifndef FCO_PROBE_GEMV_TMA_TILES_CUH_
#define FCO_PROBE_GEMV_TMA_TILES_CUH_

/* m64n{32,64,128}k16 bf16, both operands from shared memory (K-major, 128-byte swizzle). */
template <int kN>
__device__ __forceinline__ void wg_bf16(float* d, uint64_t da, uint64_t db) {
#if FCO_WGMMA_COMPILED
  if constexpr (kN == 32) {
    fco::gemv::WgmmaN<bf16, 32>::run(d, da, db);
  } else if constexpr (kN == 64) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, "
                 "%8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db));
  } else {
    static_assert(kN == 128, "n32, n64 or n128");
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, "
                 "%8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, "
                 "%40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, "
                 "%56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db));
  }
#endif
}

/* ---- the TMA ring's layout ---------------------------------------------------------------- */
/* kGr tiles of 16 columns a group (4 as the library's default; 2: twice the groups, so two
 * blocks per SM have work at N = 8192 when the ring is small enough). */
template <int kS, int kGr, int kKb = 1>
struct TmaRing { /* kKb (session 22): 64-k boxes a stage (x boxes, then W boxes) */
  static constexpr int kCols = kGr * 16;
  static constexpr int kXBytes = 64 * 128 * kKb, kWBytes = kCols * 128 * kKb;
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kBarOff = kS * kStageBytes;
  static constexpr int kOutBytes = kGr * 64 * 16 * 4;
  static constexpr int kSmem = 1024 + kBarOff + 2 * kS * 8 + kOutBytes;
};

/* ---- tmaws: the TMA tile with a producer warp (session 13) ----------------------------------
 * Run 7bf1d5b's tma kernel let thread 0, a lane of consumer warp 0, wait on a stage's "empty"
 * barrier before refilling it: warpgroup 0 (whose wgmmas are warpgroup-wide) then waited every
 * slab for warpgroup 1 to release the previous one — a block barrier per slab by another name.
 * Here a ninth warp only produces (lane 0: wait empty, expect bytes, two TMA loads), the eight
 * consumer warps only wait "full", run the wgmmas and release; the output goes through shared
 * memory under a named barrier of the 256 consumer threads (cuBLAS's nvjet kernel at this shape
 * runs 384 threads: a producer warpgroup and two consumer warpgroups, ncu run 0b0b1f7). */
constexpr int kWsThreads = 288;
/* One thread: the ring's kS "full" barriers (the producer's arrival + the bytes) and "empty"
 * barriers (`consumers` warp arrivals) at 8-byte steps, made visible to the cluster's async
 * proxy; and their invalidation at the end. */
__device__ __forceinline__ void ring_bars_init(uint32_t full, uint32_t empty, int kS, int consumers) {
  for (int s = 0; s < kS; ++s) {
    fco::tile::mbar_init(full + 8 * s, 1);
    fco::tile::mbar_init(empty + 8 * s, consumers);
  }
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void ring_bars_inval(uint32_t full, uint32_t empty, int kS) {
  for (int s = 0; s < kS; ++s) {
    fco::tile::mbar_inval(full + 8 * s);
    fco::tile::mbar_inval(empty + 8 * s);
  }
}
/* kCl > 1: a cluster of kCl blocks (consecutive blockIdx.x, different groups, the same k slabs at
 * the same time) shares x: block r loads x rows [r·64/kCl, (r+1)·64/kCl) of a slab (mx's box has
 * 64/kCl rows) multicast to every block of the cluster, as cuBLAS's kernel here (cluster 4x1);
 * a stage is refilled only when the consumers of all kCl blocks released it (empty barriers
 * count 8·kCl warps, each warp arrives at every block's). Every block runs the same number of
 * groups (a block past the last group computes the last one again and stores nothing). */
/* The remote release is fco::tile::mbar_arrive_cluster. Until session 21 it asked
 * .release.cluster, which cost a memory round trip per arrival (run 1c4863f-clrel timed that form
 * beside the default one with a probe-local copy, the "cta" rows; e9f7aa4 made the library's
 * helper the default form, so the copy and its rows are gone). */
/* kTrace (session 21): blocks 0 and gridDim.x / 2 record clock64 per slab q into g_trace
 * [2 blocks][6][kTraceMax]: [0] the producer right after issuing slab q's loads, [1] consumer
 * thread 0 when slab q's data is there (full wait passed), [2] consumer thread 0 after slab
 * q's wgmmas were issued and slab q - 1's retired (its stage released), [3] the producer once
 * slab q's stage is free (before its expect_tx and the two TMA issues); session 22: [4] consumer
 * thread 128 (warpgroup 1) at [2]'s point, [5] thread 0's clock64 at entry ([5][0]) and before
 * the final barrier ([5][1]). */
constexpr int kTraceMax = 4096;
__device__ long long* g_trace;
/* session 22: every block's %globaltimer (ns) at entry [2b] and before the final barrier [2b+1] */
__device__ unsigned long long* g_gt;
__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* The consumers' wait for a full stage as a test_wait spin (never suspends) instead of
 * fco::tile::mbar_wait's try_wait loop (session 21: is the ~255-cycle wait a slab the data or the
 * wait's wake-up?). */
__device__ __forceinline__ void mbar_wait_spin(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n"
      "FCO_SPIN_WAIT:\n"
      " mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra FCO_SPIN_WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

/* kSpin: 0 both waits fco::tile::mbar_wait (try_wait), 1 the consumers' full wait a test_wait
 * spin, 2 the producer's empty wait too (session 22).
 * kProd (session 22, traced rows only; the producer passes a stage's empty barrier ~2800 cycles
 * after both warpgroups released it, yet runs only ~2.3 slabs ahead): 0 one producer thread
 * issues both loads; 1 a second producer warp (launch 320 threads) issues x, warp 8 W and the
 * expect_tx; 2 no x loads at all (timing only: y is wrong, the row is not checked). Slot [5] of
 * the trace: tid 0's clock64 at entry [0] and before the final barrier [1]. */
/* kWs (session 22, traced rows): 0 warpgroup w computes columns w·kC/2.. of every box (m64n32);
 * 1 warpgroup w computes all kC = 64 columns of the boxes b ≡ w (mod 2) (m64n64: half the
 * instructions and x re-reads), the two partial sums added in shared memory per group. */
template <int kS, int kGr, int kCl = 1, bool kTrace = false, int kSpin = 0, int kProd = 0,
          int kKb = 1, int kWs = 0>
__global__ void __launch_bounds__(320, 1)
    tma_ws_kernel(const __grid_constant__ CUtensorMap mx, const __grid_constant__ CUtensorMap mw,
                  float* y, int M, int N, int K, int groups) {
#if FCO_WGMMA_COMPILED
  using R = TmaRing<kS, kGr, kKb>;
  static_assert(kKb == 1 || kProd >= 3, "wide stages: the i32 producer only");
  static_assert(kWs == 0 || (kKb % 2 == 0 && kGr == 4), "k split: even boxes, 64 columns");
  constexpr int kC = R::kCols;
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
  const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t full = pipe + R::kBarOff, empty = full + kS * 8;
  float* out = reinterpret_cast<float*>(smem + (pipe - smem_u32(smem)) + R::kBarOff + 2 * kS * 8);
  const int num_k = (K + 64 * kKb - 1) / (64 * kKb); /* stages a group */
  const int my_groups = kCl > 1 ? (groups + gridDim.x - 1) / gridDim.x
                      : groups > (int)blockIdx.x ? (groups - 1 - (int)blockIdx.x) / gridDim.x + 1 : 0;
  const long long total = (long long)my_groups * num_k; /* slabs of this block, all groups */
  const uint32_t crank = kCl > 1 ? fco::tile::cluster_ctarank() : 0;
  long long* trace = nullptr;
  if (kTrace && (blockIdx.x == 0 || blockIdx.x == gridDim.x / 2))
    trace = g_trace + (blockIdx.x == 0 ? 0 : 6 * kTraceMax);
  if (kTrace && trace && tid == 0) trace[5 * kTraceMax] = clock64();
  if (kTrace && tid == 0) g_gt[2 * blockIdx.x] = globaltimer_ns();
  if (tid == 0) ring_bars_init(full, empty, kS, 8 * kCl); /* the consumer warps of the cluster */
  if constexpr (kCl > 1) fco::tile::cluster_sync(); else __syncthreads();
  if (tid >= 256) { /* the producer warp */
    if (kProd == 1 && tid == 288)
      for (long long q = 0; q < total; ++q) { /* x only: warp 8 expects its bytes */
        const int s = (int)(q % kS);
        if (q >= kS) fco::tile::mbar_wait(empty + 8 * s, (uint32_t)(q / kS - 1) & 1u);
        fco::tile::tma_load_2d(pipe + s * R::kStageBytes, &mx, full + 8 * s, (int)(q % num_k) * 64, 0);
      }
    /* kProd 3: 32-bit counters, no division (session 22); 4: the same without x loads (timing
     * only); with clusters each CTA loads 64 / kCl rows of each x box and multicasts them */
    if (kProd >= 3 && tid == 256) {
      int s = 0, ph = 0, kt = 0, g = (int)blockIdx.x;
      for (int q = 0; q < (int)total; ++q) {
        if (q >= kS) fco::tile::mbar_wait(empty + 8 * s, (uint32_t)ph ^ 1u);
        const uint32_t st = pipe + s * R::kStageBytes;
        if (kTrace && trace && q < kTraceMax) trace[3 * kTraceMax + q] = clock64();
        fco::tile::mbar_arrive_expect_tx(full + 8 * s, kProd == 4 ? R::kWBytes : R::kStageBytes);
#pragma unroll
        for (int b = 0; b < kKb; ++b) {
          if constexpr (kProd == 4) {
          } else if constexpr (kCl > 1) {
            fco::tile::tma_load_2d_mc(st + b * (64 * 128) + crank * (64 * 128 / kCl), &mx,
                                      full + 8 * s, (kt * kKb + b) * 64, (int)crank * (64 / kCl),
                                      (uint16_t)((1u << kCl) - 1));
          } else {
            fco::tile::tma_load_2d(st + b * (64 * 128), &mx, full + 8 * s, (kt * kKb + b) * 64, 0);
          }
        }
#pragma unroll
        for (int b = 0; b < kKb; ++b)
          fco::tile::tma_load_2d(st + R::kXBytes + b * (kC * 128), &mw, full + 8 * s,
                                 (kt * kKb + b) * 64, min(g, groups - 1) * kC);
        if (kTrace && trace && q < kTraceMax) trace[q] = clock64();
        if (++s == kS) s = 0, ph ^= 1;
        if (++kt == num_k) kt = 0, g += (int)gridDim.x;
      }
    }
    if (kProd < 3 && tid == 256)
      for (long long q = 0; q < total; ++q) {
        const int s = (int)(q % kS);
        if (q >= kS) {
          if constexpr (kSpin >= 2) mbar_wait_spin(empty + 8 * s, (uint32_t)(q / kS - 1) & 1u);
          else fco::tile::mbar_wait(empty + 8 * s, (uint32_t)(q / kS - 1) & 1u);
        }
        const int g = min((int)blockIdx.x + (int)(q / num_k) * (int)gridDim.x, groups - 1);
        const int k0 = (int)(q % num_k) * 64;
        const uint32_t st = pipe + s * R::kStageBytes;
        if (kTrace && trace && q < kTraceMax) trace[3 * kTraceMax + q] = clock64();
        fco::tile::mbar_arrive_expect_tx(full + 8 * s, kProd == 2 ? R::kWBytes : R::kStageBytes);
        if constexpr (kProd != 0) {
        } else if constexpr (kCl > 1)
          fco::tile::tma_load_2d_mc(st + crank * (R::kXBytes / kCl), &mx, full + 8 * s, k0,
                                    (int)crank * (64 / kCl), (uint16_t)((1u << kCl) - 1));
        else
          fco::tile::tma_load_2d(st, &mx, full + 8 * s, k0, 0);
        fco::tile::tma_load_2d(st + R::kXBytes, &mw, full + 8 * s, k0, g * kC);
        if (kTrace && trace && q < kTraceMax) trace[q] = clock64();
      }
    /* session 21: lanes 1..31 used to go straight on to the closing cluster_sync (an .aligned
     * barrier) while lane 0 still produced; converge first */
    __syncwarp();
  } else {
    auto release = [&](uint32_t bar) {
      if constexpr (kCl > 1) {
#pragma unroll
        for (int c = 0; c < kCl; ++c) fco::tile::mbar_arrive_cluster(bar, (uint32_t)c);
      } else {
        fco::tile::mbar_arrive(bar);
      }
    };
    float d[kWs ? kC / 2 : kC / 4];
    long long q = 0;
    for (int gi = 0; gi < my_groups; ++gi) {
      const int g = (int)blockIdx.x + gi * (int)gridDim.x;
#pragma unroll
      for (int i = 0; i < (kWs ? kC / 2 : kC / 4); ++i) d[i] = 0.f;
      for (int kt = 0; kt < num_k; ++kt, ++q) {
        const int s = (int)(q % kS);
        if constexpr (kSpin >= 1) mbar_wait_spin(full + 8 * s, (uint32_t)(q / kS) & 1u);
        else fco::tile::mbar_wait(full + 8 * s, (uint32_t)(q / kS) & 1u);
        if (kTrace && trace && tid == 0 && q < kTraceMax) trace[kTraceMax + q] = clock64();
        const uint32_t st = pipe + s * R::kStageBytes;
        const uint32_t b_off = R::kXBytes + (uint32_t)wg * (kC / 2) * 128;
        fco::tile::wgmma_fence();
        if constexpr (kWs == 1) {
#pragma unroll
          for (int b = 0; b < kKb; b += 2)
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
              wg_bf16<64>(d, fco::tile::wgmma_desc(st + (b + wg) * (64 * 128) + kk * 32, 16, 1024),
                          fco::tile::wgmma_desc(st + R::kXBytes + (b + wg) * (kC * 128) + kk * 32,
                                                16, 1024));
        } else {
#pragma unroll
          for (int b = 0; b < kKb; ++b)
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
              fco::gemv::WgmmaN<bf16, kC / 2>::run(
                  d, fco::tile::wgmma_desc(st + b * (64 * 128) + kk * 32, 16, 1024),
                  fco::tile::wgmma_desc(st + b_off + b * (kC * 128) + kk * 32, 16, 1024));
        }
        fco::tile::wgmma_commit();
        fco::tile::wgmma_wait<1>(); /* my slab q − 1 retired: release its stage */
        if (q > 0) {
          __syncwarp();
          if (lane == 0) release(empty + 8 * (int)((q - 1) % kS));
        }
        if (kTrace && trace && tid == 0 && q < kTraceMax) trace[2 * kTraceMax + q] = clock64();
        if (kTrace && trace && tid == 128 && q < kTraceMax) trace[4 * kTraceMax + q] = clock64();
      }
      fco::tile::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < (kWs ? kC / 2 : kC / 4); ++i) asm volatile("" : "+f"(d[i])::"memory");
      const int row0 = ((tid >> 5) & 3) * 16 + (lane >> 2);
      if constexpr (kWs == 1) { /* warpgroup 1 stores its sum, then warpgroup 0 adds its own */
        for (int w = 1; w >= 0; --w) {
          if (wg == w)
#pragma unroll
            for (int j = 0; j < kC / 8; ++j)
#pragma unroll
              for (int c = 0; c < 4; ++c) {
                const int col = 8 * j + 2 * (lane & 3) + (c & 1), row = row0 + 8 * (c >> 1);
                float& o = out[((col / 16) * 64 + row) * 16 + col % 16];
                o = w ? d[4 * j + c] : o + d[4 * j + c];
              }
          asm volatile("bar.sync 1, 256;" ::: "memory");
        }
      } else {
#pragma unroll
        for (int j = 0; j < kC / 16; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int col = wg * (kC / 2) + 8 * j + 2 * (lane & 3) + (c & 1), row = row0 + 8 * (c >> 1);
            out[((col / 16) * 64 + row) * 16 + col % 16] = d[4 * j + c];
          }
        asm volatile("bar.sync 1, 256;" ::: "memory");
      }
      for (int i = tid; i < kGr * 64 * 16; i += 256) {
        const int t = i / (64 * 16), m = (i / 16) % 64, c = i % 16, n = g * kC + t * 16 + c;
        if (m < M && n < N && g < groups) y[(size_t)m * N + n] = out[i];
      }
      asm volatile("bar.sync 1, 256;" ::: "memory");
    }
    if (q > 0) { /* the last slab's release keeps the barrier phases balanced */
      __syncwarp();
      if (lane == 0) release(empty + 8 * (int)((q - 1) % kS));
    }
  }
  if (kTrace && trace && tid == 0) trace[5 * kTraceMax + 1] = clock64();
  if (kTrace && tid == 0) g_gt[2 * blockIdx.x + 1] = globaltimer_ns();
  if constexpr (kCl > 1) fco::tile::cluster_sync(); else __syncthreads();
  if (tid == 0) ring_bars_inval(full, empty, kS);
#else
  __trap();
#endif
}

/* ---- tmawk: wide groups, K split (session 14) -----------------------------------------------
 * Every group reads all of x [M × K] from L2, so with tmaws4's 64-column groups at M = 64 x costs
 * as many L2 bytes as W (128 MB each at 8192×8192; ncu run 0b0b1f7: L2 throughput 70 % in the
 * grouped tile, 82 % in cuBLAS, which multicasts x over clusters of 4). Here a group has kGr·16
 * columns (8: 128 columns, x traffic / 2; 16: 256, / 4) and, so that the grid still fills the
 * SMs, a group's K is split into ks slices (runtime: ks = SMs / groups): item i = (group i / ks,
 * slice i % ks), items i = blockIdx.x + j·gridDim.x. A slice's fp32 partial goes from the
 * registers to ws[slice][m][n]; splitk_sum then adds the slices in slice order (the operator would
 * let a group's last slice do it: the "+sum" row times both kernels). Producer warp + TMA ring as
 * tmaws; warpgroup g computes columns [g·kGr·8, (g+1)·kGr·8) with m64n{kGr·8}k16. */
template <int kS, int kGr, int kKb = 1>
struct WkRing { /* kKb (session 22): 64-k boxes a stage, x boxes then W boxes */
  static constexpr int kCols = kGr * 16;
  static constexpr int kXBytes = 64 * 128 * kKb, kWBytes = kCols * 128 * kKb;
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kBarOff = kS * kStageBytes;
  static constexpr int kSmem = 1024 + kBarOff + 2 * kS * 8;
};

/* fix (flags != nullptr; session 14, not yet run on a GPU): the operator's split-group scheme in
 * the kernel instead of splitk_sum — a helper (slice >= 1) stores its partial to ws[slice], then
 * releases flags[group·ks + slice] = epoch (the launch's number: nothing to reset); the owner
 * (slice 0) waits for its helpers' flags (thread t polls slice 1 + t), adds ws[1..ks−1] to its
 * registers in slice order and writes y. Needs every item its own co-resident block (the host
 * runs it only where groups·ks <= the grid <= SMs). */
__device__ __forceinline__ void st_release_gpu(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_acquire_gpu(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

template <int kS, int kGr, int kKb = 1>
__global__ void __launch_bounds__(kWsThreads, 1)
    tma_wk_kernel(const __grid_constant__ CUtensorMap mx, const __grid_constant__ CUtensorMap mw,
                  float* ws, int M, int N, int K, int groups, int ks, float* y = nullptr,
                  unsigned long long* flags = nullptr, unsigned long long epoch = 0) {
#if FCO_WGMMA_COMPILED
  using R = WkRing<kS, kGr, kKb>;
  constexpr int kC = R::kCols;
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
  const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t full = pipe + R::kBarOff, empty = full + kS * 8;
  const int num_k = (K + 64 * kKb - 1) / (64 * kKb), items = groups * ks; /* stages */
  if (tid == 0) ring_bars_init(full, empty, kS, 8);
  __syncthreads();
  if (tid >= 256) { /* the producer warp */
    if (tid == 256) {
      long long q = 0;
      for (int it = blockIdx.x; it < items; it += gridDim.x) {
        const int g = it / ks, sl = it - g * ks;
        const int lo = (int)((long long)sl * num_k / ks), hi = (int)((long long)(sl + 1) * num_k / ks);
        for (int kt = lo; kt < hi; ++kt, ++q) {
          const int s = (int)(q % kS);
          if (q >= kS) fco::tile::mbar_wait(empty + 8 * s, (uint32_t)(q / kS - 1) & 1u);
          const uint32_t st = pipe + s * R::kStageBytes;
          fco::tile::mbar_arrive_expect_tx(full + 8 * s, R::kStageBytes);
#pragma unroll
          for (int b = 0; b < kKb; ++b)
            fco::tile::tma_load_2d(st + b * (64 * 128), &mx, full + 8 * s, (kt * kKb + b) * 64, 0);
#pragma unroll
          for (int b = 0; b < kKb; ++b)
            fco::tile::tma_load_2d(st + R::kXBytes + b * (kC * 128), &mw, full + 8 * s,
                                   (kt * kKb + b) * 64, g * kC);
        }
      }
    }
    __syncwarp(); /* converged before the closing (aligned) block barrier */
  } else {
    float d[kC / 4];
    long long q = 0;
    const int row0 = ((tid >> 5) & 3) * 16 + (lane >> 2);
    for (int it = blockIdx.x; it < items; it += gridDim.x) {
      const int g = it / ks, sl = it - g * ks;
      const int lo = (int)((long long)sl * num_k / ks), hi = (int)((long long)(sl + 1) * num_k / ks);
#pragma unroll
      for (int i = 0; i < kC / 4; ++i) d[i] = 0.f;
      for (int kt = lo; kt < hi; ++kt, ++q) {
        const int s = (int)(q % kS);
        fco::tile::mbar_wait(full + 8 * s, (uint32_t)(q / kS) & 1u);
        const uint32_t st = pipe + s * R::kStageBytes;
        const uint32_t b_off = R::kXBytes + (uint32_t)wg * (kC / 2) * 128;
        fco::tile::wgmma_fence();
#pragma unroll
        for (int b = 0; b < kKb; ++b)
#pragma unroll
          for (int kk = 0; kk < 4; ++kk)
            wg_bf16<kC / 2>(d, fco::tile::wgmma_desc(st + b * (64 * 128) + kk * 32, 16, 1024),
                            fco::tile::wgmma_desc(st + b_off + b * (kC * 128) + kk * 32, 16, 1024));
        fco::tile::wgmma_commit();
        fco::tile::wgmma_wait<1>(); /* my slab q − 1 retired: release its stage */
        if (q > 0) {
          __syncwarp();
          if (lane == 0) fco::tile::mbar_arrive(empty + 8 * (int)((q - 1) % kS));
        }
      }
      fco::tile::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < kC / 4; ++i) asm volatile("" : "+f"(d[i])::"memory");
      const bool fix = flags != nullptr && ks > 1;
      if (fix && sl == 0) { /* the owner: wait for the helpers, then y = mine + theirs */
        if (tid < ks - 1)
          while (ld_acquire_gpu(flags + (size_t)g * ks + 1 + tid) != epoch) {
          }
        asm volatile("bar.sync 1, 256;" ::: "memory");
#pragma unroll
        for (int j = 0; j < kC / 16; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int n = g * kC + wg * (kC / 2) + 8 * j + 2 * (lane & 3), m = row0 + 8 * h;
            if (m < M && n + 1 < N) {
              float2 acc = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
              for (int o = 1; o < ks; ++o) {
                const float2 v = __ldcg(reinterpret_cast<const float2*>(
                    ws + (size_t)o * M * N + (size_t)m * N + n));
                acc.x += v.x;
                acc.y += v.y;
              }
              *reinterpret_cast<float2*>(y + (size_t)m * N + n) = acc;
            }
          }
        continue;
      }
      float* part = ws + (size_t)sl * M * N;
#pragma unroll
      for (int j = 0; j < kC / 16; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int n = g * kC + wg * (kC / 2) + 8 * j + 2 * (lane & 3), m = row0 + 8 * h;
          if (m < M && n + 1 < N)
            *reinterpret_cast<float2*>(part + (size_t)m * N + n) =
                make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
      if (fix) { /* a helper: its stores, then the flag (bar.sync orders them before thread 0) */
        asm volatile("bar.sync 1, 256;" ::: "memory");
        if (tid == 0) st_release_gpu(flags + (size_t)g * ks + sl, epoch);
      }
    }
    if (q > 0) { /* the last slab's release keeps the barrier phases balanced */
      __syncwarp();
      if (lane == 0) fco::tile::mbar_arrive(empty + 8 * (int)((q - 1) % kS));
    }
  }
  __syncthreads();
  if (tid == 0) ring_bars_inval(full, empty, kS);
#else
  __trap();
#endif
}

/* y = Σ_s ws[s] in slice order (float4s; M·N % 4 == 0 at the probe's shapes) */
__global__ void splitk_sum(const float4* ws, float4* y, size_t n4, int ks) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 a = __ldcs(ws + i);
    for (int s = 1; s < ks; ++s) {
      const float4 b = __ldcs(ws + (size_t)s * n4 + i);
      a.x += b.x;
      a.y += b.y;
      a.z += b.z;
      a.w += b.w;
    }
    y[i] = a;
  }
}

#endif
