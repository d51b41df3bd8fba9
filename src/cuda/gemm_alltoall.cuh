/*
 * gemm_alltoall.cuh — what the GEMM + All-to-All kernels share (src/cuda/gemm_alltoall*.cu):
 * launch parameters, the header exchange every fused impl starts with, the global verdict, a
 * block scan, the counts digest, and the staging → out landing copy.
 *
 * Header exchange (layout in src/ops/gemm_alltoall.h): one block per rank builds its header
 * {valid, E, blocks, why-invalid, tot[s], tiles[s], tstart[s], sym, sym_off, held} from its
 * device counts and its symmetric-buffer table, puts it into slot [me] of every rank's header
 * area in the half of this call (e & 1), its own included, and release-signals kHdrSlot there.
 * No "has the peer started this call" handshake is needed: by the workspace rule
 * (src/core/internal.h) a peer still busy with the previous call reads the other half, and it
 * cannot be two calls behind, because finishing a call needs every peer's header of that call
 * (rule 2: each rank waits for a signal each peer raises in the same call).
 * Every block then waits for all P header flags of its rank and reads the headers into shared
 * memory (Ctl). The verdict is computed from the headers alone, so every rank reaches the same:
 * all valid, of one protocol (header [0]: impl 1 / Triton or impl 2, which ranks choosing
 * differently would mix) and Σ_r tot_r[s] ≤ out_rows for every s. Otherwise every rank records
 * FCO_ERR_INVALID_ARGUMENT (FCO_ERR_INVALID_USAGE for mixed protocols; peer = the offending
 * rank, slot = kind) and writes nothing. Where a rank's rows for s go (s's symmetric out or
 * its staging) and whether s lands them are decided per pair from the same two headers
 * (fco_ga_direct), so a sender that lacks s's slot stages and s lands that sender's rows.
 *
 * Signal slots of a source rank at a receiver: 0..blocks-1 parts (impl 1: one flag each when all
 * its tiles are stored), kValidSlot (impl 0 on nccl: the sender's counts matched its host's),
 * kDoneSlot (impl 2: all chunks pushed; impl 0 on nccl: barrier), kHdrSlot (header). Values
 * sig_value(e, j): never reset.
 */
#ifndef FCO_CUDA_GEMM_ALLTOALL_CUH_
#define FCO_CUDA_GEMM_ALLTOALL_CUH_

#include <stdio.h>

#include "../ops/gemm_alltoall.h"
#include "cuda_ops.h"
#include "launch.cuh"
#include "prims.cuh"

