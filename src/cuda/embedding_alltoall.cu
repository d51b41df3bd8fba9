/*
 * embedding_alltoall.cu — fco_embedding_alltoall on GPUs (semantics: include/fco.h; argument
 * record and workspace sizes: src/ops/embedding_alltoall.h). Entry: fco_cuda_embedding_alltoall_run
 * (every GPU transport) and fco_cuda_embedding_alltoall_after_group (nccl, after its NCCL group).
 * This file: impl 0's kernels (lookup, permute), the host side (parameters, variant choice,
 * launches, impl 0's All-to-All) and the entry points. The rest:
 *   embedding_alltoall.cuh        parameters, tiles (their design), launch helpers
 *   embedding_alltoall_pool.cuh   pool_tile, every kernel's lookup (pooling, bad data)
 *   embedding_alltoall_fused.cu   impl 1, the fused kernel (its protocol)
 *
 * impl 0 — unfused: ea_kernel_lookup pools [B, T_r, D] (sample-major, the all_to_all_single send
 *   buffer) into ws[0, S); the All-to-All moves block [bstart_s, +b_s) to rank s's ws[S + b_s ·
 *   toff_r · D · esize, ...): grouped ncclSend/ncclRecv of those byte counts on nccl (zero-byte
 *   pairs skipped), cudaMemcpyAsync between the virtual ranks' workspaces on local; then
 *   ea_kernel_permute writes out[i][toff_r + t] = recv_r[i][t]. On nccl the permute is
 *   enqueued by fco_cuda_embedding_alltoall_after_group, after the transport's NCCL group ended
 *   (inside a group, NCCL issues its work only at ncclGroupEnd), then a barrier kernel (every
 *   rank signals every peer and waits for all, advancing the epoch: the staging is outside the
 *   epoch halves, so no peer may start its next call before this rank's permute has read it;
 *   found at P = 4, run 39ee289). local: one stream for all ranks, no barrier. P == 1: the
 *   lookup writes out; no signals, no epoch.
 *
 * Knobs (read once a call by the op layer, src/ops/embedding_alltoall.c's read_knobs, which
 * refuses the discrete ones at values no kernel exists for, into the record's fco_ea_knobs_t:
 * EaParams::knobs here; measured in docs/embedding_alltoall{,_history}.md):
 *   FCO_EA_LEAN          1 (default) = the lean kernels wherever rows are whole 16-byte units of
 *                        <= 512 bytes: impl 0's lookup (ea_kernel_lean_stream) and impl 1
 *                        (ea_kernel_fused_lean, embedding_alltoall_fused_lean.cu); 0 = the
 *                        previous kernels, which the knobs below from FCO_EA_SIGNAL_EVERY on
 *                        (but FCO_EA_LAND_KB) tune. impl 1's protocol follows it: set it alike on
 *                        every rank (a mismatch ends in FCO_ERR_TIMEOUT, never in wrong data)
 *   FCO_EA_LEAN_BLOCKS   the fused lean kernel compiled for 3 (80 registers) or 4 blocks a SM (64
 *                        registers); unset: 4 for one local rank with aligned pointers (the
 *                        index-type kernels) in the static order (run c32d1a1: 2-7 % faster on
 *                        long bags) and in the claimed order where bags hold > 4 rows on average
 *                        (run 65443c9), else 3
 *   FCO_EA_LEAN_DYN      the fused lean kernel's tile order: 1 = claimed (two queues, remote and
 *                        local, one atomic a tile; kernel variant kDyn), 0 = static; unset =
 *                        claimed (but with FCO_EA_LEAN_MIX, and where no local rank has more
 *                        tiles than warps: fco_ea_few_tiles; until session 12 only where bags
 *                        held <= 16 rows; run 6cc8f88)
 *   FCO_EA_LEAN_SPLIT    claimed order: the blocks on the first s % of the SMs (default 60) take
 *                        remote tiles first, the others local first
 *   FCO_EA_LEAN_MIX      static order: 0..100 (default 0 = remote tiles first), the % of the local
 *                        tiles its remote ones are spread over (fco_ea_lean_order; run 7d1cf97)
 *   FCO_EA_LEAN_STAGES   the fused lean kernel's cp.async ring: 3 (default) or 4 stages (run
 *                        61b33ef: bf16 2-6 % faster on short rows, f32 up to 3.5 % slower)
 *   FCO_EA_LEAN_CHUNKS   both lean kernels: the tile size rule's chunks of rows a lane group
 *                        should get at the mean bag length, 1..64 (default by the mean bag: 16
 *                        at >= 16 rows, 8 at >= 8, else 4; lean_tile_bags, run 731ced0)
 *   FCO_EA_LOOKUP_DYN    impl 0's lean lookup: 1 = warps claim tiles from a queue, 0 = static
 *                        order (default: claimed where bags hold >= 8 rows on average and
 *                        the tiles outnumber the warps; fco_ea_lookup_dyn, fco_ea_few_tiles,
 *                        run 2026-12-04_nvidia-h200_dyn-ab)
 *   FCO_EA_LEAN_TABLES   the fused lean kernel: n > 1 = warp tiles of up to n neighbouring tables
 *                        (kernel variant kMT, static order; run 7d1cf97: not faster but for
 *                        32-byte rows)
 *   FCO_EA_LAND_KB       land unit size in KiB, 4..16384 (default 64), both fused kernels
 *   FCO_EA_SIGNAL_EVERY  remote tiles per counter batch, 1..16 (default 4)
 *   FCO_EA_LAND_POLL     0 = land only after the local tiles (default), 1 = also between them
 *   FCO_EA_STREAM        1 = the streaming lookup (pool_tile_stream: cp.async row ring, runs of
 *                        bags) for 16-byte rows of <= 512 bytes, in impl 0's lookup and the
 *                        fused kernel; 0 = the kB paths below everywhere; unset = stream_auto:
 *                        the fused kernel where a mean bag holds <= 256 bytes of rows
 *   FCO_EA_BAGS          the kB paths: bags per lane group in flight: 0 = auto (default), 1 or 4
 *   FCO_EA_MIX           unset = remote pool tiles first (default); 0..100 = the kernel variant
 *                        that interleaves each block's remote tiles evenly with mix % of its
 *                        local ones (100: over its whole order; 0: remote first as by default,
 *                        through the variant: its own cost)
 *   FCO_EA_DECODE        unset = ea_kernel_fused32 (the fused kernel with a 32-bit tile cursor;
 *                        run 2ee934f: 1-13 % faster) for rows of <= 256 bytes, ea_kernel_fused
 *                        (the previous one) for longer rows (run ad0463c: the cursor 7-14 %
 *                        slower with f32 D = 128); cursor / 1 = always the cursor kernel; old /
 *                        0 = always the previous one (embedding_alltoall_fused.cu)
 *   FCO_EA_PROFILE       1 = print the fused kernel's per-block timeline to stderr (diagnostic);
 *                        2 = the same with the lean kernel's remote tiles stored locally (wrong
 *                        results by design: times the pooling without NVLink stores)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include <nccl.h>

#include "embedding_alltoall_pool.cuh"
#include "embedding_alltoall_lean.cuh"

namespace fco {
namespace ea {
namespace {

/* Knob defaults (see the header; the op layer's read_knobs holds the others). */
constexpr int kAutoBagsMaxLen = 16; /* FCO_EA_BAGS=0: kB = 4 when the mean bag length is ≤ this */

