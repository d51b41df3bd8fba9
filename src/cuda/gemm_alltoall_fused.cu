/*
 * gemm_alltoall_fused.cu — the peer-table side of fco_gemm_alltoall:
 *   impl 1 "tiles": one persistent kernel per call (ga_kernel_tiles) whose blocks compute output
 *     tiles with tensor cores and store each finished tile straight into the destination rank's
 *     rows, then signal it. Tile math (pick_tile): for bf16 / f16 with K, N multiples of 8 and
 *     16-byte aligned pointers on compute capability 9.0 when the sm_90a image is loaded
 *     (wgmma_usable), WgmmaTileTma (gemm_tile_wgmma.cuh: wgmma, TMA loads, tensor maps encoded
 *     per rank by the launcher, 193 KB of shared memory); if a map cannot be encoded, WgmmaTile
 *     (wgmma, cp.async loads) instead. FCO_GA_TILE=wgmma forces WgmmaTile, =tma2 WgmmaTileTma in
 *     cluster pairs, =mma MmaTile (gemm_tile.cuh, mma.sync), which also runs wherever wgmma
 *     cannot; FfmaTile for f32. The tensor-core tiles are 128×256 and 256 threads, so the plan,
 *     tile order and flags do not depend on the choice.
 *     Status (2×H200, run ad0463c, bench/results/2026-11-30_nvidia-h200-x2_ad0463c): with
 *     WgmmaTileTma, the expert-major order and M tiles per expert, µs impl 0 / tiles = 1433 /
 *     1453 (4096,14336,4096,8,2), 374 / 335 (1024,...), 394 / 241 (512,2048,7168,32,8), 552 /
 *     650 (skew 4), 249 / 161 (128,2048,7168,32,8), 0 wrong; test_gemm_alltoall passes on local
 *     and nccl (the tma2, wgmma and mma tiles last checked in run 0f4e81f);
 *   impl 2 "chunks": the exchange, push and finish kernels around the cuBLAS chunks issued by
 *     gemm_alltoall.cu.
 *
 * impl 1, per call (e = epoch + 1, h = e & 1), blocks_per_rank = G blocks per rank, part = block
 * in rank:
 *   1. part 0 reads the device counts, builds the segment table (one segment per (expert,
 *      destination), in A's row order: rows, first A row, first row among my rows at the
 *      destination; per expert its rows and first tile) in the private plan area of half h, and
 *      posts the header (gemm_alltoall.cuh) to every rank.
 *   2. every block waits for all headers: verdict (bad counts → FCO_ERR_INVALID_ARGUMENT on every
 *      rank, nothing written), base[s] = where my rows start in s's out.
 *   3. tiles t = part, part + G, ... of the tile list: experts in order; an expert's M tiles run
 *      over its rows of every destination at once (A holds them contiguously: one tile may hold
 *      rows for two destinations, and the store cuts it), so a segment of few rows costs no tile
 *      row of its own (decode: 32 rows per segment, 64 per expert at P = 2 — one 128-row tile
 *      per N tile instead of two); taken in groups of kGroupM M tiles × every N tile, M fastest
 *      (the blocks running at once share W's column tiles in L2). Remote and local rows
 *      alternate over the whole kernel instead of all remote tiles first, so NVLink and the
 *      tensor cores work together. A piece for a peer is stored into the peer's staging of
 *      half h (laid out as its out), a piece for me into out. When all its tiles are stored,
 *      the block raises sig_value(e, 0) on slot [me][part] of every peer (one release for all
 *      its stores).
 *   4. receive: every block waits for the flags of all G_r blocks of each peer r that sends me
 *      rows (G_r from r's header), then copies its slice (slice_of: the slices cover every
 *      byte) of r's rows from staging into out. The order of tiles is free.
 * Why staging and not the peer's out: only the workspace is mapped by peers; the copy costs one
 * read and write of the received rows in HBM. With remote and local tiles interleaved a peer's
 * rows are complete only when its last block ends, so the copy runs after the tiles (15–20 µs
 * at 512 tokens: what kept the kernel above the overlap bound). Unless the receiver's out lies
 * in a symmetric buffer (fco_mem_alloc): its header says so (FCO_GA_H_SYM: slot, offset), the
 * senders store there (dest_rows) and it copies nothing — run 4868f9b: 242.0 → 224.3 µs at 512
 * tokens (under the bound, 233.7), 162.2 → 155.6 at decode. FCO_GA_DIRECT=0: staging anyway.
 * A sender whose own header says it lacks that slot (FCO_GA_H_HELD: it freed its buffer of the
 * slot, fco_mem_free being local) stages instead, and the receiver lands that sender's rows:
 * both read the decision off the same two headers (fco_ga_direct).
 * Launch: one grid of G · num_local blocks, every block co-resident (G from occupancy).
 *
 * impl 2, per call (e = epoch + 1 in every kernel: only the finish kernel's end advances it):
 *   exchange (one block per rank): header → every rank, wait for all, verdict; the plan (verdict,
 *     base, roff, recv) into the private plan area of half h. The header is invalid also when
 *     the device counts differ from the counts_host the GEMMs were sized from (digest).
 *   push (per chunk, a few blocks): the chunk's rows from y into out (own) or plan.dst[s] (the
 *     destination's staging of half h, or its symmetric out) at plan.base[s] + row; the plan's
 *     placement read once into shared memory (a dependent load a piece cost 40–80 µs a call,
 *     run 5d02c14);
 *   finish (grid of ≤ 64 blocks per rank): after every push of this rank (stream order), part 0
 *     release-signals kDoneSlot to every peer; every block waits for every peer's, then copies
 *     its slice of the received rows from staging into out (none from a peer that stored into
 *     its symmetric out: the plan's stage_from), and the last block ends the epoch.
 *
 * Back-to-back calls, of this op or any other, without a handshake at the start (the first
 * version made every rank wait for each peer's "I started this call" before writing to it: a
 * round trip of latency per call). The workspace rule (src/core/internal.h) makes it needless:
 *   (1) everything a peer writes into my workspace in call e (headers, staging rows) lies in
 *       half e & 1; what only I write (segment table, plan) lies after it in the same half, or
 *       (impl 2's y) outside both halves' peer bytes;
 *   (2) in every call each rank waits for every peer's header of that call (and impl 2 for every
 *       peer's "all pushed"), raised after the peer started the call.
 *   A peer writes call e's data into me only once it finished its call e - 1, which needed my
 *   signal of call e - 1, raised after I finished call e - 2. So my call e - 2 (the same half)
 *   is over, and my call e - 1, which may still run, reads the other half. Whatever op the next
 *   call is, a peer racing ahead into it writes the other half of the one I am reading. The data
 *   of call e is complete when my waits of call e end: every peer signals after its stores to
 *   me (release / acquire at system scope).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "gemm_alltoall_kernels.cuh"

namespace fco {
namespace ga {
namespace {

/* ---- host side -------------------------------------------------------------------------------- */
/* Blocks of `kernel` co-resident on the current device at kThreads threads and `smem` dynamic
 * shared memory (cached per kernel and device). */