namespace fco {
namespace ga {

constexpr int kThreads = 256;
constexpr int kHdrSlot = FCO_SIG_SLOTS - 1;
constexpr int kDoneSlot = FCO_SIG_SLOTS - 2;
constexpr int kMaxParts = FCO_SIG_SLOTS - 2; /* tile-part slots available to impl 1 */
/* impl 0 on nccl: each sender's "my device counts were the host's" (gemm_alltoall.h). Read in
 * the call that raised it before that call's barrier, so no later call's value can land first. */
constexpr int kValidSlot = FCO_SIG_SLOTS - 3;
constexpr int kMaxP = FCO_MAX_GPU_RANKS;
constexpr int kHdrWords = FCO_GA_HDR_WORDS(kMaxP);
static_assert(kThreads > FCO_MAX_GPU_RANKS, "load_rank_view and the per-peer threads");
/* Error "slot" values: which check failed. */
constexpr int kBadCounts = 1;    /* negative count or Σ > a_rows on rank `peer` */
constexpr int kBadCapacity = 2;  /* rank `peer` would receive more than out_rows */
constexpr int kBadPlan = 3;      /* a push would leave the destination (inconsistent hints) */
constexpr int kCountsChanged = 4; /* device counts differ from counts_host (graph replay) */
constexpr int kMixedImpls = 5;    /* rank `peer` runs the other protocol (FCO_GA_PROTO_*) */

/* One local rank of a launch. */
struct RankArgs {
  const char* a;
  const char* w;
  char* out;
  const int32_t* counts;
  fco_dev_rank_t* dev;
  /* This rank's workspace as the host sees it: for the host-launched scratch only (impl 2's y,
   * written by cuBLAS and read by the push kernel, both with this address baked into a graph).
   * Kernels address what lies in the call's half (headers, staging, plan, segments) through the
   * table (v.peer_data[v.rank]), as peers reach it: a graph captured before a workspace growth,
   * replayed after it, then still agrees with its peers (the transports keep the old workspace
   * of a captured call alive, src/transport/gpu_common.h). */
  char* ws;
  int32_t num_experts;
  uint64_t digest; /* impl 2: fco_ga_digest_host(counts_host) the GEMMs were sized from */
  void* const* sym; /* the comm's symmetric-buffer table [FCO_MAX_SYMMETRIC][kMaxP] (device) */
  int32_t out_sym;  /* slot k of the symmetric buffer holding out, −1: none (or FCO_GA_DIRECT=0) */
  int64_t out_off;  /* out's byte offset in it */
};

/* Host: the symmetric-buffer fields of local rank i's RankArgs — out_sym = the slot of the
 * comm's symmetric buffer that holds all of out (out_rows × N elements), −1 when none or with
 * FCO_GA_DIRECT=0 (peers then stage, as for an ordinary out: the A/B of the direct stores). */
inline void rank_sym(const fco_gpu_launch_t* l, int i, RankArgs* ra) {
  const fco_op_t* op = l->r[i].op;
  const fco_gemm_a2a_args_t* a = (const fco_gemm_a2a_args_t*)op->u.raw;
  size_t off = 0;
  const size_t bytes = (size_t)a->out_rows * (size_t)a->n * fco_dtype_size(a->dtype);
  ra->sym = (void* const*)op->comm->sym_dev;
  ra->out_sym = !a->knobs.staged && op->comm->sym_dev
                    ? fco_sym_find(op->comm, a->out, bytes, &off)
                    : -1;
  ra->out_off = ra->out_sym >= 0 ? (int64_t)off : 0;
}

/* Host, fco_last_plan: where peers store the local ranks' received rows — " direct" (out is
 * symmetric: straight into it, nothing landed), " staged" (the workspace, then a copy into
 * out), " direct(k/n)" where k of the n local ranks have a symmetric out; "" at one rank. */
inline const char* recv_words(const RankArgs* ra, int num_local, int P, char* b, size_t n) {
  int k = 0;
  for (int i = 0; i < num_local; ++i) k += ra[i].out_sym >= 0;
  if (P == 1 && n > 0) b[0] = '\0';
  else if (k == 0) snprintf(b, n, " staged");
  else if (k == num_local) snprintf(b, n, " direct");
  else snprintf(b, n, " direct(%d/%d)", k, num_local);
  return b;
}

/* Every thread of the header block, before it sums the counts (the loads overlap): whether
 * row k = threadIdx.x < FCO_MAX_SYMMETRIC of my symmetric-buffer table maps every peer's
 * buffer; warp 0's ballot of it is the header's held mask (FCO_GA_H_HELD). Read from the
 * device table each call, not from the host: a graph replayed after an fco_mem_free sees it. */
static_assert(FCO_MAX_SYMMETRIC <= 32, "held: one ballot of warp 0");
__device__ __forceinline__ bool sym_row_held(const RankArgs& ra, int P, int me) {
  const int k = threadIdx.x;
  if (!ra.sym || k >= FCO_MAX_SYMMETRIC) return false;
  bool all = true;
  for (int s = 0; s < P; ++s) all &= s == me || ra.sym[k * kMaxP + s] != nullptr;
  return all;
}
/* Warp 0 (every lane): the mask of sym_row_held. */
__device__ __forceinline__ uint32_t sym_held(bool row_held) {
  return __ballot_sync(0xffffffffu, row_held);
}

/* Header words that announce where peers may store this rank's rows (FCO_GA_H_SYM) and which
 * peers' symmetric outs this rank can store into (FCO_GA_H_HELD). */
__device__ __forceinline__ void header_sym(const RankArgs& ra, int P, uint32_t held, int64_t* h) {
  h[FCO_GA_H_SYM(P)] = ra.out_sym >= 0 ? ra.out_sym + 1 : 0;
  h[FCO_GA_H_SYM_OFF(P)] = ra.out_sym >= 0 ? ra.out_off : 0;
  h[FCO_GA_H_HELD(P)] = (int64_t)held;
}

/* After gather_headers, thread 0: where my rows for s start — my out (s == me), s's symmetric
 * out where fco_ga_direct (s announced one, my header says I hold its slot), else s's staging
 * of this call's half (`staging`: its offset in a workspace), which s then lands: a slot freed
 * here (fco_mem_free is local) costs s a landing copy, never stale rows. NULL only where my
 * table lost the slot after my header said I held it (freed during the call, against
 * fco_mem_free's contract): recorded as a usage error, nothing stored to s. */
__device__ __forceinline__ void dest_rows(const RankView& v, const RankArgs& ra, size_t staging,
                                          const int64_t (*h)[kHdrWords], char** dst) {
  const int P = v.nranks, me = v.rank;
  for (int s = 0; s < P; ++s) {
    if (s == me) {
      dst[s] = ra.out;
    } else if (!fco_ga_direct(h[me], h[s], P, me, s)) {
      dst[s] = v.peer_data[s] + staging;
    } else {
      const int64_t k = h[s][FCO_GA_H_SYM(P)] - 1;
      char* b = (char*)ra.sym[k * kMaxP + s];
      dst[s] = b ? b + h[s][FCO_GA_H_SYM_OFF(P)] : nullptr;
      if (!b) record_error(v.err, FCO_ERR_INVALID_USAGE, FCO_OP_GEMM_ALLTOALL, s, (int)k, 0, 0);
    }
  }
}

/* What every block of a rank knows after the exchange. */
struct Ctl {
  int64_t h[kMaxP][kHdrWords]; /* headers, by source rank */
  int64_t base[kMaxP];         /* where my rows start in s's out */
  int64_t roff[kMaxP];         /* where r's rows start in my out */
  int64_t recv[kMaxP];         /* rows r sends me */
  char* dst[kMaxP];            /* where my rows for s start (dest_rows) */
  int32_t verdict;             /* 0 ok, else kBad* */
  int32_t bad_rank;
  int32_t fail;                /* a wait failed (timeout / other error) */
};

/* ---- block scan ------------------------------------------------------------------------ */
/* Exclusive scan over i in [0, n) of value(i) (int64), in index order, by all threads of the
 * block; write(i, prefix) for each i; returns the total (to every thread). `tmp` holds
 * kThreads / 32 + 1 int64 of shared memory. */
template <class V, class W>
__device__ int64_t block_scan(int n, V value, W write, int64_t* tmp) {
  const int t = threadIdx.x, per = (n + kThreads - 1) / kThreads;
  const int i0 = t * per, i1 = min(n, i0 + per);
  int64_t local = 0;
  for (int i = i0; i < i1; ++i) local += value(i);
  /* Inclusive warp scan of the per-thread sums, then of the warp totals. */
  const int lane = t & 31, warp = t >> 5;
  int64_t x = local;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    int64_t y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) tmp[warp] = x;
  __syncthreads();
  if (t == 0) {
    int64_t run = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      int64_t s = tmp[w];
      tmp[w] = run;
      run += s;
    }
    tmp[kThreads / 32] = run;
  }
  __syncthreads();
  int64_t pre = tmp[warp] + x - local;
  for (int i = i0; i < i1; ++i) {
    write(i, pre);
    pre += value(i);
  }
  const int64_t total = tmp[kThreads / 32];
  __syncthreads(); /* tmp may be reused right after */
  return total;
}