/* ---- impl 0 ------------------------------------------------------------------------------- */
/* Pooled [B, T_r, D] into ws[0, S) (P > 1) or out (P == 1). Grid: num_local × bpr blocks. */
template <typename T, bool kVec, int kNV, int kB>
__global__ void __launch_bounds__(kThreads, kB == 0 ? kStreamMinBlocks : 2)
    ea_kernel_lookup(const __grid_constant__ EaParams p) {
  lookup_tiles<T, kVec, kNV, kB>(p);
}
/* out[i][toff_q + t] = recv_q[i][t] for every source q: recv_q at ws + S + b_me · toff_q · D.
 * One warp per (local rank, row, source). */
/* impl 0 on nccl, after the permute: every rank waits for every peer (prims.cuh rank_barrier;
 * slot FCO_SIG_SLOTS − 2, outside the fused kernels' counter slots 0..68). */
constexpr int kBarrierSlot = FCO_SIG_SLOTS - 2;
static_assert(kBarrierSlot > kPresenceSlot + 4, "the barrier slot must not be a counter slot");
__global__ void __launch_bounds__(kThreads) ea_kernel_barrier(fco_dev_rank_t* dev) {
  /* bad data of this rank (its own record) must not end the wait: its next call may be fused */
  rank_barrier(dev, FCO_OP_EMBEDDING_ALLTOALL, kBarrierSlot, FCO_ERR_INVALID_ARGUMENT);
}

__global__ void __launch_bounds__(kThreads) ea_kernel_permute(const __grid_constant__ EaParams p) {
  const int esize = p.esize;
  const int lane = threadIdx.x & 31;
  const int64_t warp0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const int P = p.nranks;
  const size_t vec = (size_t)p.D * esize, row = (size_t)p.T * vec;
  int64_t total = 0;
  for (int li = 0; li < p.num_local; ++li) {
    const int me = p.r[li].rank;
    total += (p.bstart[me + 1] - p.bstart[me]) * P;
  }
  for (int64_t w = warp0; w < total; w += nwarps) {
    int64_t rem = w;
    int li = 0;
    for (; li < p.num_local; ++li) {
      const int me = p.r[li].rank;
      const int64_t n = (p.bstart[me + 1] - p.bstart[me]) * P;
      if (rem < n) break;
      rem -= n;
    }
    const EaRank& rk = p.r[li];
    const int me = rk.rank;
    const int64_t bme = p.bstart[me + 1] - p.bstart[me];
    const int64_t i = rem / P;
    const int q = (int)(rem - i * P);
    const int Tq = p.toff[q + 1] - p.toff[q];
    if (Tq == 0) continue;
    const size_t seg = (size_t)Tq * vec;
    const char* src = rk.ws + p.send_bytes + (size_t)bme * p.toff[q] * vec + (size_t)i * seg;
    char* dst = rk.out + (size_t)i * row + (size_t)p.toff[q] * vec;
    const uintptr_t m = (uintptr_t)src | (uintptr_t)dst | seg;
    if (m % 16 == 0) {
      for (size_t x = lane; x < seg / 16; x += 32) ((uint4*)dst)[x] = ((const uint4*)src)[x];
    } else if (m % 4 == 0) {
      for (size_t x = lane; x < seg / 4; x += 32) ((uint32_t*)dst)[x] = ((const uint32_t*)src)[x];
    } else {
      for (size_t x = lane; x < seg / 2; x += 32) ((uint16_t*)dst)[x] = ((const uint16_t*)src)[x];
    }
  }
}

