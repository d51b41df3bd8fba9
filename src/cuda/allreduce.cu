/*
 * allreduce.cu — fco_allreduce on GPUs: out[i] = Σ_r in_r[i] (f32, f16, bf16; fp32 sums in rank
 * order 0..P-1, so every rank gets bit-identical results). Entry points in cuda_ops.h, called by
 * the GPU transports; device primitives in prims.cuh.
 *
 * impl 1 — one-shot over the peer table (fco_cuda_allreduce_oneshot), nccl and local transports.
 *   Layout: rank p's data workspace holds two halves (dev.h's workspace rule) of P slots of
 *     S = roundup(count·esize, 256) bytes; source s's bytes for a call with epoch e land at
 *     ws_p + (e & 1)·H + s·S, H = fco_ws_half_bytes(ws_bytes) >= P·S. Flags:
 *     p's signal area sig[src][slot], slot = block index within the rank.
 *   Design: one grid covers num_local ranks with B blocks each (block → rank blockIdx.x / B,
 *     part blockIdx.x % B). The vector is cut into slices (multiples of 16 bytes); block `part`
 *     owns slices part, part + B, ... Phase 1, for its j-th slice: load it once from `in`, store
 *     it into every peer's slot `me` (peers in the order me+1, me+2, ... so ranks do not all hit
 *     the same peer first), raise sig[me][part] = (e << 32) | (j + 1) on each peer. Phase 2,
 *     per slice: threads 0..P-2 wait for the P-1 peers' flags in parallel, then the block sums
 *     the P contributions (its own read from `in`) and writes `out`. Every remote store is
 *     issued before the first wait, so communication overlaps. A block writes only its own
 *     slices of `out`, after pushing them: in == out works. The last block of a rank to finish
 *     advances the epoch.
 *   Why two halves: a fast rank may start call e+1 while a peer still reduces call e, but it
 *     cannot reach e+2 before that peer finished e (it needs the peer's e+1 flags, raised only
 *     after the peer's kernel e ended), so alternating halves never overwrite unread data.
 *   Failure: a wait that exceeds dev->timeout_ns records FCO_ERR_TIMEOUT in dev->err; its block
 *     skips the rest, other blocks notice the error and stop too; the kernel always ends.
 *
 * impl 0 on the local transport — copy (fco_cuda_allreduce_copy): cudaMemcpyAsync each rank's
 *   `in` into the first S bytes of its workspace, then one grid-stride kernel sums the P slots
 *   once per element and stores the sum into every rank's `out`. No flags, no epoch.
 *
 * Launch requirements (one-shot):
 *   - every rank runs the same sequence of epoch-advancing kernels, each with the same count and
 *     dtype, on the same GPU model and FCO_AR_* environment, so B and the slicing agree (a
 *     receiver counts a sender's flags per slot);
 *   - all num_local·B blocks must be co-resident (blocks of one rank wait on blocks of another):
 *     B ≤ occupancy × SMs / num_local, and B ≤ FCO_SIG_SLOTS; run nothing else on the GPU that
 *     could hold SMs the grid needs;
 *   - dev->ws_bytes ≥ 2·P·S when P > 1 (checked on the device: FCO_ERR_INTERNAL otherwise);
 *   - in/out aligned to the element size; 16-byte aligned for the vector path.
 * Tuning (read once; must be equal on every rank): FCO_AR_SLICE_MIN (bytes, default 8k: a
 *   message splits into slices of about this size while blocks last), FCO_AR_SLICE_MAX (32k:
 *   largest slice once every block is busy), FCO_AR_MAX_BLOCKS (cap on B).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "cuda_ops.h"
#include "launch.cuh"
#include "prims.cuh"

namespace fco {
namespace {

constexpr int kThreads = 512;
static_assert(FCO_MAX_GPU_RANKS == 8, "the rank switches below cover 1..8");
static_assert(kThreads >= FCO_MAX_GPU_RANKS + 1, "load_rank_view needs MAX+1 threads");

/* ---- kernels ---------------------------------------------------------------------------- */
struct OneshotParams {
  const char* in[FCO_MAX_GPU_RANKS]; /* per local rank */
  char* out[FCO_MAX_GPU_RANKS];
  fco_dev_rank_t* dev[FCO_MAX_GPU_RANKS];
  uint64_t nbytes;     /* count · esize */
  uint64_t slot_bytes; /* S */
  uint32_t slice_bytes;
  uint32_t num_slices;
  uint32_t blocks_per_rank;
};