/* All threads: fco_ga_digest_host of the device counts [E][P] (same value, summed in any
 * order). `acc` is one shared uint64. */
__device__ __forceinline__ uint64_t block_digest(const int32_t* counts, int E, int P,
                                                 unsigned long long* acc) {
  if (threadIdx.x == 0) *acc = ((unsigned long long)(uint32_t)E << 32) | (uint32_t)P;
  __syncthreads();
  unsigned long long d = 0;
  for (int i = threadIdx.x; i < E * P; i += blockDim.x) d += fco_ga_mix((uint64_t)i, counts[i]);
  atomicAdd(acc, d);
  __syncthreads();
  const uint64_t r = *acc;
  __syncthreads();
  return r;
}

/* All threads: the rows each destination s gets, tot[s] = Σ_e counts[e·P + s], their sum and
 * whether any count is negative (`bad`; negative counts are left out of the sums, so the
 * caller's verdict, not an overflow, decides). `tot` [P], `sum` and `bad` are shared; with `cnt`
 * (shared, E·P ints) also cnt[i] = max(counts[i], 0). Syncs before returning. */
__device__ __forceinline__ void block_count_sums(const int32_t* counts, int E, int P,
                                                 unsigned long long* tot, long long* sum,
                                                 int* bad, int* cnt) {
  if ((int)threadIdx.x < P) tot[threadIdx.x] = 0;
  if (threadIdx.x == 0) {
    *sum = 0;
    *bad = 0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < E * P; i += blockDim.x) {
    const int x = counts[i];
    if (cnt) cnt[i] = x < 0 ? 0 : x;
    if (x < 0) {
      *bad = 1;
    } else {
      atomicAdd(&tot[i % P], (unsigned long long)x);
      atomicAdd((unsigned long long*)sum, (unsigned long long)x);
    }
  }
  __syncthreads();
}