/* ---- host side -------------------------------------------------------------------------- */
int pow2_at_least(int x) {
  int g = 1;
  while (g < x) g <<= 1;
  return g;
}

/* Lanes per bag of the 16-byte path for a row of D·esize bytes (also fixes the tile size). */
int vec_lanes(int64_t D, size_t es) {
  const int64_t nvec = ((int64_t)D * (int64_t)es + 15) / 16;
  return nvec >= 32 ? 32 : pow2_at_least((int)nvec);
}

/* FCO_EA_STREAM unset: the streaming lookup only in the fused kernel (impl 1) and only where a
 * mean bag holds at most kStreamAutoBagBytes of rows (row bytes × mean bag length). Run be83f48
 * (2×H200, both dtypes, FCO_EA_STREAM=1 vs 0 side by side): impl 0's lookup was slower with it
 * on all 14 workloads (its per-row instruction cost: cp.async bookkeeping for one row a lane
 * group, where the kB paths share an index load over G rows); the fused kernel was 4–7 % faster
 * where bags are short — bf16 65536/64/1 186.6 vs 200.1, 131072/32/4 258.9 vs 268.9, 262144/16/2
 * 119.6 vs 126.3 µs, f32 65536/64/1 357.1 vs 377.0 — and 8–22 % slower for 256–512-byte rows
 * with L ≥ 8 and f32 131072/32/4 (512-byte bags). bf16 65536/64/8 (1 KB bags: 321.7 vs 330.1)
 * is the one gain this rule leaves out. */
constexpr double kStreamAutoBagBytes = 256.0;
bool stream_auto(int impl, double bag_bytes) { return impl == 1 && bag_bytes <= kStreamAutoBagBytes; }

/* kB = 4 only on the 16-byte path with one vector per lane (rows ≤ 512 bytes): elsewhere the
 * rows themselves keep enough bytes in flight, and registers are short. */
Variant pick_variant(const fco_gpu_launch_t* l, const fco_ea_args_t* a0, size_t es, int impl) {
  bool vec = ((size_t)a0->dim * es) % 16 == 0;
  int64_t nidx = 0, nbags = 0;
  for (int i = 0; i < l->num_local; i++) {
    const fco_ea_args_t* a = fco_ea_args(l->r[i].op);
    if ((uintptr_t)a->weight % 16 || (uintptr_t)a->out % 16) vec = false;
    nidx += a->num_indices;
    nbags += (int64_t)a->tables_per_rank[a->rank] * a->batch;
  }
  const int64_t units = vec ? (int64_t)a0->dim * (int64_t)es / 16 : a0->dim;
  Variant v;
  v.vec = vec;
  v.nv = units > 32 ? 4 : 1;
  v.lanes = units >= 32 ? 32 : pow2_at_least((int)units);
  const long long knob = a0->knobs.bags;
  const bool short_bags = nidx <= (int64_t)kAutoBagsMaxLen * nbags; /* mean length */
  v.bags = vec && v.nv == 1 && (knob == 4 || (knob != 1 && short_bags)) ? 4 : 1;
  /* FCO_EA_STREAM: 1 the streaming path wherever it applies, 0 the kB paths, unset: auto. */
  const long long st = a0->knobs.stream;
  const double bag_bytes = nbags > 0 ? (double)a0->dim * (double)es * (double)nidx / (double)nbags : 0.0;
  if (vec && v.nv == 1 && (st > 0 || (st < 0 && stream_auto(impl, bag_bytes)))) v.bags = 0;
  return v;
}

/* fco_last_plan words of a kB-path variant (pick_t's choice): "vec kNV=1 kB=4", "vec stream",
 * "scalar kNV=4 kB=1". */
void variant_words(const Variant& v, char* b, size_t n) {
  if (v.bags == 0) snprintf(b, n, "%s stream", v.vec ? "vec" : "scalar");
  else snprintf(b, n, "%s kNV=%d kB=%d", v.vec ? "vec" : "scalar", v.nv, v.bags);
}

/* What impl 0's lean lookups ran: W and blocks a rank, over the launched local ranks. */
struct LeanLookupNote {
  PlanSpan W, grid, dyn;
};