template <typename T, int kRanks>
__global__ void __launch_bounds__(kThreads, 1) allreduce_kernel_oneshot(const OneshotParams p) {
  constexpr int kPeers = kRanks - 1;
  constexpr int kUnroll = kRanks <= 4 ? 2 : 1; /* loads in flight: kUnroll × kRanks */
  __shared__ RankView v;
  const uint32_t li = blockIdx.x / p.blocks_per_rank;
  const uint32_t part = blockIdx.x - li * p.blocks_per_rank;
  fco_dev_rank_t* dev = p.dev[li];
  load_rank_view(dev, &v, FCO_OP_ALLREDUCE);
  const uint64_t e = v.epoch + 1;
  const int me = v.rank;
  const size_t S = p.slot_bytes;
  const size_t half = (size_t)(e & 1) * fco_ws_half_bytes(v.ws_bytes); /* dev.h: the rule */
  const char* in = p.in[li];
  char* out = p.out[li];

  /* A table that does not match the launch must not turn into writes past a workspace. */
  if (v.nranks != kRanks || me < 0 || me >= kRanks ||
      (kRanks > 1 && v.ws_bytes < 2 * (uint64_t)kRanks * S)) {
    if (threadIdx.x == 0)
      record_error(v.err, FCO_ERR_INTERNAL, FCO_OP_ALLREDUCE, me, -1, 2 * (uint64_t)kRanks * S,
                   v.ws_bytes);
    epoch_end(dev, e, p.blocks_per_rank);
    return;
  }

  /* Thread t < kPeers owns peer (me + 1 + t) % P: its outgoing and incoming flag. */
  int my_peer = -1;
  if ((int)threadIdx.x < kPeers) my_peer = (me + 1 + (int)threadIdx.x) % kRanks;
  uint64_t* flag_out = my_peer >= 0 ? v.peer_sig[my_peer] + (size_t)me * FCO_SIG_SLOTS + part : nullptr;
  const uint64_t* flag_in =
      my_peer >= 0 ? v.peer_sig[me] + (size_t)my_peer * FCO_SIG_SLOTS + part : nullptr;

  /* Phase 1: push every owned slice to every peer, flag after each slice. */
  if constexpr (kPeers > 0) {
    char* dst[kPeers];
#pragma unroll
    for (int d = 0; d < kPeers; ++d)
      dst[d] = v.peer_data[(me + 1 + d) % kRanks] + half + (size_t)me * S;
    uint32_t j = 0;
    for (size_t q = part; q < p.num_slices; q += p.blocks_per_rank, ++j) {
      const size_t off = q * p.slice_bytes;
      const size_t n = min((size_t)p.slice_bytes, (size_t)p.nbytes - off);
      put_block_n<kPeers, 4>(dst, off, in + off, n);
      signal_block(flag_out, sig_value(e, j));
    }
  }

  /* Phase 2: per owned slice, wait for the peers, sum in rank order, write out. */
  const WaitCtx ctx{v.err, v.timeout_ns, FCO_OP_ALLREDUCE};
  const char* mine = v.peer_data[me] + half;
  uint32_t j = 0;
  for (size_t q = part; q < p.num_slices; q += p.blocks_per_rank, ++j) {
    bool ok = true;
    if (flag_in) ok = wait_ge(flag_in, sig_value(e, j), ctx, my_peer, (int32_t)part);
    if (__syncthreads_or(!ok)) break;
    const size_t off = q * p.slice_bytes;
    const size_t n = min((size_t)p.slice_bytes, (size_t)p.nbytes - off);
    const T* src[kRanks];
#pragma unroll
    for (int r = 0; r < kRanks; ++r)
      src[r] = (const T*)(r == me ? in + off : mine + (size_t)r * S + off);
    T* dst[1] = {(T*)(out + off)};
    reduce_range<T, kRanks, 1, kUnroll>(dst, src, n / sizeof(T), threadIdx.x, blockDim.x);
  }
  epoch_end(dev, e, p.blocks_per_rank);
}