/* ---- header exchange --------------------------------------------------------------------- */
/* All threads of the rank's header block. Puts `h` (kHdrWords-sized, shared memory) into every
 * rank's header slot [me] of this call's half and signals it; thread p < P serves rank p. The
 * release also publishes what this block wrote before (impl 1's segment table) to the rank's
 * other blocks, which acquire it through their own rank's slot. */
__device__ __forceinline__ void post_header(const RankView& v, uint64_t e, const int64_t* h) {
  const int P = v.nranks, me = v.rank, words = FCO_GA_HDR_WORDS(P), p = threadIdx.x;
  __syncthreads(); /* h complete */
  if (p < P) {
    int64_t* dst = fco_ga_hdr(v.peer_data[p], v.ws_bytes, P, e, me);
    for (int k = 0; k < words; ++k) dst[k] = h[k];
    st_release_sys(v.peer_sig[p] + (size_t)me * FCO_SIG_SLOTS + kHdrSlot, sig_value(e, 0));
  }
}

/* All threads. Wait for every rank's header, read them into c, compute the verdict and the
 * offsets. Returns false when a wait failed (c->fail set; the caller skips to epoch_end). */
__device__ __forceinline__ bool gather_headers(const RankView& v, uint64_t e, int64_t out_rows,
                                               Ctl* c) {
  const int P = v.nranks, me = v.rank, words = FCO_GA_HDR_WORDS(P);
  const WaitCtx ctx{v.err, v.timeout_ns, FCO_OP_GEMM_ALLTOALL};
  bool ok = true;
  if ((int)threadIdx.x < P)
    ok = wait_ge(v.peer_sig[me] + (size_t)threadIdx.x * FCO_SIG_SLOTS + kHdrSlot, sig_value(e, 0),
                 ctx, (int)threadIdx.x, kHdrSlot);
  if (__syncthreads_or(!ok)) {
    if (threadIdx.x == 0) c->fail = 1;
    __syncthreads();
    return false;
  }
  for (int i = threadIdx.x; i < P * words; i += blockDim.x) {
    const int r = i / words, k = i - r * words;
    c->h[r][k] = __ldcg((const long long*)fco_ga_hdr(v.peer_data[me], v.ws_bytes, P, e, r) + k);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    c->fail = 0;
    c->verdict = 0;
    c->bad_rank = -1;
    for (int r = 0; r < P && !c->verdict; ++r) {
      const int64_t proto = c->h[r][FCO_GA_H_VALID];
      if (proto != FCO_GA_PROTO_TILES && proto != FCO_GA_PROTO_CHUNKS) { /* [3]: why */
        c->verdict = c->h[r][3] == kCountsChanged ? kCountsChanged : kBadCounts;
        c->bad_rank = r;
      }
    }
    for (int r = 1; r < P && !c->verdict; ++r)
      if (c->h[r][FCO_GA_H_VALID] != c->h[0][FCO_GA_H_VALID]) {
        c->verdict = kMixedImpls;
        c->bad_rank = r;
      }
    for (int s = 0; s < P; ++s) {
      int64_t total = 0;
      for (int r = 0; r < P; ++r) {
        if (r == me) c->base[s] = total;
        total += c->h[r][FCO_GA_H_TOT(P, s)];
      }
      if (total > out_rows && !c->verdict) {
        c->verdict = kBadCapacity;
        c->bad_rank = s;
      }
    }
    int64_t off = 0;
    for (int r = 0; r < P; ++r) {
      c->roff[r] = off;
      c->recv[r] = c->h[r][FCO_GA_H_TOT(P, me)];
      off += c->recv[r];
    }
  }
  __syncthreads();
  return true;
}