fco_result_t fill_params(const fco_gpu_launch_t* l, EaParams* p, char* err) {
  const fco_ea_args_t* a0 = fco_ea_args(l->r[0].op);
  const size_t es = fco_dtype_size(a0->dtype);
  memset(p, 0, sizeof *p);
  p->knobs = &a0->knobs;
  const int P = l->nranks;
  p->nranks = P;
  p->num_local = l->num_local;
  p->B = a0->batch;
  p->T = a0->num_tables;
  p->D = (int32_t)a0->dim;
  p->mean = a0->pooling == FCO_EMB_POOL_MEAN;
  for (int q = 0; q < P; q++) {
    p->bstart[q + 1] = p->bstart[q] + a0->batch_per_rank[q];
    p->toff[q + 1] = p->toff[q] + a0->tables_per_rank[q];
  }
  /* Tiling per source: agreed values only (D, dtype, the splits), never the path taken. */
  const int per_warp = 32 / vec_lanes(a0->dim, es);
  const int bags = kWarps * per_warp * kBagsPerLane;
  const int64_t land = land_kib(a0->knobs);
  int64_t bmax = 0;
  for (int q = 0; q < P; q++)
    if (a0->batch_per_rank[q] > bmax) bmax = a0->batch_per_rank[q];
  for (int q = 0; q < P; q++) {
    const int Tq = a0->tables_per_rank[q];
    p->tile_t[q] = Tq < 1 ? 1 : Tq < per_warp ? Tq : per_warp;
    p->tile_s[q] = bags / p->tile_t[q];
    const int64_t nch_max = (bmax + p->tile_s[q] - 1) / p->tile_s[q];
    const int64_t cpg = (nch_max + kMaxGroups - 1) / kMaxGroups;
    p->cpg[q] = (int32_t)(cpg < 1 ? 1 : cpg);
    /* Land slices: about FCO_EA_LAND_KB KiB each, at least one row. */
    const int64_t grows = (int64_t)p->cpg[q] * p->tile_s[q];
    const double gbytes = (double)grows * (double)Tq * (double)a0->dim * (double)es;
    double split = gbytes / ((double)land * 1024.0);
    split = split < 1.0 ? 1.0 : split > (double)grows ? (double)grows : split;
    p->land_split[q] = (int32_t)split + ((double)(int32_t)split < split ? 1 : 0);
    if (p->land_split[q] > grows) p->land_split[q] = (int32_t)grows;
  }
  const long long sig_every = a0->knobs.signal_every;
  p->sig_every = (int32_t)(sig_every < 1 ? 1 : sig_every > kMaxPending ? kMaxPending : sig_every);
  p->land_poll = (int32_t)a0->knobs.land_poll;
  const long long mix = a0->knobs.mix;
  p->mix = (int32_t)(mix < 0 ? -1 : mix > 100 ? 100 : mix);
  /* FCO_EA_DECODE: "old" / "0" the previous fused kernel, "cursor" / "1" the 32-bit cursor
   * kernel; unset (or another value, said on stderr): the cursor kernel for rows of at most 256
   * bytes, the previous one for longer rows (run ad0463c, f32 D = 128 — 512-byte rows: the
   * cursor kernel 7–14 % slower, even slower than impl 0; rows of ≤ 256 bytes, bf16 and f32:
   * 1–13 % faster). */
  const int64_t dec = a0->knobs.decode; /* read_knobs: old / 0 / cursor / 1 = 0..3, or -1 */
  p->decode = dec >= 0 ? dec / 2 : (double)a0->dim * (double)es <= 256.0;
  p->recv_bytes = fco_ea_recv_bytes(a0->tables_per_rank, a0->batch_per_rank, P, a0->dim, es);
  p->send_bytes = fco_ea_send_bytes(a0->tables_per_rank, a0->batch_per_rank, P, a0->dim, es);
  int32_t nb = 0;
  for (int i = 0; i < l->num_local; i++) {
    const fco_ea_args_t* a = fco_ea_args(l->r[i].op);
    EaRank* r = &p->r[i];
    const int Tr = a->tables_per_rank[a->rank];
    if (nb + Tr + 1 > kRowBaseCap)
      return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: %d local tables exceed %d",
                  nb + Tr + 1, kRowBaseCap);
    r->weight = (const char*)a->weight;
    r->offsets = a->offsets;
    r->indices = a->indices;
    r->psw = a->per_sample_weights;
    r->out = (char*)a->out;
    r->ws = (char*)l->r[i].ws;
    r->dev = l->r[i].dev;
    r->num_indices = a->num_indices;
    r->row_base0 = nb;
    r->rank = a->rank;
    r->idx64 = a->index_type == FCO_EMB_INDEX_I64;
    { /* symmetric out (fco_mem_alloc): see EaRank::sym_bits */
      fco_comm_t comm = l->r[i].op->comm;
      int64_t T = 0;
      for (int q = 0; q < P; q++) T += a->tables_per_rank[q];
      const size_t out_bytes = (size_t)a->batch_per_rank[a->rank] * (size_t)T * (size_t)a->dim * es;
      size_t off = 0;
      int k = -1, cap = 0;
      if (comm->sym_dev && a->knobs.direct) {
        k = fco_sym_find(comm, a->out, out_bytes, &off);
        for (int q = 0; q < FCO_MAX_SYMMETRIC; q++) cap |= comm->sym[q].state != FCO_SYM_FREE;
        /* Announced only where peers may store 16-byte vectors (their rows are whole 16-byte
         * units) and the offset packs as (e << 32) | off / 16 (the fused lean kernel's signal
         * slot); other symmetric outs are landed, as ordinary ones. */
        if (k >= 0 && ((uintptr_t)a->out % 16 != 0 || off % 16 != 0 || off >> 36 != 0)) k = -1;
      }
      r->sym = (void* const*)comm->sym_dev;
      r->out_off = k >= 0 ? (int64_t)off : 0;
      r->sym_bits = ((k + 1) << 1) | cap;
    }
    p->row_base[nb] = 0;
    for (int t = 0; t < Tr; t++) p->row_base[nb + t + 1] = p->row_base[nb + t] + a->table_rows[t];
    nb += Tr + 1;
  }
  return FCO_OK;
}

template <typename T, bool kVec, int kNV, int kB>
struct RunLookup {
  static fco_result_t run(const EaParams& p, int64_t max_tasks, int num_local, void* stream,
                          char* err) {
    return launch<ea_kernel_lookup<T, kVec, kNV, kB>>(p, max_tasks, num_local, stream, "lookup",
                                                      err, kB == 0 ? kStreamSmem : 0);
  }
};