template <auto kKernel>
fco_result_t coresident(char* err, int smem, int* blocks) {
  static std::atomic<int> cache[kMaxDevices]; /* 0 = not computed; benign duplicate work */
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  int per_sm = device < kMaxDevices ? cache[device].load() : 0;
  if (per_sm == 0) {
    if (smem > 48 * 1024) {
      cudaError_t ce = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaFuncSetAttribute(max dynamic smem)");
    }
    cudaError_t ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, kThreads, smem);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (device < kMaxDevices) cache[device].store(per_sm);
  }
  *blocks = per_sm * sms;
  return FCO_OK;
}

/* Launch configuration of a grid of clusters of 2 blocks (kThreads each). */
void pair_config(cudaLaunchConfig_t* cfg, cudaLaunchAttribute* at, unsigned grid, int smem,
                 cudaStream_t stream) {
  *cfg = cudaLaunchConfig_t{};
  *at = cudaLaunchAttribute{};
  at->id = cudaLaunchAttributeClusterDimension;
  at->val.clusterDim.x = 2;
  at->val.clusterDim.y = 1;
  at->val.clusterDim.z = 1;
  cfg->gridDim = dim3(grid);
  cfg->blockDim = dim3(kThreads);
  cfg->dynamicSmemBytes = (size_t)smem;
  cfg->stream = stream;
  cfg->attrs = at;
  cfg->numAttrs = 1;
}