/* Thread 0, after gather_headers: the verdict's error on this rank (the same on every rank). */
__device__ __forceinline__ void record_verdict(const RankView& v, const Ctl& c) {
  if (c.verdict == kMixedImpls) /* want / seen: rank 0's protocol, the offender's */
    record_error(v.err, FCO_ERR_INVALID_USAGE, FCO_OP_GEMM_ALLTOALL, c.bad_rank, kMixedImpls,
                 (uint64_t)c.h[0][FCO_GA_H_VALID], (uint64_t)c.h[c.bad_rank][FCO_GA_H_VALID]);
  else
    record_error(v.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMM_ALLTOALL, c.bad_rank, c.verdict, 0,
                 0);
}

/* ---- copies ------------------------------------------------------------------------------ */
/* Part `part` of `parts` equal slices of [0, bytes), 16-byte aligned cut points, the last one
 * shorter; together they cover every byte (the slice size rounds UP). */
__device__ __forceinline__ void slice_of(size_t bytes, int parts, int part, size_t* b0,
                                         size_t* b1) {
  const size_t per = ((bytes + (size_t)parts - 1) / (size_t)parts + 15) / 16 * 16;
  *b0 = min(bytes, (size_t)part * per);
  *b1 = min(bytes, *b0 + per);
}

/* dst[0, nbytes) = src (written by peers: read through L2), work split over threads
 * idx0 + k·stride; 16-byte vectors when both are aligned. */
__device__ __forceinline__ void copy_cg(char* dst, const char* src, size_t nbytes, size_t idx0,
                                        size_t stride) {
  if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
    const size_t nv = nbytes / 16;
    const uint4* s = (const uint4*)src;
    uint4* d = (uint4*)dst;
    size_t i = idx0;
    for (; i + 3 * stride < nv; i += 4 * stride) {
      uint4 x0 = __ldcg(s + i), x1 = __ldcg(s + i + stride), x2 = __ldcg(s + i + 2 * stride),
            x3 = __ldcg(s + i + 3 * stride);
      st_global_v4(d + i, x0);
      st_global_v4(d + i + stride, x1);
      st_global_v4(d + i + 2 * stride, x2);
      st_global_v4(d + i + 3 * stride, x3);
    }
    for (; i < nv; i += stride) st_global_v4(d + i, __ldcg(s + i));
    for (size_t b = nv * 16 + idx0; b < nbytes; b += stride) dst[b] = __ldcg(src + b);
    return;
  }
  if ((((uintptr_t)dst | (uintptr_t)src | nbytes) & 1) == 0) {
    for (size_t i = idx0; i < nbytes / 2; i += stride)
      ((uint16_t*)dst)[i] = __ldcg((const unsigned short*)src + i);
    return;
  }
  for (size_t b = idx0; b < nbytes; b += stride) dst[b] = __ldcg(src + b);
}


/* ---- host-side entry points shared by the two .cu files -------------------------------- */
/* Load every kernel of this op on the current device and cache co-residency (once per
 * device): a kernel first launched while one of ours spins would otherwise be loaded lazily
 * (CUDA_MODULE_LOADING=LAZY), which may wait for the spinning kernel: a deadlock until the
 * timeout. */
fco_result_t preload_kernels(const fco_ga_knobs_t& k, char* err);
/* impl 1 (gemm_alltoall_fused.cu). */
fco_result_t launch_tiles(const fco_gpu_launch_t* l, char* err);
/* impl 2's exchange, push and finish kernels (gemm_alltoall_fused.cu, next to impl 1's
 * protocol). */