/* ---- impl 0's lookup by the lean kernel (embedding_alltoall_lean.cuh; FCO_EA_LEAN=0: the
 * previous lookup kernel) ------------------------------------------------------------------ */
/* Local rank li's mean bag length (rows a bag), 0 without bags: the tile size rule's and the
 * order rule's input. */
double lean_mean_len(const EaParams& p, int li) {
  const int Tr = ea_tables(p, p.r[li].rank);
  return Tr > 0 && p.B > 0 ? (double)p.r[li].num_indices / ((double)Tr * (double)p.B) : 0.0;
}
/* Local rank li's lookup into ws (P > 1) or out: one launch of the whole GPU. */
template <typename T, typename I, bool kDyn>
fco_result_t launch_lean_t(const EaParams& p, int li, void* stream, LeanLookupNote* note,
                           char* err) {
  constexpr auto k = ea_kernel_lean_stream<T, I, kLeanStages, kLeanRows, kDyn>;
  const EaRank& rk = p.r[li];
  const int me = rk.rank, Tr = ea_tables(p, me), G = p.lanes;
  if (Tr == 0 || p.B == 0) return FCO_OK;
  int device = 0, sms = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  const size_t most = lean_smem(1, kLeanMaxTileBags); /* the most any G and W need */
  if ((res = opt_in_smem<k>(device, (int)most, err)) != FCO_OK) return res;
  int per_sm = 0;
  cudaError_t ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads,
                                                                 lean_smem(G, kLeanMaxTileBags));
  if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int W = lean_tile_bags(*p.knobs, G, lean_mean_len(p, li), p.B, Tr,
                               (int64_t)sms * (per_sm > 0 ? per_sm : 1) * kWarps);
  const size_t smem = lean_smem(G, W);
  ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, smem);
  if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (per_sm < 1)
    return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: the lean lookup does not fit an SM");
  static thread_local LeanParams lp; /* 8 KB: not on the stack */
  memset(&lp, 0, sizeof lp);
  lp.weight = rk.weight;
  lp.indices = rk.indices;
  lp.offsets = rk.offsets;
  lp.psw = rk.psw;
  lp.out = p.nranks > 1 ? rk.ws : rk.out;
  lp.dev = rk.dev;
  lp.queue = kDyn ? &rk.dev->lookup_q : nullptr;
  lp.table0 = p.toff[me];
  lp.num_indices = rk.num_indices;
  lp.B = p.B;
  lp.stride = (int64_t)Tr * p.D;
  for (int t = 0; t <= Tr; t++) lp.row_base[t] = p.row_base[rk.row_base0 + t];
  lp.T = Tr;
  lp.D = p.D;
  int lg = 0;
  while ((1 << lg) < G) lg++;
  lp.lg_G = lg;
  lp.W = W;
  lp.mean = p.mean;
  const unsigned grid = (unsigned)(sms * per_sm);
  /* fewer than 2^31 (lean_applies: T_r · B + 10^6 < 2^31, the warps far fewer than 10^6) */
  lp.ntiles = (uint32_t)((int64_t)Tr * ((p.B + W - 1) / W));
  lp.nw = grid * (unsigned)(kThreads / 32);
  k<<<grid, kThreads, smem, (cudaStream_t)stream>>>(lp);
  ce = cudaGetLastError();
  if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_embedding_alltoall: lean lookup launch");
  note->W.add(W);
  note->grid.add(grid);
  return FCO_OK;
}
/* Whether the lean lookup takes impl 0's lookup (FCO_EA_LEAN not 0, the 16-byte path with one
 * vector per lane, tile numbers of every local rank in 31 bits). */
bool lean_applies(const EaParams& p, const Variant& v) {
  if (!p.knobs->lean || !v.vec || v.nv != 1) return false;
  for (int i = 0; i < p.num_local; i++) {
    const int Tr = ea_tables(p, p.r[i].rank);
    if (Tr > kLeanMaxTables || (int64_t)Tr * p.B + 1000000 >= ((int64_t)1 << 31)) return false;
  }
  return true;
}
/* FCO_EA_LOOKUP_DYN (read at every call): 1 = the lookup's warps claim their tiles from a
 * queue in the rank's device state (ea_kernel_lean_stream's claimed order), 0 = the static
 * order (warp w takes tiles w, w + warps, ...); unset: claimed where the rank's bags hold ≥ 8
 * rows on average and its tiles outnumber the warps of kLeanMinBlocks blocks a SM
 * (fco_ea_lookup_dyn, fco_ea_few_tiles). */
template <typename T>
fco_result_t launch_lean(const EaParams& p, void* stream, LeanLookupNote* note, char* err) {
  const long long knob = p.knobs->lookup_dyn;
  int device = 0, sms = 0;
  if (knob < 0) {
    const fco_result_t res = current_device(err, &device, &sms);
    if (res != FCO_OK) return res;
  }
  const int64_t batch[2] = {0, p.B};
  for (int i = 0; i < p.num_local; i++) {
    const int few = knob < 0 && fco_ea_few_tiles(ea_tables(p, p.r[i].rank), batch, 1, p.lanes,
                                                 (int64_t)sms * kLeanMinBlocks * kWarps);
    const bool d = fco_ea_lookup_dyn(lean_mean_len(p, i), few, knob) && p.r[i].dev != nullptr;
    const fco_result_t res =
        p.r[i].idx64 ? (d ? launch_lean_t<T, int64_t, true>(p, i, stream, note, err)
                          : launch_lean_t<T, int64_t, false>(p, i, stream, note, err))
                     : (d ? launch_lean_t<T, int32_t, true>(p, i, stream, note, err)
                          : launch_lean_t<T, int32_t, false>(p, i, stream, note, err));
    if (res != FCO_OK) return res;
    note->dyn.add(d ? 1 : 0);
  }
  return FCO_OK;
}