struct CopyParams {
  const char* ws[FCO_MAX_GPU_RANKS];
  char* out[FCO_MAX_GPU_RANKS];
  uint64_t count;
};

template <typename T, int kRanks>
__global__ void __launch_bounds__(kThreads) allreduce_kernel_copy(const CopyParams p) {
  const T* src[kRanks];
  T* dst[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) {
    src[r] = (const T*)p.ws[r];
    dst[r] = (T*)p.out[r];
  }
  reduce_range<T, kRanks, kRanks, kRanks <= 4 ? 2 : 1>(
      dst, src, p.count, (size_t)blockIdx.x * blockDim.x + threadIdx.x,
      (size_t)gridDim.x * blockDim.x);
}

/* ---- host side -------------------------------------------------------------------------- */
size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

size_t dtype_bytes(fco_dtype_t t) {
  switch (t) {
    case FCO_F32: return 4;
    case FCO_F16:
    case FCO_BF16: return 2;
    default: return 0;
  }
}

/* A size knob (fco_env_int: suffixes k / M / G, a value that is not a number is said on stderr
 * and ignored); negative values count as unset. */
size_t env_bytes(const char* name, size_t dflt) {
  const long long x = fco_env_int(name, (long long)dflt);
  return x < 0 ? dflt : (size_t)x;
}

struct Tuning {
  size_t slice_min, slice_max;
  uint32_t max_blocks;
};

const Tuning& tuning() {
  static const Tuning t = [] {
    Tuning r;
    r.slice_min = fco_round_up(env_bytes("FCO_AR_SLICE_MIN", 8 << 10), kVecBytes);
    if (r.slice_min < kVecBytes) r.slice_min = kVecBytes;
    if (r.slice_min > (1u << 30)) r.slice_min = 1u << 30;
    r.slice_max = fco_round_up(env_bytes("FCO_AR_SLICE_MAX", 32 << 10), kVecBytes);
    if (r.slice_max < r.slice_min) r.slice_max = r.slice_min;
    if (r.slice_max > (1u << 30)) r.slice_max = 1u << 30;
    size_t b = env_bytes("FCO_AR_MAX_BLOCKS", FCO_SIG_SLOTS);
    r.max_blocks = (uint32_t)(b < 1 ? 1 : b > FCO_SIG_SLOTS ? FCO_SIG_SLOTS : b);
    return r;
  }();
  return t;
}

/* Latency first: while blocks last, one slice of about slice_min per block (a small message
 * takes few blocks, each doing one put + one flag); beyond, every block is busy and slices
 * grow up to slice_max, then blocks loop over several. */
void plan_oneshot(size_t nbytes, uint32_t max_bpr, OneshotParams* p) {
  const Tuning& t = tuning();
  size_t bpr, slice;
  const size_t want = ceil_div(nbytes, t.slice_min);
  if (want <= max_bpr) {
    bpr = want < 1 ? 1 : want;
    slice = fco_round_up(ceil_div(nbytes, bpr), kVecBytes);
  } else {
    bpr = max_bpr;
    slice = fco_round_up(ceil_div(nbytes, bpr), kVecBytes);
    if (slice < t.slice_min) slice = t.slice_min;
    if (slice > t.slice_max) slice = t.slice_max;
  }
  while (ceil_div(nbytes, slice) > (UINT32_MAX >> 1)) slice *= 2; /* j fits a flag's low half */
  const size_t num_slices = ceil_div(nbytes, slice);
  if (bpr > num_slices) bpr = num_slices;
  p->slice_bytes = (uint32_t)slice;
  p->num_slices = (uint32_t)num_slices;
  p->blocks_per_rank = (uint32_t)bpr;
}