/* coresident for clusters of 2: blocks in co-resident clusters (cached per kernel and device). */
template <auto kKernel>
fco_result_t coresident_pairs(char* err, int smem, int* blocks) {
  static std::atomic<int> cache[kMaxDevices];
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  int clusters = device < kMaxDevices ? cache[device].load() : 0;
  if (clusters == 0) {
    cudaError_t ce = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaFuncSetAttribute(max dynamic smem)");
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[1];
    pair_config(&cfg, at, 2u * (unsigned)sms, smem, 0);
    ce = cudaOccupancyMaxActiveClusters(&clusters, kKernel, &cfg);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveClusters");
    if (device < kMaxDevices) cache[device].store(clusters);
  }
  *blocks = 2 * clusters;
  return FCO_OK;
}

void fill_ranks(const fco_gpu_launch_t* l, RankArgs* out) {
  for (int i = 0; i < l->num_local; ++i) {
    const fco_gemm_a2a_args_t* a = (const fco_gemm_a2a_args_t*)l->r[i].op->u.raw;
    out[i].a = (const char*)a->a;
    out[i].w = (const char*)a->w;
    out[i].out = (char*)a->out;
    out[i].counts = a->counts;
    out[i].dev = l->r[i].dev;
    out[i].ws = (char*)l->r[i].ws;
    out[i].num_experts = a->num_experts;
    rank_sym(l, i, &out[i]);
  }
}

/* fco_last_plan words of a tile: its math and loads. */
template <class Tile>
struct TileWords;
template <typename T, bool kBT, bool kAligned>
struct TileWords<tile::MmaTile<T, kBT, kAligned>> {
  static const char* get() { return kAligned ? "mma.sync" : "mma.sync unaligned"; }
};
template <bool kBT>
struct TileWords<tile::FfmaTile<kBT>> {
  static const char* get() { return "ffma"; }
};
template <typename T, bool kBT>
struct TileWords<tile::WgmmaTile<T, kBT>> {
  static const char* get() { return "wgmma cp.async"; }
};
template <typename T, bool kBT, int kCta, bool kAsyncC>
struct TileWords<tile::WgmmaTileTma<T, kBT, kCta, kAsyncC>> {
  static const char* get() {
    return kCta == 2 ? (kAsyncC ? "wgmma tma cluster=2 epi=async" : "wgmma tma cluster=2")
                     : (kAsyncC ? "wgmma tma epi=async" : "wgmma tma");
  }
};

/* What launch_tiles_t launched (fco_last_plan). */
struct TilesNote {
  const char* tile; /* TileWords */
  int bm, bn, blocks_per_rank;
  char recv[24]; /* recv_words */
};

/* Launches impl 1 with `Tile`. A TMA tile first encodes its tensor maps (host only, nothing
 * issued yet): when that fails for any local rank, *no_maps says what failed and nothing is
 * launched, so the caller can fall back to a pointer tile. */