fco_result_t preload_barrier(char* err) {
  static std::atomic<int> done[kMaxDevices];
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  if (device < kMaxDevices && done[device].load()) return FCO_OK;
  const void* fns[] = {(const void*)ea_kernel_barrier};
  if ((r = load_kernels(err, fns, 1, "fco_embedding_alltoall: loading the barrier kernel")) != FCO_OK)
    return r;
  if (device < kMaxDevices) done[device].store(1);
  return FCO_OK;
}

fco_result_t launch_permute(const EaParams& p, void* stream, char* err) {
  int64_t warps = 0;
  for (int i = 0; i < p.num_local; i++) {
    const int me = p.r[i].rank;
    warps += (p.bstart[me + 1] - p.bstart[me]) * p.nranks;
  }
  if (warps == 0) return FCO_OK;
  int device = 0, sms = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  int64_t blocks = (warps + kWarps - 1) / kWarps;
  if (blocks > (int64_t)sms * 8) blocks = (int64_t)sms * 8;
  ea_kernel_permute<<<(unsigned)blocks, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "fco_embedding_alltoall: permute launch");
}

/* Most work items one block list holds, over the local ranks: pool tiles, or land units when
 * fused (a block takes both lists round-robin: more blocks than either list would idle). */
int64_t max_tasks(const EaParams& p, bool fused) {
  int64_t best = 0;
  for (int i = 0; i < p.num_local; i++) {
    const int me = p.r[i].rank;
    int64_t n = 0;
    if (fused) {
      const EaCounts c = ea_counts(p, me);
      n = c.n_pool > c.n_land ? c.n_pool : c.n_land;
    } else {
      n = ea_chunks(p, me, p.B) * ea_tgroups(p, me);
    }
    if (n > best) best = n;
  }
  return best;
}

/* Checks of the launch descriptor against the op records. */
fco_result_t check_launch(const fco_gpu_launch_t* l, char* err) {
  if (!l || l->num_local < 1 || l->nranks < 1 || l->nranks > FCO_MAX_GPU_RANKS ||
      l->num_local > l->nranks)
    return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: bad launch descriptor");
  const fco_ea_args_t* a0 = fco_ea_args(l->r[0].op);
  if (a0->nranks != l->nranks)
    return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: op made for %d ranks, launch has %d",
                a0->nranks, l->nranks);
  if (a0->dim > INT32_MAX / 16)
    return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: dim %lld too large",
                (long long)a0->dim);
  for (int i = 0; i < l->num_local; i++) {
    const fco_op_t* op = l->r[i].op;
    if (!l->r[i].dev)
      return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: local rank %d: dev is NULL", i);
    if (op->ws_bytes > 0 && !l->r[i].ws)
      return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: local rank %d: no workspace", i);
  }
  return FCO_OK;
}

}  // namespace
}  // namespace ea
}  // namespace fco

using namespace fco;
using namespace fco::ea;

/* ---- FCO_EA_PROFILE=1: the fused kernel's per-block timeline, printed to stderr --------------
 * A diagnostic (fco-bench -G 0 -n few): the kernel's thread 0 of every block writes kProfSlots
 * globaltimer stamps into pinned host memory; a host function queued after the kernel prints,
 * per local rank, the median / max over blocks of each phase end, from the first block's
 * start. One buffer per device, reused call after call (the stream orders kernel, print, next
 * kernel). Works in graph capture too (the print is a host node). */
struct ProfCtx {
  uint64_t* buf;
  int device, num_local, bpr, ranks[FCO_MAX_GPU_RANKS];
};
ProfCtx g_prof[kMaxDevices];

double prof_pct(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[(size_t)(q * (double)(v.size() - 1))];
}

void CUDART_CB prof_print(void* arg) {
  const ProfCtx* c = (const ProfCtx*)arg;
  for (int li = 0; li < c->num_local; li++) {
    if ((int64_t)(li + 1) * c->bpr > kProfMaxBlocks) break;
    const uint64_t* b = c->buf + (size_t)li * c->bpr * kProfSlots;
    uint64_t t0 = UINT64_MAX;
    for (int i = 0; i < c->bpr; i++) t0 = b[i * kProfSlots] < t0 ? b[i * kProfSlots] : t0;
    std::vector<double> ph[kProfSlots];
    for (int i = 0; i < c->bpr; i++)
      for (int k = 0; k < kProfSlots; k++) ph[k].push_back((double)(b[i * kProfSlots + k] - t0) / 1e3);
    fprintf(stderr,
            "ea-prof dev %d rank %d blocks %d (us from the first start, median/max over blocks): "
            "start %.1f/%.1f remote-done %.1f/%.1f pools-done %.1f/%.1f end %.1f/%.1f\n",
            c->device, c->ranks[li], c->bpr, prof_pct(ph[0], 0.5), prof_pct(ph[0], 1.0),
            prof_pct(ph[1], 0.5), prof_pct(ph[1], 1.0), prof_pct(ph[2], 0.5), prof_pct(ph[2], 1.0),
            prof_pct(ph[3], 0.5), prof_pct(ph[3], 1.0));
  }
}