/* Checks shared by both entry points; sets *esize. */
fco_result_t check_launch(const fco_cuda_ar_launch_t* l, char* err, const char* fn,
                          bool need_dev, bool need_ws, size_t* esize) {
  if (!l) return fail(err, FCO_ERR_INVALID_ARGUMENT, "%s: launch descriptor is NULL", fn);
  if (l->nranks < 1 || l->nranks > FCO_MAX_GPU_RANKS)
    return fail(err, FCO_ERR_UNSUPPORTED, "%s: nranks %d is not in 1..%d", fn, l->nranks,
                FCO_MAX_GPU_RANKS);
  if (l->num_local < 1 || l->num_local > l->nranks)
    return fail(err, FCO_ERR_UNSUPPORTED, "%s: num_local %d is not in 1..nranks (%d)", fn,
                l->num_local, l->nranks);
  *esize = dtype_bytes(l->dtype);
  if (*esize == 0)
    return fail(err, FCO_ERR_UNSUPPORTED, "%s: dtype %d is not FCO_F32, FCO_F16 or FCO_BF16", fn,
                (int)l->dtype);
  /* 2^40 elements: far beyond any GPU, keeps every offset computation in range. */
  if (l->count < 1 || l->count > ((size_t)1 << 40))
    return fail(err, FCO_ERR_INVALID_ARGUMENT, "%s: count %zu is not in 1..2^40", fn, l->count);
  for (int i = 0; i < l->num_local; ++i) {
    const fco_cuda_ar_rank_t* r = &l->r[i];
    if (!r->in || !r->out)
      return fail(err, FCO_ERR_INVALID_ARGUMENT, "%s: local rank %d: %s is NULL", fn, i,
                  !r->in ? "in" : "out");
    if ((uintptr_t)r->in % *esize || (uintptr_t)r->out % *esize)
      return fail(err, FCO_ERR_INVALID_ARGUMENT,
                  "%s: local rank %d: %s %p is not aligned to the element size %zu", fn, i,
                  (uintptr_t)r->in % *esize ? "in" : "out",
                  (uintptr_t)r->in % *esize ? r->in : (const void*)r->out, *esize);
    if (need_dev && !r->dev)
      return fail(err, FCO_ERR_INVALID_ARGUMENT, "%s: local rank %d: dev is NULL", fn, i);
    if (need_ws && !r->ws)
      return fail(err, FCO_ERR_INVALID_ARGUMENT, "%s: local rank %d: ws is NULL", fn, i);
  }
  return FCO_OK;
}

template <typename T, int kRanks>
fco_result_t launch_oneshot(const fco_cuda_ar_launch_t* l, char* err) {
  int device = 0, sms = 0, cap = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  res = max_coresident_blocks<allreduce_kernel_oneshot<T, kRanks>>(err, device, sms, kThreads, &cap);
  if (res != FCO_OK) return res;
  uint32_t max_bpr = (uint32_t)(cap / l->num_local);
  if (max_bpr > tuning().max_blocks) max_bpr = tuning().max_blocks;
  if (max_bpr < 1)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "fco_cuda_allreduce_oneshot: %d co-resident blocks on device %d cannot give "
                "each of num_local %d ranks one block",
                cap, device, l->num_local);
  OneshotParams p = {};
  for (int i = 0; i < l->num_local; ++i) {
    p.in[i] = (const char*)l->r[i].in;
    p.out[i] = (char*)l->r[i].out;
    p.dev[i] = l->r[i].dev;
  }
  p.nbytes = l->count * sizeof(T);
  p.slot_bytes = fco_round_up(p.nbytes, 256);
  plan_oneshot(p.nbytes, max_bpr, &p);
  const unsigned grid = p.blocks_per_rank * (unsigned)l->num_local;
  allreduce_kernel_oneshot<T, kRanks><<<grid, kThreads, 0, (cudaStream_t)l->stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    char what[128];
    snprintf(what, sizeof what, "fco_cuda_allreduce_oneshot: launch of %u blocks x %d threads",
             grid, kThreads);
    return cuda_fail(err, ce, what);
  }
  return FCO_OK;
}