template <class Tile>
fco_result_t launch_tiles_t(const fco_gpu_launch_t* l, char* err, const char** no_maps,
                            TilesNote* note) {
  const fco_gemm_a2a_args_t* a0 = (const fco_gemm_a2a_args_t*)l->r[0].op->u.raw;
  constexpr int kCta = tile::TileCta<Tile>::value;
  TilesParams p;
  memset(&p, 0, sizeof p);
  if constexpr (tile::IsTmaTile<Tile>::value) {
    for (int i = 0; i < l->num_local; ++i) {
      const fco_gemm_a2a_args_t* a = (const fco_gemm_a2a_args_t*)l->r[i].op->u.raw;
      if (a->a_rows <= 0) continue; /* no tiles read the maps */
      const char* why = Tile::encode(&p.ma[i], &p.mw[i], a->a, (long long)a->a_rows, a->w,
                                     (int)a->k, (int)a->n, a->num_experts);
      if (why) {
        *no_maps = why;
        return FCO_ERR_UNSUPPORTED;
      }
    }
  }
  int cap = 0;
  fco_result_t r = kCta == 1 ? coresident<ga_kernel_tiles<Tile>>(err, Tile::kSmemBytes, &cap)
                             : coresident_pairs<ga_kernel_tiles<Tile>>(err, Tile::kSmemBytes, &cap);
  if (r != FCO_OK) return r;
  int bpr = cap / l->num_local;
  const int64_t want = a0->knobs.tiles_blocks; /* FCO_GA_TILES_BLOCKS (read_knobs) */
  if (want > 0 && want < bpr) bpr = (int)want;
  if (bpr > kMaxParts) bpr = kMaxParts;
  bpr -= bpr % kCta; /* whole clusters per rank */
  if (bpr < kCta)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "gemm_alltoall tiles: %d co-resident blocks cannot give each of %d ranks %d", cap,
                l->num_local, kCta);
  /* Tile indices and per-block tile counts must fit the 32-bit halves of the flags. */
  const double nN = (double)((a0->n + Tile::BN - 1) / Tile::BN);
  const double tiles = ((double)a0->a_rows / Tile::BM + (double)FCO_GEMM_ALLTOALL_MAX_EXPERTS *
                        l->nranks) * nN;
  if (tiles > 2e9)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "gemm_alltoall tiles: up to %.3g output tiles (a_rows %lld, n %lld): more than the "
                "2^31 the flags count",
                tiles, (long long)a0->a_rows, (long long)a0->n);
  fill_ranks(l, p.r);
  p.a_rows = a0->a_rows;
  p.out_rows = a0->out_rows;
  p.K = (int32_t)a0->k;
  p.N = (int32_t)a0->n;
  p.P = l->nranks;
  p.blocks_per_rank = bpr;
  const unsigned grid = (unsigned)bpr * (unsigned)l->num_local;
  cudaError_t ce;
  if constexpr (kCta == 1) {
    ga_kernel_tiles<Tile><<<grid, kThreads, Tile::kSmemBytes, (cudaStream_t)l->stream>>>(p);
    ce = cudaGetLastError();
  } else {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[1];
    pair_config(&cfg, at, grid, Tile::kSmemBytes, (cudaStream_t)l->stream);
    ce = cudaLaunchKernelEx(&cfg, ga_kernel_tiles<Tile>, p);
  }
  if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall tiles: kernel launch");
  note->tile = TileWords<Tile>::get();
  note->bm = Tile::BM;
  note->bn = Tile::BN;
  note->blocks_per_rank = bpr;
  recv_words(p.r, l->num_local, l->nranks, note->recv, sizeof note->recv);
  return FCO_OK;
}

using LaunchFn = fco_result_t (*)(const fco_gpu_launch_t*, char*, const char**, TilesNote*);

template <typename T>
LaunchFn pick_mma(bool bt, bool aligned) {
  if (bt) return aligned ? launch_tiles_t<tile::MmaTile<T, true, true>>
                         : launch_tiles_t<tile::MmaTile<T, true, false>>;
  return aligned ? launch_tiles_t<tile::MmaTile<T, false, true>>
                 : launch_tiles_t<tile::MmaTile<T, false, false>>;
}
/* FCO_GA_TILE: fco_ga_knobs_t::tile, FCO_GA_TILE_NAMES' index (in TileKnob's order); unset, or
 * a value not among them (said on stderr), is kTileTma. The epilogue of the TMA tile,
 * fco_ga_knobs_t::epi_async: FCO_GA_EPI=async (C in its own shared memory, drained by bulk copies
 * while the next tile computes, 3 pipeline stages; measured slower, runs 689b8cb and 0f4e81f) or
 * =store / unset (the default: stores from the C staging in the pipeline's bytes, 4 stages);
 * beside another tile the op layer refuses it (src/ops/gemm_alltoall.c, read_knobs). */