/* p.prof for this launch (nullptr when FCO_EA_PROFILE is unset or the buffer fails). */
uint64_t* prof_buffer(const fco_ea_knobs_t& k, int device) {
  if (k.profile == 0 || device < 0 || device >= kMaxDevices) return nullptr;
  ProfCtx* c = &g_prof[device];
  if (!c->buf &&
      cudaHostAlloc(&c->buf, (size_t)kProfMaxBlocks * kProfSlots * 8, cudaHostAllocMapped |
                    cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    c->buf = nullptr;
  }
  return c->buf;
}

extern "C" fco_result_t fco_cuda_embedding_alltoall_run(const fco_gpu_launch_t* l, char* err) {
  fco_result_t res = check_launch(l, err);
  if (res != FCO_OK) return res;
  const fco_op_t* op0 = l->r[0].op;
  const fco_ea_args_t* a0 = fco_ea_args(op0);
  const size_t es = fco_dtype_size(a0->dtype);
  static thread_local EaParams p; /* 9 KB: not on the stack */
  if ((res = fill_params(l, &p, err)) != FCO_OK) return res;
  p.esize = (int32_t)es;
  const Variant v = pick_variant(l, a0, es, op0->impl);
  p.lanes = v.lanes;
  const int P = l->nranks;
  if (op0->impl == 1) {
    const bool lean = fused_lean_applies(p);
    RunFn fn = lean ? nullptr : pick_fused(a0->dtype, v);
    if (!lean && !fn)
      return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: dtype %d", (int)a0->dtype);
    int device = -1;
    (void)cudaGetDevice(&device);
    p.prof = prof_buffer(*p.knobs, device);
    if (lean) {
      res = run_fused_lean(p, a0->dtype, l->num_local, l->stream, err);
      /* fco_last_plan, e.g. " kernel fused lean claimed split=60 idx32 W=64 minB=4 direct=send+out,
       * 528 blocks/rank (4/SM)" */
      if (res == FCO_OK) fused_lean_plan_append(l->plan);
    } else {
      const int64_t tasks = max_tasks(p, true);
      if (tasks >= INT32_MAX) p.mix = -1; /* the kMix variant counts a block's tiles in 32 bits */
      res = fn(p, tasks, l->num_local, l->stream, err);
      if (res == FCO_OK) { /* fco_last_plan, e.g. " kernel fused32 vec stream, 264 blocks/rank" */
        char vw[32];
        variant_words(v, vw, sizeof vw);
        fco_plan_append(l->plan, " kernel %s %s", fused_kernel_name(), vw);
        if (p.mix >= 0) fco_plan_append(l->plan, " mix=%d", (int)p.mix);
        fco_plan_append(l->plan, "%s, %u blocks/rank", p.prof ? " prof" : "", p.blocks_per_rank);
      }
    }
    if (res == FCO_OK && p.prof) {
      ProfCtx* c = &g_prof[device];
      c->device = device;
      c->num_local = l->num_local;
      c->bpr = (int)p.blocks_per_rank;
      for (int i = 0; i < l->num_local; i++) c->ranks[i] = p.r[i].rank;
      (void)cudaLaunchHostFunc((cudaStream_t)l->stream, prof_print, c);
    }
    return res;
  }
  if (op0->impl != 0)
    return fail(err, FCO_ERR_INVALID_ARGUMENT, "fco_embedding_alltoall: impl %d does not exist",
                op0->impl);
  /* fco_last_plan: the lookup's words and grid, appended with the exchange's after the last
   * launch, e.g. " kernel lean lookup W=64 + ncclSend/Recv + permute + barrier, 528 blocks/rank" */
  char lookup[64], grid[48];
  if (lean_applies(p, v)) {
    LeanLookupNote note;
    switch (a0->dtype) {
      case FCO_F32: res = launch_lean<float>(p, l->stream, &note, err); break;
      case FCO_F16: res = launch_lean<__half>(p, l->stream, &note, err); break;
      case FCO_BF16: res = launch_lean<__nv_bfloat16>(p, l->stream, &note, err); break;
      default: return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: dtype %d", (int)a0->dtype);
    }
    if (res != FCO_OK) return res;
    char w[32], g[32];
    if (note.W.empty()) { /* no local rank had bags: nothing launched */
      snprintf(lookup, sizeof lookup, "lean lookup (no bags)");
      snprintf(grid, sizeof grid, "0 blocks/rank");
    } else {
      snprintf(lookup, sizeof lookup, "lean lookup W=%s%s", note.W.str(w, sizeof w),
               note.dyn.hi > 0 ? " claimed" : "");
      snprintf(grid, sizeof grid, "%s blocks/rank", note.grid.str(g, sizeof g));
    }
  } else {
    RunFn fn = pick<RunLookup>(a0->dtype, v);
    if (!fn) return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: dtype %d", (int)a0->dtype);
    if ((res = fn(p, max_tasks(p, false), l->num_local, l->stream, err)) != FCO_OK) return res;
    char vw[32];
    variant_words(v, vw, sizeof vw);
    snprintf(lookup, sizeof lookup, "lookup %s", vw);
    snprintf(grid, sizeof grid, "%u blocks/rank", p.blocks_per_rank);
  }
  if (P == 1) {
    fco_plan_append(l->plan, " kernel %s (one rank: no all-to-all), %s", lookup, grid);
    return FCO_OK;
  }
  const size_t vec = (size_t)a0->dim * es;
  cudaStream_t stream = (cudaStream_t)l->stream;
  if (l->transport == FCO_TRANSPORT_NCCL) {
    /* Load the barrier kernel now (once per device): launched lazily after the group, its
     * module load could wait for kernels that spin on peers. */
    if ((res = preload_barrier(err)) != FCO_OK) return res;
    /* all_to_all_single as grouped send/recv; the permute and the barrier follow in
     * ..._after_group. */
    ncclComm_t nc = (ncclComm_t)l->r[0].nccl_comm;
    const int me = p.r[0].rank;
    const int64_t Tme = p.toff[me + 1] - p.toff[me], bme = p.bstart[me + 1] - p.bstart[me];
    char* send = p.r[0].ws;
    char* recv = p.r[0].ws + p.send_bytes;
    ncclResult_t nr = ncclGroupStart();
    for (int q = 0; q < P && (nr == ncclSuccess || nr == ncclInProgress); q++) {
      const size_t sb = (size_t)(p.bstart[q + 1] - p.bstart[q]) * (size_t)Tme * vec;
      const size_t rb = (size_t)bme * (size_t)(p.toff[q + 1] - p.toff[q]) * vec;
      if (sb) nr = ncclSend(send + (size_t)p.bstart[q] * (size_t)Tme * vec, sb, ncclInt8, q, nc, stream);
      if (rb && (nr == ncclSuccess || nr == ncclInProgress))
        nr = ncclRecv(recv + (size_t)bme * (size_t)p.toff[q] * vec, rb, ncclInt8, q, nc, stream);
    }
    ncclResult_t ne = ncclGroupEnd(); /* always: balances the group */
    if (nr == ncclSuccess || nr == ncclInProgress) nr = ne;
    if (nr != ncclSuccess && nr != ncclInProgress)
      return fail(err, FCO_ERR_NCCL, "fco_embedding_alltoall: ncclSend/ncclRecv: %s (%s)",
                  ncclGetErrorString(nr), ncclGetLastError(nc));
    /* the permute and the barrier: fco_cuda_embedding_alltoall_after_group, every time */
    fco_plan_append(l->plan, " kernel %s + ncclSend/Recv + permute + barrier, %s", lookup, grid);
    return FCO_OK;
  }
  /* local: every virtual rank is in this launch; copy block [bstart_s, +b_s) of r's send buffer
   * into s's receive area at b_s · toff_r rows. */
  if (l->num_local != P)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "fco_embedding_alltoall: impl 0 on the local transport needs every virtual rank "
                "in one launch (%d of %d)", l->num_local, P);
  for (int i = 0; i < P; i++) {
    const int r = p.r[i].rank;
    const size_t Tr = (size_t)(p.toff[r + 1] - p.toff[r]);
    for (int j = 0; j < P; j++) {
      const int s = p.r[j].rank;
      const size_t bs = (size_t)(p.bstart[s + 1] - p.bstart[s]);
      const size_t bytes = bs * Tr * vec;
      if (!bytes) continue;
      cudaError_t ce = cudaMemcpyAsync(p.r[j].ws + p.send_bytes + bs * (size_t)p.toff[r] * vec,
                                       p.r[i].ws + (size_t)p.bstart[s] * Tr * vec, bytes,
                                       cudaMemcpyDeviceToDevice, stream);
      if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_embedding_alltoall: cudaMemcpyAsync");
    }
  }
  if ((res = launch_permute(p, l->stream, err)) != FCO_OK) return res;
  fco_plan_append(l->plan, " kernel %s + cudaMemcpyAsync + permute, %s", lookup, grid);
  return FCO_OK;
}