template <typename T, int kRanks>
fco_result_t launch_copy(const fco_cuda_ar_launch_t* l, char* err) {
  const size_t nbytes = l->count * sizeof(T);
  cudaStream_t stream = (cudaStream_t)l->stream;
  cudaError_t ce;
  if (kRanks == 1) { /* the sum is the input */
    if (l->r[0].in == l->r[0].out) return FCO_OK;
    ce = cudaMemcpyAsync(l->r[0].out, l->r[0].in, nbytes, cudaMemcpyDeviceToDevice, stream);
    return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "fco_cuda_allreduce_copy: cudaMemcpyAsync");
  }
  int device = 0, sms = 0, cap = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  res = max_coresident_blocks<allreduce_kernel_copy<T, kRanks>>(err, device, sms, kThreads, &cap);
  if (res != FCO_OK) return res;
  CopyParams p = {};
  for (int r = 0; r < kRanks; ++r) {
    ce = cudaMemcpyAsync(l->r[r].ws, l->r[r].in, nbytes, cudaMemcpyDeviceToDevice, stream);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_cuda_allreduce_copy: cudaMemcpyAsync");
    p.ws[r] = (const char*)l->r[r].ws;
    p.out[r] = (char*)l->r[r].out;
  }
  p.count = l->count;
  const size_t per_block = (size_t)kThreads * Pack<T>::kN * (kRanks <= 4 ? 2 : 1);
  size_t grid = ceil_div(l->count, per_block);
  if (grid > (size_t)(cap > 0 ? cap : 1)) grid = cap > 0 ? cap : 1;
  allreduce_kernel_copy<T, kRanks><<<(unsigned)grid, kThreads, 0, stream>>>(p);
  ce = cudaGetLastError();
  if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_cuda_allreduce_copy: kernel launch");
  return FCO_OK;
}

using LaunchFn = fco_result_t (*)(const fco_cuda_ar_launch_t*, char*);

template <typename T, bool kOneshot>
LaunchFn pick_ranks(int nranks) {
  switch (nranks) {
#define FCO_AR_CASE_(R) \
  case R: return kOneshot ? launch_oneshot<T, R> : launch_copy<T, R>;
    FCO_AR_CASE_(1) FCO_AR_CASE_(2) FCO_AR_CASE_(3) FCO_AR_CASE_(4)
    FCO_AR_CASE_(5) FCO_AR_CASE_(6) FCO_AR_CASE_(7) FCO_AR_CASE_(8)
#undef FCO_AR_CASE_
    default: return nullptr;
  }
}

template <bool kOneshot>
LaunchFn pick(fco_dtype_t dtype, int nranks) {
  switch (dtype) {
    case FCO_F32: return pick_ranks<float, kOneshot>(nranks);
    case FCO_F16: return pick_ranks<__half, kOneshot>(nranks);
    case FCO_BF16: return pick_ranks<__nv_bfloat16, kOneshot>(nranks);
    default: return nullptr;
  }
}

}  // namespace
}  // namespace fco