enum TileKnob { kTileTma, kTileTma2, kTileWgmma, kTileMma };
/* The tile of impl 1 (*fallback: what runs when the chosen TMA tile's maps cannot be encoded).
 * Where wgmma runs (bf16 / f16, aligned, wgmma_usable): WgmmaTileTma by default (0.81–0.96 of
 * cuBLAS in tests/gpu/wgmma_tile_check.cu on H200, run 054dd36, against WgmmaTile's 0.61–0.95);
 * FCO_GA_TILE=wgmma WgmmaTile (cp.async), =tma2 WgmmaTileTma in cluster pairs (0.63–0.94 of
 * cuBLAS since run e9f7aa4-tma2: still slower, kept for A/B runs), =mma MmaTile (wgmma_usable
 * says no); unset or =tma (the former opt-in): the default; any other value is said on stderr
 * and runs the default. Elsewhere MmaTile. */
template <typename T>
LaunchFn pick_tile(const fco_ga_knobs_t& k, bool bt, bool aligned, bool wgmma,
                   LaunchFn* fallback) {
  *fallback = pick_mma<T>(bt, aligned);
  if (!wgmma || !aligned) return *fallback;
  const LaunchFn cp = bt ? launch_tiles_t<tile::WgmmaTile<T, true>>
                         : launch_tiles_t<tile::WgmmaTile<T, false>>;
  const TileKnob knob = (TileKnob)k.tile;
  if (knob == kTileWgmma) return cp;
  *fallback = cp;
  if (knob == kTileTma2)
    return bt ? launch_tiles_t<tile::WgmmaTileTma<T, true, 2>>
              : launch_tiles_t<tile::WgmmaTileTma<T, false, 2>>;
  if (k.epi_async)
    return bt ? launch_tiles_t<tile::WgmmaTileTma<T, true, 1, true>>
              : launch_tiles_t<tile::WgmmaTileTma<T, false, 1, true>>;
  return bt ? launch_tiles_t<tile::WgmmaTileTma<T, true>>
            : launch_tiles_t<tile::WgmmaTileTma<T, false>>;
}

/* Which image of this file the driver loaded for the device: the sm_90a pass (WgmmaTile real)
 * gives this kernel 16 bytes of static shared memory, any other pass none (either may add the
 * 1 KB the system reserves per block, hence the test modulo 1024). Never launched;
 * cudaFuncGetAttributes reports the loaded image without touching a stream (capture-safe). */
__global__ void ga_kernel_wgmma_probe(int* out) {
#if FCO_WGMMA_COMPILED
  __shared__ int s[4];
  s[threadIdx.x & 3] = (int)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) & 3];
#endif
}

/* The wgmma tiles for impl 1: compute capability 9.0 with the sm_90a image loaded (the Makefile
 * builds this file for sm_90a where CUDA_ARCH asks for sm_90), unless FCO_GA_TILE=mma. Cached
 * per device. */
fco_result_t wgmma_usable(const fco_ga_knobs_t& k, char* err, bool* usable) {
  static std::atomic<int> cache[kMaxDevices]; /* 0 unknown, 1 no, 2 yes */
  *usable = false;
  if (k.tile == kTileMma) return FCO_OK;
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  int v = device < kMaxDevices ? cache[device].load() : 0;
  if (v == 0) {
    int major = 0, minor = 0;
    cudaError_t ce = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (ce == cudaSuccess)
      ce = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall tiles: compute capability");
    v = 1;
    if (major == 9 && minor == 0) {
      cudaFuncAttributes fa;
      ce = cudaFuncGetAttributes(&fa, ga_kernel_wgmma_probe);
      if (ce == cudaSuccess && fa.sharedSizeBytes % 1024 == 4 * sizeof(int)) v = 2;
      if (ce != cudaSuccess) (void)cudaGetLastError(); /* no image for this device: not sticky */
    }
    if (device < kMaxDevices) cache[device].store(v);
  }
  *usable = v == 2;
  return FCO_OK;
}

}  // namespace