fco_result_t launch_exchange(const fco_gpu_launch_t* l, const RankArgs* ra, void* stream,
                             char* err);
fco_result_t launch_finish(const fco_gpu_launch_t* l, const RankArgs* ra, int* blocks_per_rank,
                           char* err); /* *blocks_per_rank: its grid (fco_last_plan) */
/* impl 0 on nccl, after its send/recv: every rank signals every peer and waits for all, then
 * advances the epoch (one block; gemm_alltoall.h says why). */
fco_result_t launch_barrier(fco_dev_rank_t* dev, void* stream, char* err);
/* One push: pieces[i] = {destination s, rows, first row in y, first row among my rows at s};
 * rows go to out (s == me) or s's staging at plan.base[s] + that row. */
fco_result_t launch_push(const RankArgs& ra, const char* y, int P, int64_t out_rows, int64_t n,
                         int es, const int64_t (*pieces)[4], int npieces, int blocks,
                         void* stream, char* err);
constexpr int kMaxPieces = 64; /* pieces per push kernel */

/* The plan impl 2's exchange kernel leaves in the private plan area of the call's half (read
 * by push and finish of the same call). landed / seen: the early landing (FCO_GA_LAND_EARLY,
 * gemm_alltoall_fused.cu): rows of r's (a prefix) copied into out by the land kernels so far
 * and rows r had published at the last progress kernel; 0 without it. */
struct Plan {
  int32_t verdict;     /* 0 ok */
  uint32_t stage_from; /* bit r: r's rows come through my staging (all but fco_ga_direct's) */
  int64_t base[kMaxP];
  int64_t roff[kMaxP];
  int64_t recv[kMaxP];
  char* dst[kMaxP]; /* dest_rows */
  int64_t landed[kMaxP];
  int64_t seen[kMaxP];
};
/* impl 2's progress flags (early landing): sender s's rows pushed to me so far, slot [s][0] of
 * my signal area: (e << 32) | (rows + 1). Slot 0 is impl 1's part 0 otherwise; values only grow
 * across calls either way. */
constexpr int kProgSlot = 0;

fco_result_t launch_progress(const RankArgs& ra, int P, int64_t out_rows, int64_t n, int es,
                             const int64_t* rows_to, bool snap, void* stream, char* err);
fco_result_t launch_land(const RankArgs& ra, int P, int64_t out_rows, int64_t n, int es,
                         int blocks, void* stream, char* err);

/* impl 2: this call's plan (private, in half e & 1 right after the peer bytes). The call's e is
 * dev->epoch + 1 in all three kernels: only the finish kernel's end advances the epoch. */
__device__ __forceinline__ char* plan_area(char* ws, size_t ws_bytes, uint64_t e, int P,
                                           int64_t out_rows, int64_t n, size_t es) {
  return ws + fco_ga_half_off(ws_bytes, e) + fco_ga_peer_bytes(P, out_rows, n, es);
}

/* All threads, first thing in each of impl 2's kernels: this rank's view into the block-shared
 * *v, the call's epoch into *e, and the call's plan — nullptr where the plan area would leave the
 * workspace (only a corrupted table: the launcher checked it; the exchange records it), and
 * such a kernel reads and writes no plan. */
__device__ __forceinline__ Plan* call_plan(fco_dev_rank_t* dev, RankView* v, uint64_t* e, int P,
                                           int64_t out_rows, int64_t n, size_t es) {
  load_rank_view(dev, v, FCO_OP_GEMM_ALLTOALL);
  *e = v->epoch + 1;
  if (fco_ga_half_off(v->ws_bytes, *e) + fco_ga_peer_bytes(P, out_rows, n, es) + sizeof(Plan) >
      v->ws_bytes)
    return nullptr;
  /* The table's workspace (RankArgs.ws), whose size the half came from. */
  return reinterpret_cast<Plan*>(plan_area(v->peer_data[v->rank], v->ws_bytes, *e, P, out_rows, n,
                                           es));
}

}  // namespace ga
}  // namespace fco

#endif /* FCO_CUDA_GEMM_ALLTOALL_CUH_ */