extern "C" fco_result_t fco_cuda_allreduce_oneshot(const fco_cuda_ar_launch_t* l, char* err) {
  size_t esize = 0;
  fco_result_t res = fco::check_launch(l, err, "fco_cuda_allreduce_oneshot", true, false, &esize);
  if (res != FCO_OK) return res;
  fco::LaunchFn fn = fco::pick<true>(l->dtype, l->nranks);
  if (!fn)
    return fco::fail(err, FCO_ERR_UNSUPPORTED, "fco_cuda_allreduce_oneshot: no kernel for dtype %d, "
                     "nranks %d", (int)l->dtype, l->nranks);
  return fn(l, err);
}

extern "C" fco_result_t fco_cuda_allreduce_copy(const fco_cuda_ar_launch_t* l, char* err) {
  size_t esize = 0;
  fco_result_t res = fco::check_launch(l, err, "fco_cuda_allreduce_copy", false,
                                       l && l->nranks > 1, &esize);
  if (res != FCO_OK) return res;
  if (l->num_local != l->nranks)
    return fco::fail(err, FCO_ERR_UNSUPPORTED,
                     "fco_cuda_allreduce_copy: needs every rank in one launch (num_local %d != "
                     "nranks %d): it is the local transport's baseline",
                     l->num_local, l->nranks);
  fco::LaunchFn fn = fco::pick<false>(l->dtype, l->nranks);
  if (!fn)
    return fco::fail(err, FCO_ERR_UNSUPPORTED, "fco_cuda_allreduce_copy: no kernel for dtype %d, "
                     "nranks %d", (int)l->dtype, l->nranks);
  return fn(l, err);
}

/* Generic entry (fco_cuda_run): impl 0 is ncclAllReduce on the nccl transport and the copy
 * reduction on the local one; impl 1 the one-shot kernel. */
extern "C" fco_result_t fco_cuda_allreduce_run(const fco_gpu_launch_t* g, char* err) {
  const fco_op_t* op0 = g->r[0].op;
  const fco_allreduce_args_t* a0 = &op0->u.allreduce;
  if (op0->impl == 0 && g->transport == FCO_TRANSPORT_NCCL) {
    for (int i = 0; i < g->num_local; i++) {
      const fco_allreduce_args_t* a = &g->r[i].op->u.allreduce;
      ncclDataType_t t = a->dtype == FCO_F32 ? ncclFloat32 : a->dtype == FCO_F16 ? ncclFloat16
                                                                                   : ncclBfloat16;
      ncclResult_t nr = ncclAllReduce(a->in, a->out, a->count, t, ncclSum,
                                      (ncclComm_t)g->r[i].nccl_comm, (cudaStream_t)g->stream);
      if (nr != ncclSuccess && nr != ncclInProgress)
        return fco::fail(err, FCO_ERR_NCCL, "ncclAllReduce: %s (%s)", ncclGetErrorString(nr),
                         ncclGetLastError((ncclComm_t)g->r[i].nccl_comm));
    }
    return FCO_OK;
  }
  fco_cuda_ar_launch_t l;
  memset(&l, 0, sizeof l);
  l.num_local = g->num_local;
  l.nranks = g->nranks;
  l.count = a0->count;
  l.dtype = a0->dtype;
  l.stream = g->stream;
  for (int i = 0; i < g->num_local; i++) {
    l.r[i].in = g->r[i].op->u.allreduce.in;
    l.r[i].out = g->r[i].op->u.allreduce.out;
    l.r[i].dev = g->r[i].dev;
    l.r[i].ws = g->r[i].ws;
  }
  switch (op0->impl) {
    case 0: return fco_cuda_allreduce_copy(&l, err);
    case 1: return fco_cuda_allreduce_oneshot(&l, err);
    default:
      return fco::fail(err, FCO_ERR_INVALID_ARGUMENT, "fco_allreduce: impl %d is not available on "
                       "the %s transport", op0->impl, fco_transport_name(g->transport));
  }
}