fco_result_t launch_tiles(const fco_gpu_launch_t* l, char* err) {
  const fco_gemm_a2a_args_t* a0 = (const fco_gemm_a2a_args_t*)l->r[0].op->u.raw;
  const bool bt = a0->w_layout == FCO_W_NK;
  bool aligned = a0->k % 8 == 0 && a0->n % 8 == 0;
  for (int i = 0; i < l->num_local; ++i) {
    const fco_gemm_a2a_args_t* a = (const fco_gemm_a2a_args_t*)l->r[i].op->u.raw;
    if (((uintptr_t)a->a | (uintptr_t)a->w | (uintptr_t)a->out) % 16) aligned = false;
  }
  bool wgmma = false;
  if (aligned && (a0->dtype == FCO_BF16 || a0->dtype == FCO_F16)) {
    fco_result_t r = wgmma_usable(a0->knobs, err, &wgmma);
    if (r != FCO_OK) return r;
  }
  LaunchFn fn = nullptr, fallback = nullptr;
  switch (a0->dtype) {
    case FCO_BF16: fn = pick_tile<__nv_bfloat16>(a0->knobs, bt, aligned, wgmma, &fallback); break;
    case FCO_F16: fn = pick_tile<__half>(a0->knobs, bt, aligned, wgmma, &fallback); break;
    case FCO_F32:
      fn = bt ? launch_tiles_t<tile::FfmaTile<true>> : launch_tiles_t<tile::FfmaTile<false>>;
      break;
    default: break;
  }
  if (!fn) return fail(err, FCO_ERR_UNSUPPORTED, "gemm_alltoall tiles: dtype %d", (int)a0->dtype);
  const char* no_maps = nullptr;
  TilesNote note;
  fco_result_t r = fn(l, err, &no_maps, &note);
  /* fco_last_plan, e.g. " kernel tiles wgmma tma 128x256 direct, 132 blocks/rank" */
  if (!no_maps) {
    if (r == FCO_OK)
      fco_plan_append(l->plan, " kernel tiles %s %dx%d%s, %d blocks/rank", note.tile, note.bm,
                      note.bn, note.recv, note.blocks_per_rank);
    return r;
  }
  /* Tensor maps refused (cuTensorMapEncodeTiled missing or rejecting a stride / address):
   * nothing was launched; the same plan with the cp.async tile. The tile never changes the
   * plan, tile order or flags, so ranks that chose differently still agree. */
  fco_log(l->r[0].op->comm, "gemm_alltoall tiles: %s failed, falling back to the cp.async tile",
          no_maps);
  no_maps = nullptr;
  r = fallback(l, err, &no_maps, &note);
  if (no_maps) return fail(err, FCO_ERR_INTERNAL, "gemm_alltoall tiles: %s failed", no_maps);
  if (r == FCO_OK)
    fco_plan_append(l->plan, " kernel tiles %s (no tensor maps) %dx%d%s, %d blocks/rank",
                    note.tile, note.bm, note.bn, note.recv, note.blocks_per_rank);
  return r;
}

fco_result_t launch_exchange(const fco_gpu_launch_t* l, const RankArgs* ra, void* stream,
                             char* err) {
  const fco_gemm_a2a_args_t* a0 = (const fco_gemm_a2a_args_t*)l->r[0].op->u.raw;
  ExParams p;
  memset(&p, 0, sizeof p);
  for (int i = 0; i < l->num_local; ++i) p.r[i] = ra[i];
  p.a_rows = a0->a_rows;
  p.out_rows = a0->out_rows;
  p.N = (int32_t)a0->n;
  p.P = l->nranks;
  p.es = (int32_t)fco_dtype_size(a0->dtype);
  ga_kernel_exchange<<<(unsigned)l->num_local, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall chunks: exchange launch");
}

fco_result_t launch_push(const RankArgs& ra, const char* y, int P, int64_t out_rows, int64_t n,
                         int es, const int64_t (*pieces)[4], int npieces, int blocks,
                         void* stream, char* err) {
  if (npieces > kMaxPieces)
    return fail(err, FCO_ERR_INTERNAL, "gemm_alltoall chunks: %d pieces in one push (max %d)",
                npieces, kMaxPieces);
  PushParams p;
  memset(&p, 0, sizeof p);
  p.dev = ra.dev;
  p.y = y;
  p.out = ra.out;
  p.out_rows = out_rows;
  p.n = n;
  p.row_bytes = n * es;
  p.P = P;
  p.es = es;
  p.npieces = npieces;
  for (int i = 0; i < npieces; ++i) {
    p.pc[i].s = (int32_t)pieces[i][0];
    p.pc[i].rows = (int32_t)pieces[i][1];
    p.pc[i].y_row = pieces[i][2];
    p.pc[i].d_local = pieces[i][3];
  }
  ga_kernel_push<<<(unsigned)blocks, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall chunks: push launch");
}