/* nccl, impl 0: the permute, enqueued once the transport's NCCL group has issued the
 * send/recv (a kernel launched inside the group would run before them). */
extern "C" fco_result_t fco_cuda_embedding_alltoall_after_group(const fco_gpu_launch_t* l,
                                                                char* err) {
  const fco_op_t* op0 = l->r[0].op;
  if (op0->impl != 0 || l->nranks == 1 || l->transport != FCO_TRANSPORT_NCCL) return FCO_OK;
  fco_result_t res = check_launch(l, err);
  if (res != FCO_OK) return res;
  static thread_local EaParams p;
  if ((res = fill_params(l, &p, err)) != FCO_OK) return res;
  p.esize = (int32_t)fco_dtype_size(fco_ea_args(op0)->dtype);
  if ((res = launch_permute(p, l->stream, err)) != FCO_OK) return res;
  /* The staging (ws[0, 2S)) lies outside the epoch halves and NCCL raises no signal of ours:
   * without this barrier a peer done with its send/recv could start a fused call that writes
   * into this rank's workspace while the permute above still reads it (seen at P = 4, run
   * 39ee289). The same barrier as gemm_alltoall's impl 0. */
  for (int i = 0; i < l->num_local; i++) {
    ea_kernel_barrier<<<1, kThreads, 0, (cudaStream_t)l->stream>>>(l->r[i].dev);
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_embedding_alltoall impl 0: barrier launch");
  }
  return FCO_OK;
}