fco_result_t launch_progress(const RankArgs& ra, int P, int64_t out_rows, int64_t n, int es,
                             const int64_t* rows_to, bool snap, void* stream, char* err) {
  ProgParams p;
  memset(&p, 0, sizeof p);
  p.dev = ra.dev;
  p.out_rows = out_rows;
  p.n = n;
  p.P = P;
  p.es = es;
  p.snap = snap;
  for (int s = 0; s < P && s < kMaxP; ++s) p.rows_to[s] = rows_to[s];
  ga_kernel_progress<<<1, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall chunks: progress launch");
}

fco_result_t launch_land(const RankArgs& ra, int P, int64_t out_rows, int64_t n, int es,
                         int blocks, void* stream, char* err) {
  LandParams p;
  memset(&p, 0, sizeof p);
  p.dev = ra.dev;
  p.out = ra.out;
  p.out_rows = out_rows;
  p.n = n;
  p.row_bytes = n * es;
  p.P = P;
  p.es = es;
  ga_kernel_land<<<(unsigned)blocks, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall chunks: land launch");
}

fco_result_t launch_finish(const fco_gpu_launch_t* l, const RankArgs* ra, int* blocks_per_rank,
                           char* err) {
  const fco_gemm_a2a_args_t* a0 = (const fco_gemm_a2a_args_t*)l->r[0].op->u.raw;
  int cap = 0;
  fco_result_t r = coresident<ga_kernel_finish>(err, 0, &cap);
  if (r != FCO_OK) return r;
  /* Every block waits for each peer's "all pushed", raised by the peer's part 0: on the local
   * transport that is a block of this grid, so the grid must be co-resident. */
  int bpr = cap / l->num_local;
  if (bpr > 64) bpr = 64;
  if (bpr < 1)
    return fail(err, FCO_ERR_UNSUPPORTED, "gemm_alltoall chunks: no room for %d ranks' finish",
                l->num_local);
  FinishParams p;
  memset(&p, 0, sizeof p);
  for (int i = 0; i < l->num_local; ++i) p.r[i] = ra[i];
  p.es = (int32_t)fco_dtype_size(a0->dtype);
  p.n = a0->n;
  p.out_rows = a0->out_rows;
  p.row_bytes = a0->n * (int64_t)p.es;
  p.P = l->nranks;
  p.blocks_per_rank = bpr;
  ga_kernel_finish<<<(unsigned)(bpr * l->num_local), kThreads, 0, (cudaStream_t)l->stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall chunks: finish launch");
  *blocks_per_rank = bpr;
  return FCO_OK;
}

fco_result_t launch_barrier(fco_dev_rank_t* dev, void* stream, char* err) {
  ga_kernel_barrier<<<1, kThreads, 0, (cudaStream_t)stream>>>(dev);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall nccl: barrier launch");
}

fco_result_t preload_kernels(const fco_ga_knobs_t& k, char* err) {
  static std::atomic<int> done[kMaxDevices];
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  if (device < kMaxDevices && done[device].load()) return FCO_OK;
  const void* fns[] = {(const void*)ga_kernel_exchange, (const void*)ga_kernel_push,
                       (const void*)ga_kernel_finish, (const void*)ga_kernel_barrier,
                       (const void*)ga_kernel_progress, (const void*)ga_kernel_land};
  if ((r = load_kernels(err, fns, 6, "gemm_alltoall: cudaFuncGetAttributes")) != FCO_OK) return r;
  int cap = 0;
  if ((r = coresident<ga_kernel_finish>(err, 0, &cap)) != FCO_OK) return r;
  bool wgmma = false; /* decide (and load the probe) before any capture or spinning kernel */
  if ((r = wgmma_usable(k, err, &wgmma)) != FCO_OK) return r;
  if (device < kMaxDevices) done[device].store(1);
  return FCO_OK;
}

}  // namespace ga
}  // namespace fco
