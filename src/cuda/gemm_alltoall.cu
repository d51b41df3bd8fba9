/*
 * gemm_alltoall.cu — fco_gemm_alltoall on GPUs: the entry point (fco_cuda_gemm_alltoall_run), the
 * unfused baseline (impl 0) and the host side of impl 2. impl 1 and impl 2's kernels live in
 * gemm_alltoall_fused.cu, the shared protocol in gemm_alltoall.cuh, the workspace layout in
 * src/ops/gemm_alltoall.h.
 *
 * impl 0 "nccl" / "copy" (what users run today):
 *   counts on the host (counts_host, or a device→host copy and a stream sync), one cuBLAS GEMM
 *   per expert. One rank (P = 1, either transport): out holds A's rows in A's order, so the
 *   GEMMs write out directly after a one-block kernel checked the device counts against the
 *   host's (digest; a mismatch is reported, out then holds the GEMMs of the host's sizes).
 *   Several ranks: the GEMMs write y (scratch in half 0 of the workspace), then
 *     nccl:  a pack kernel reorders y destination-major (the permute users run before
 *            all_to_all_single) into `send`, and one ncclSend / ncclRecv per peer in a group
 *            (receive sizes: recv_rows_host, or an ncclAllGather of every rank's totals and a
 *            sync, with one rank per thread) into `recv` in the workspace, then (after the
 *            transport's NCCL group) one copy kernel recv → out. Send and receive buffers are in
 *            the NCCL-registered workspace: NCCL's zero-copy p2p needs both sides registered
 *            alike, a registered send to an unregistered out hung (gemm_alltoall.h);
 *     local: one kernel copies every rank's rows from its y into their destination's out.
 *   Bad counts are found on the host before anything is launched (local also checks every
 *   recv_rows_host against what its sources send). nccl without recv_rows_host: the validity
 *   rides in the totals' allgather, so every rank refuses together (a rank that refused alone
 *   left its peers in ncclAllGather forever: audit56 F1); with recv_rows_host a bad rank
 *   refuses alone and peers in other threads wait in NCCL (fco.h); a world one thread drives
 *   is checked whole, every rank's counts and hints, before any rank queues anything
 *   (fco_cuda_gemm_alltoall_check_batch), and a failure no check foresees cancels the NCCL group
 *   (src/transport/nccl.cu). On nccl the hints
 *   size the ncclSend/ncclRecv as given: a recv_rows_host that disagrees with the peer's counts
 *   (or that no longer holds its values when a group executes) makes NCCL fail ("Message
 *   truncated" in its connection set-up) or hang.
 *   The pack / copy kernel checks that the device counts are the host's (digest): a CUDA graph
 *   captured with hints bakes the GEMM sizes, so a replay with other device counts reports
 *   FCO_ERR_INVALID_ARGUMENT (slot 4) instead of silently mixing sizes (local: nothing
 *   written; nccl: the send/recv still run, but each pack tells every receiver on kValidSlot
 *   and the copy into out (ga_kernel_land0) copies nothing where a sender's were not: every
 *   rank reports it, no out is written). Scratch (y, send, recv) at the
 *   start of the workspace; on nccl the copy into out and a barrier kernel follow the
 *   send/recv (fco_cuda_gemm_alltoall_after_group, after the transport's NCCL group):
 *   gemm_alltoall.h says why.
 * impl 2 "chunks" (Flux / async-TP style), host order per call:
 *   1. fork a second stream (push stream) from the user stream;
 *   2. every cuBLAS GEMM of every local rank on the user stream, in chunks (below), an event
 *      after each chunk;
 *   3. on the push stream: the exchange kernel (headers → plan), then per chunk a wait for its
 *      event and a push kernel (FCO_GA_PUSH_BLOCKS blocks, default half the SMs) that copies
 *      the chunk's rows into out (own) or the destination's staging;
 *      With FCO_GA_LAND_EARLY=1 (off until measured) each chunk's push is followed by a
 *      progress kernel (rows pushed so far → each peer; a snapshot of the peers' counts) and,
 *      for an ordinary out, a land kernel copying what has arrived from staging into out
 *      (gemm_alltoall_fused.cu), so the finish kernel lands only the rest;
 *   4. join the push stream back, then the finish kernel ("all pushed" → peers, land).
 *   The GEMMs are issued before the first kernel that waits for a peer, so no cuBLAS kernel is
 *   ever loaded lazily while one of ours spins (a load may wait for running kernels: that
 *   deadlocked until the timeout on the nccl transport); our own kernels are preloaded.
 *   Chunks: experts in order; an expert's GEMM is split only when it has ≥ 2·Ts rows (pieces of
 *   about Ts), Ts = max(rows that fill the GPU twice with 128×128 tiles, rows/4), so each GEMM
 *   keeps cuBLAS's speed (splitting 1024-row experts in 512-row pieces cost 8 % at 4096 tokens ×
 *   K 14336); experts are grouped until a group has Tg rows, Tg = max(rows/8, about one wave of
 *   128×128 tiles, rounded down to 128 rows), at most Ts, and a push follows each group: the
 *   smaller the last group, the less of the all-to-all is left after the last GEMM.
 *   FCO_GA_CHUNK_ROWS sets both. The push kernels get half the SMs: they run between the chunk
 *   GEMMs (cuBLAS's kernels hold whole SMs), so a push of 16 blocks (the old default) was still
 *   running when the next one queued: run 1d0c2e0-sweep (2×H200, K 14336, chunks µs, 4096 /
 *   1024 / skewed 1024 tokens): 16 blocks, old chunks 1427 / 367 / 529 (run 1d0c2e0); 64 blocks
 *   1345 / 355 / 548; 64 blocks, Tg = 1024 1335 / 351 / 531; Tg = 512 (splitting at 4096)
 *   1437 / 343 / 533; 48, 96, 132 blocks within 1 % of 64.
 *   Tried and removed: the chunk GEMMs on sms − r SMs (cublasSetSmCountTarget), so the push
 *   kernels run beside a GEMM instead of between GEMMs — run 83e233a (2×H200, K 14336, chunks
 *   µs for r = 0 / 4 / 8): 1292.7 / 1324.3 / 1467.4 (4096 tokens), 339.5 / 339.2 / 347.7 (1024),
 *   508.4 / 503.8 / 516.6 (skew): no gain beyond the spread.
 * Graph capture: impl 1 always; impls 0 and 2 need counts_host (impl 0 on nccl with several
 * ranks per thread or while capturing also recv_rows_host); src/ops rejects the rest with
 * FCO_ERR_INVALID_USAGE before anything is issued.
 * cuBLAS: the handle per device and workspace per (device, stream) of blas.cuh (shared with
 * gemv_allreduce's unfused impls; until session 33 one workspace per (thread, device), which
 * GEMMs issued on two streams could use at once); fp32 compute (CUBLAS_COMPUTE_32F, no TF32)
 * for every dtype.
 */
#include <cublas_v2.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>
#include <vector>

#include "blas.cuh"
#include "capture.h"
#include "gemm_alltoall.cuh"

namespace fco {
namespace ga {
namespace {

/* ---- per (thread, device, user stream) resources -------------------------------------------- */
/* impl 2's push stream and its event ring, per user stream (since session 33; before, one per
 * (thread, device): two communicators driven from one thread on two streams queued their pushes
 * on one side stream, and each call's stream joined it, so the second call waited for the first
 * call's pushes). Up to kSideStreams entries a thread and device. A stream without an entry gets
 * a new one, or, when all are made or the stream is being captured and the thread has one, the
 * least recently used entry is handed over to it (a thread's first entry is made even during a
 * capture — stream and event creation are no stream work; such a first call has no cuBLAS
 * handle yet, which blas_lease refuses under capture) (since session 34; before, the
 * first entry was shared). Handing over is safe: every call forks from and joins back to its own
 * stream within the call, so between calls no push stream belongs to any stream's work; the new
 * owner's pushes only queue behind what the entry's push stream still runs. */
constexpr int kNumEvents = 128;
constexpr int kSideStreams = 8;
struct DevRes {
  cudaStream_t user = nullptr; /* the caller's stream this entry serves */
  cudaStream_t side = nullptr; /* impl 2's push stream */
  cudaEvent_t ev[kNumEvents] = {};
  int next_ev = 0;
  unsigned long long used = 0; /* ThreadRes::tick at the last call */
};
std::atomic<int> g_push_streams{0}; /* live push streams, every thread (the test's probe) */
/* One per (thread, device). A thread that ends gives its push streams and events back (they
 * used to stay until the process ended: a thread per request leaked a stream and 128 events
 * each). Not the main thread: its thread_local objects are destroyed inside exit(), where the
 * CUDA runtime may be going away; the process's end frees them. Work still queued on a push
 * stream finishes first (cudaStreamDestroy / cudaEventDestroy release once the device is done),
 * and graphs never refer to it (a capture turns its fork / join into graph edges). */
struct ThreadRes {
  DevRes e[kSideStreams];
  int n = 0;
  unsigned long long tick = 0;
  int device = -1; /* whose streams these are */
  ~ThreadRes() {
    /* device is set once an entry was begun; e[n] may hold what a failed resources() made
     * (its stream, some events): freed too (null handles skipped) */
    if (device < 0 || (pid_t)syscall(SYS_gettid) == getpid()) return;
    if (cudaSetDevice(device) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    RelaxedCapture relaxed; /* another thread may be capturing (resources() says why) */
    for (int i = 0; i < kSideStreams; ++i) {
      for (int k = 0; k < kNumEvents; ++k)
        if (e[i].ev[k]) (void)cudaEventDestroy(e[i].ev[k]);
      if (e[i].side && cudaStreamDestroy(e[i].side) == cudaSuccess) --g_push_streams;
    }
    (void)cudaGetLastError();
  }
};
thread_local ThreadRes t_res[kMaxDevices];

fco_result_t blas_fail(char* err, cublasStatus_t s, const char* what) {
  return fail(err, FCO_ERR_CUDA, "%s: cuBLAS %s", what, cublasGetStatusString(s));
}

fco_result_t resources(const fco_ga_knobs_t& k, cudaStream_t user, char* err, DevRes** out) {
  int dev = 0;
  cudaError_t ce = cudaGetDevice(&dev);
  if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaGetDevice");
  if (dev < 0 || dev >= kMaxDevices) return fail(err, FCO_ERR_UNSUPPORTED, "device %d", dev);
  ThreadRes& t = t_res[dev];
  DevRes* r = nullptr;
  for (int i = 0; i < t.n && !r; ++i)
    if (t.e[i].user == user) r = &t.e[i];
  if (!r) {
    int cap = 0; /* the legacy stream during a global capture counts (capture.h) */
    if ((ce = fco_stream_capture_query(user, &cap)) != cudaSuccess)
      return cuda_fail(err, ce, "cudaStreamIsCapturing (the call's stream)");
    if (t.n > 0 && (t.n == kSideStreams || cap)) {
      r = &t.e[0];
      for (int i = 1; i < t.n; ++i)
        if (t.e[i].used < r->used) r = &t.e[i];
      r->user = user;
    } else {
      r = &t.e[t.n];
      t.device = dev;
      RelaxedCapture relaxed;
      if (!r->side) {
        if ((ce = cudaStreamCreateWithFlags(&r->side, cudaStreamNonBlocking)) != cudaSuccess)
          return cuda_fail(err, ce, "cudaStreamCreate (push stream)");
        ++g_push_streams;
      }
      for (int i = 0; i < kNumEvents; ++i)
        if (!r->ev[i] &&
            (ce = cudaEventCreateWithFlags(&r->ev[i], cudaEventDisableTiming)) != cudaSuccess)
          return cuda_fail(err, ce, "cudaEventCreate");
      r->user = user;
      ++t.n; /* complete (a failure above leaves what it made for the next try) */
    }
  }
  r->used = ++t.tick;
  fco_result_t res = preload_kernels(k, err);
  if (res != FCO_OK) return res;
  *out = r;
  return FCO_OK;
}

/* Events are reused round robin; a wait binds to the record made last before it, so a call
 * must not record more than kNumEvents events before waiting on the first (run_chunks limits
 * its chunks to that). */
cudaEvent_t next_event(DevRes* r) { return r->ev[r->next_ev++ % kNumEvents]; }

/* `to` waits for what `from` has issued so far. */
fco_result_t join(DevRes* r, cudaStream_t from, cudaStream_t to, char* err) {
  cudaEvent_t ev = next_event(r);
  cudaError_t ce = cudaEventRecord(ev, from);
  if (ce == cudaSuccess) ce = cudaStreamWaitEvent(to, ev, 0);
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall: stream join");
}

cudaDataType_t blas_type(fco_dtype_t d) {
  return d == FCO_F32 ? CUDA_R_32F : d == FCO_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* Y[m, N] = A[m, K] · W (row-major; W [K, N] or [N, K]), fp32 compute, with the handle of a
 * BlasLease (bound to the stream). */
fco_result_t gemm(cublasHandle_t h, const fco_gemm_a2a_args_t* a, const char* A, const char* W,
                  char* Y, int64_t m, char* err) {
  if (m <= 0) return FCO_OK;
  const cudaDataType_t t = blas_type(a->dtype);
  const float one = 1.f, zero = 0.f;
  const int N = (int)a->n, K = (int)a->k;
  const bool nk = a->w_layout == FCO_W_NK;
  /* Column-major view: Yᵀ[N, m] = op(W)[N, K] · Aᵀ[K, m]. */
  cublasStatus_t s =
      cublasGemmEx(h, nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, N, (int)m, K, &one, W, t,
                   nk ? K : N, A, t, K, &zero, Y, t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return s == CUBLAS_STATUS_SUCCESS ? FCO_OK : blas_fail(err, s, "cublasGemmEx");
}

const fco_gemm_a2a_args_t* args(const fco_gpu_launch_t* l, int i) {
  return (const fco_gemm_a2a_args_t*)l->r[i].op->u.raw;
}

/* Host copies of every local rank's counts (hint, or one device→host copy + stream sync). */
fco_result_t host_counts(const fco_gpu_launch_t* l, std::vector<int32_t>* hc, char* err) {
  bool copied = false;
  /* The copy and its sync in relaxed capture mode (blas.cuh): another thread's global-mode
   * capture would refuse them and be invalidated; this call's stream is not being captured
   * (without counts_host src/ops refuses a captured call). */
  std::optional<RelaxedCapture> relaxed;
  for (int i = 0; i < l->num_local; ++i) {
    const fco_gemm_a2a_args_t* a = args(l, i);
    const size_t n = (size_t)a->num_experts * l->nranks;
    hc[i].resize(n);
    if (a->counts_host) {
      memcpy(hc[i].data(), a->counts_host, n * 4);
    } else {
      if (!relaxed) relaxed.emplace();
      cudaError_t ce = cudaMemcpyAsync(hc[i].data(), a->counts, n * 4, cudaMemcpyDeviceToHost,
                                       (cudaStream_t)l->stream);
      if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall: counts device→host");
      copied = true;
    }
  }
  if (copied) {
    cudaError_t ce = cudaStreamSynchronize((cudaStream_t)l->stream);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall: stream sync for the counts");
  }
  return FCO_OK;
}

/* fco_last_plan: "hint" when every local rank's counts_host was given, else "d2h" (host_counts
 * copied and synced). */
const char* counts_word(const fco_gpu_launch_t* l) {
  for (int i = 0; i < l->num_local; ++i)
    if (!args(l, i)->counts_host) return "d2h";
  return "hint";
}

/* No negative count, sum ≤ a_rows; tot[s] = rows for s. */
bool rank_valid(const std::vector<int32_t>& c, int E, int P, int64_t a_rows, int64_t* tot) {
  int64_t sum = 0;
  bool ok = true;
  for (int s = 0; s < P; ++s) tot[s] = 0;
  for (int e = 0; e < E; ++e)
    for (int s = 0; s < P; ++s) {
      const int32_t x = c[(size_t)e * P + s];
      if (x < 0) ok = false;
      else tot[s] += x;
      sum += x;
    }
  return ok && sum <= a_rows;
}

/* Which cuBLAS GEMMs impl 0 ran, over its local ranks, for fco_last_plan. */
struct Gemms {
  bool batched = false, loop = false;
};
const char* blas_word(const Gemms& g) {
  return g.batched ? (g.loop ? "cublasGemmEx/expert or StridedBatched" : "cublasGemmStridedBatchedEx")
                   : "cublasGemmEx/expert";
}

/* GEMM of every expert of local rank i into y (rows in A's order); *no_ws set when cuBLAS ran
 * without a workspace (blas.cuh), g->batched when fco_ga_batched_rows (every expert the same
 * small rows) let one cublasGemmStridedBatchedEx run them all, torch.bmm's GEMM. */
fco_result_t gemm_all(const fco_gpu_launch_t* l, int i, const std::vector<int32_t>& c, char* y,
                      bool* no_ws, Gemms* g, char* err) {
  const fco_gemm_a2a_args_t* a = args(l, i);
  const int P = l->nranks;
  const size_t es = fco_dtype_size(a->dtype);
  BlasLease lease;
  fco_result_t lr = blas_lease((cudaStream_t)l->stream, "fco_gemm_alltoall", &lease, err);
  if (lr != FCO_OK) return lr;
  if (!lease.workspace) *no_ws = true;
  const int64_t rows = fco_ga_batched_rows(c.data(), a->num_experts, P, a->n, a->knobs.blas_loop);
  if (rows > 0) {
    g->batched = true;
    const cudaDataType_t t = blas_type(a->dtype);
    const float one = 1.f, zero = 0.f;
    const int N = (int)a->n, K = (int)a->k;
    const bool nk = a->w_layout == FCO_W_NK;
    /* Column-major view per expert, as gemm(): Yᵀ[N, m] = op(W_e)[N, K] · A_eᵀ[K, m]. */
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        lease.h, nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, N, (int)rows, K, &one, a->w, t,
        nk ? K : N, (long long)K * N, a->a, t, K, (long long)rows * K, &zero, y, t, N,
        (long long)rows * N, a->num_experts, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? FCO_OK : blas_fail(err, s, "cublasGemmStridedBatchedEx");
  }
  g->loop = true;
  int64_t row = 0;
  for (int e = 0; e < a->num_experts; ++e) {
    int64_t m = 0;
    for (int s = 0; s < P; ++s) m += c[(size_t)e * P + s];
    const char* W = (const char*)a->w + (size_t)e * a->k * a->n * es;
    fco_result_t r = gemm(lease.h, a, (const char*)a->a + (size_t)row * a->k * es, W,
                          y + (size_t)row * a->n * es, m, err);
    if (r != FCO_OK) return r;
    row += m;
  }
  return FCO_OK;
}

/* ---- impl 0, local: copy every rank's rows into their destination ------------------------ */
struct CopyParams {
  const char* y[kMaxP];
  char* out[kMaxP];
  const int32_t* counts[kMaxP];
  fco_dev_rank_t* dev[kMaxP];
  uint64_t digest[kMaxP]; /* of the host counts the GEMMs were sized from */
  int32_t E[kMaxP];
  int32_t P;
  int64_t a_rows, out_rows, row_bytes;
};

/* Block (x, y = s·P + r): rows r sends to s, expert by expert, offsets from the device counts
 * once every rank's digest matched (else nothing is written, the error goes to every rank). */
__global__ void __launch_bounds__(kThreads) ga_kernel_local_copy(const CopyParams p) {
  __shared__ unsigned long long s_acc;
  const int P = p.P, s = blockIdx.y / P, r = blockIdx.y - s * P;
  const bool first = blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0;
  bool same = true;
  for (int q = 0; q < P; ++q) same &= block_digest(p.counts[q], p.E[q], P, &s_acc) == p.digest[q];
  if (first && !same)
    for (int q = 0; q < P; ++q)
      record_error(p.dev[q]->err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMM_ALLTOALL, -1,
                   kCountsChanged, 0, 0);
  if (!same) return;
  int64_t base = 0; /* Σ_{r' < r} rows r' sends to s */
  for (int q = 0; q < r; ++q)
    for (int e = 0; e < p.E[q]; ++e) base += p.counts[q][e * P + s];
  const int32_t* c = p.counts[r];
  int64_t arow = 0, drow = base;
  const size_t idx0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (int e = 0; e < p.E[r]; ++e)
    for (int q = 0; q < P; ++q) {
      const int64_t n = c[e * P + q];
      if (q == s && n > 0) {
        copy_cg(p.out[s] + drow * p.row_bytes, p.y[r] + arow * p.row_bytes, n * p.row_bytes,
                idx0, stride);
        drow += n;
      }
      arow += n;
    }
}

/* ---- impl 0, one rank: the device counts against the host's ------------------------------ */
/* One block, before the GEMMs (which write out directly at P = 1): records kCountsChanged when
 * the device counts are not the ones the GEMMs were sized from (a graph replay with other
 * counts, or a counts_host unlike counts). It cannot hold the GEMMs back: out then holds the
 * GEMMs of the host's sizes, all within a_rows / out_rows. */
__global__ void __launch_bounds__(kThreads)
    ga_kernel_check_counts(const int32_t* counts, int E, uint64_t digest, fco_dev_rank_t* dev) {
  __shared__ unsigned long long s_acc;
  if (block_digest(counts, E, 1, &s_acc) != digest && threadIdx.x == 0)
    record_error(dev->err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMM_ALLTOALL, -1, kCountsChanged, 0,
                 0);
}

/* ---- impl 0, nccl: pack y destination-major --------------------------------------------- */
struct PackParams {
  const char* y;
  char* send;
  const int32_t* counts;
  fco_dev_rank_t* dev;
  uint64_t digest;
  int32_t E, P;
  int64_t a_rows, row_bytes;
};

__global__ void __launch_bounds__(kThreads) ga_kernel_pack(const PackParams p) {
  __shared__ unsigned long long s_acc;
  const int P = p.P, s = blockIdx.y;
  const bool same = block_digest(p.counts, p.E, P, &s_acc) == p.digest;
  if (blockIdx.x == 0 && s == 0 && threadIdx.x == 0 && !same)
    /* counts unlike the host's: pack nothing (the send/recv still run) */
    record_error(p.dev->err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMM_ALLTOALL, -1, kCountsChanged,
                 0, 0);
  if (blockIdx.x == 0) { /* tell s whether what it receives from me is real (ga_kernel_land0) */
    __shared__ RankView v;
    load_rank_view(p.dev, &v, FCO_OP_GEMM_ALLTOALL);
    if (threadIdx.x == 0 && s < v.nranks)
      st_release_sys(v.peer_sig[s] + (size_t)v.rank * FCO_SIG_SLOTS + kValidSlot,
                     sig_value(v.epoch + 1, same ? 0 : 1));
  }
  if (!same) return;
  int64_t soff = 0;
  for (int i = 0; i < p.E * P; ++i)
    if (i % P < s) soff += p.counts[i];
  const size_t idx0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  int64_t arow = 0;
  for (int e = 0; e < p.E; ++e)
    for (int q = 0; q < P; ++q) {
      const int64_t n = p.counts[e * P + q];
      if (q == s && n > 0) {
        copy_cg(p.send + soff * p.row_bytes, p.y + arow * p.row_bytes, n * p.row_bytes, idx0,
                stride);
        soff += n;
      }
      arow += n;
    }
}

/* ---- impl 0, nccl: received rows → out, after the send/recv ------------------------------ */
/* Every block waits for every rank's kValidSlot (raised by its pack kernel, before its sends);
 * when one rank's device counts were not its host's, its rows here are stale: nothing is copied
 * and every rank records FCO_ERR_INVALID_ARGUMENT naming the lowest such rank. Else the blocks
 * copy their slices of the received rows. Before the barrier: peers may not reuse my workspace
 * (or raise this slot again) until it signalled. */
__global__ void __launch_bounds__(kThreads)
    ga_kernel_land0(fco_dev_rank_t* dev, const char* rbuf, char* out, size_t bytes) {
  __shared__ RankView v;
  __shared__ int s_bad;
  load_rank_view(dev, &v, FCO_OP_GEMM_ALLTOALL);
  const uint64_t e = v.epoch + 1;
  const int P = v.nranks, me = v.rank, q = threadIdx.x;
  if (q == 0) s_bad = P;
  __syncthreads();
  const WaitCtx ctx{v.err, v.timeout_ns, FCO_OP_GEMM_ALLTOALL};
  bool ok = true;
  if (q < P) {
    const uint64_t* f = v.peer_sig[me] + (size_t)q * FCO_SIG_SLOTS + kValidSlot;
    ok = wait_ge(f, sig_value(e, 0), ctx, q, kValidSlot);
    if (ok && ld_acquire_sys(f) != sig_value(e, 0)) atomicMin(&s_bad, q);
  }
  if (__syncthreads_or(!ok)) return; /* recorded by wait_ge */
  if (s_bad < P) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      record_error(v.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMM_ALLTOALL, s_bad, kCountsChanged,
                   0, 0);
    return;
  }
  size_t b0, b1;
  slice_of(bytes, gridDim.x, blockIdx.x, &b0, &b1);
  if (b1 > b0) copy_cg(out + b0, rbuf + b0, b1 - b0, threadIdx.x, blockDim.x);
}

ncclDataType_t nccl_type(fco_dtype_t t) {
  return t == FCO_F32 ? ncclFloat32 : t == FCO_F16 ? ncclFloat16 : ncclBfloat16;
}

fco_result_t nccl_fail(char* err, ncclResult_t r, ncclComm_t c, const char* what) {
  return fail(err, FCO_ERR_NCCL, "%s: %s (%s)", what, ncclGetErrorString(r),
              ncclGetLastError(c));
}
#define GA_NCCL(call, comm, what)                                                   \
  do {                                                                              \
    ncclResult_t r_ = (call);                                                       \
    if (r_ != ncclSuccess && r_ != ncclInProgress) return nccl_fail(err, r_, comm, what); \
  } while (0)

int copy_grid(size_t bytes, int pairs) {
  size_t per = (size_t)kThreads * 16 * 4; /* bytes a block moves per pass */
  size_t g = (bytes + per - 1) / per;
  int cap = 264 / (pairs > 0 ? pairs : 1);
  if (cap < 1) cap = 1;
  return g < 1 ? 1 : g > (size_t)cap ? cap : (int)g;
}

/* impl 0 on nccl: rows received by each op of the batch, from run_baseline to
 * fco_cuda_gemm_alltoall_after_group (the nccl transport runs every op of a batch, ends its NCCL
 * group, then calls the hook for each, in this thread). The last kMaxP notes are kept; the
 * newest note of an op wins (op records of an earlier batch may reuse the address). */
struct RecvNote {
  const fco_op_t* op;
  int64_t rows;
};
thread_local RecvNote t_recv_notes[kMaxP];
thread_local unsigned t_recv_next;

void note_recv_rows(const fco_op_t* op, int64_t rows) {
  t_recv_notes[t_recv_next++ % kMaxP] = RecvNote{op, rows};
}

bool noted_recv_rows(const fco_op_t* op, int64_t* rows) {
  for (unsigned k = 1; k <= (unsigned)kMaxP; ++k) {
    RecvNote& n = t_recv_notes[(t_recv_next - k) % kMaxP];
    if (n.op == op) {
      *rows = n.rows;
      n.op = nullptr; /* consumed */
      return true;
    }
  }
  return false;
}

/* impl 0 on nccl's own kernels, loaded once per device before any is launched: land0 waits for
 * peers, and a kernel loaded lazily may wait for running ones (preload_kernels says why). */
fco_result_t preload_nccl(char* err) {
  static std::atomic<int> done[kMaxDevices];
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK || (device < kMaxDevices && done[device].load())) return r;
  const void* fns[] = {(const void*)ga_kernel_pack, (const void*)ga_kernel_land0};
  if ((r = load_kernels(err, fns, 2, "gemm_alltoall nccl: cudaFuncGetAttributes")) != FCO_OK)
    return r;
  if (device < kMaxDevices) done[device].store(1);
  return FCO_OK;
}

/* Every rank is in l (the local transport; the nccl transport's batch check): the refusals that
 * need every rank's totals (tot[r][s]: rows rank r sends s) — a recv_rows_host unlike what its
 * sources send (the sizes impl 0 on nccl would trust; the cpu backend checks them too), more rows
 * in than out_rows. */
fco_result_t check_receivers(const fco_gpu_launch_t* l, const int64_t (*tot)[kMaxP], char* err) {
  const int P = l->nranks;
  for (int s = 0; s < P; ++s) {
    const fco_gemm_a2a_args_t* a = args(l, s);
    for (int r = 0; a->recv_rows_host && r < P; ++r)
      if (a->recv_rows_host[r] != tot[r][s])
        return fail(err, FCO_ERR_INVALID_ARGUMENT,
                    "rank %d's recv_rows_host[%d] = %d, but rank %d sends it %lld rows; "
                    "nothing was written",
                    s, r, a->recv_rows_host[r], r, (long long)tot[r][s]);
    int64_t in = 0;
    for (int i = 0; i < P; ++i) in += tot[i][s];
    if (in > a->out_rows)
      return fail(err, FCO_ERR_INVALID_ARGUMENT,
                  "rank %d would receive %lld rows, more than out_rows %lld; nothing was "
                  "written",
                  s, (long long)in, (long long)a->out_rows);
  }
  return FCO_OK;
}

fco_result_t run_baseline(const fco_gpu_launch_t* l, char* err) {
  const fco_gemm_a2a_args_t* a0 = args(l, 0);
  const int P = l->nranks;
  const size_t es = fco_dtype_size(a0->dtype), rb = (size_t)a0->n * es;
  cudaStream_t st = (cudaStream_t)l->stream;
  /* Our kernels (the barrier of after_group among them) loaded before any waits; impl 0 uses no
   * push stream, so it takes no DevRes (resources() made impl 2's stream and 128 events for
   * every user stream impl 0 ran on, and counted them in g_push_streams). */
  fco_result_t r = preload_kernels(a0->knobs, err);
  if (r != FCO_OK) return r;
  if (l->transport == FCO_TRANSPORT_NCCL && P > 1 && (r = preload_nccl(err)) != FCO_OK) return r;
  bool no_ws = false; /* cuBLAS ran without a workspace (blas.cuh): said in the plan */
  Gemms g;            /* which GEMMs ran (blas_word): said in the plan */
  std::vector<int32_t> hc[kMaxP];
  if ((r = host_counts(l, hc, err)) != FCO_OK) return r;
  int64_t tot[kMaxP][kMaxP] = {}; /* tot[i][s]: local rank i → s */
  bool valid = true;               /* nccl: one rank per launch, valid = its counts' */
  for (int i = 0; i < l->num_local; ++i) {
    valid = rank_valid(hc[i], args(l, i)->num_experts, P, args(l, i)->a_rows, tot[i]);
    /* nccl with peers: the peers must hear of it first (below) */
    if (!valid && (l->transport != FCO_TRANSPORT_NCCL || P == 1))
      return fail(err, FCO_ERR_INVALID_ARGUMENT,
                  "%s%d's counts have a negative entry or sum to more than a_rows %lld; "
                  "nothing was written",
                  l->transport == FCO_TRANSPORT_LOCAL ? "rank " : "local rank ", i,
                  (long long)a0->a_rows);
  }

  if (P == 1) {
    /* One rank: out holds the rows from rank 0 in expert order, which is A's order, so the
     * all-to-all is the identity and the GEMMs write out directly (no scratch, pack, self
     * send / receive or copy: at 4096 tokens × K 14336 those cost 191 µs over the GEMMs' 1179,
     * run 2026-12-01_nvidia-h200_d558715-probe). */
    const fco_gemm_a2a_args_t* a = a0;
    if (a->recv_rows_host && a->recv_rows_host[0] != tot[0][0])
      return fail(err, FCO_ERR_INVALID_ARGUMENT,
                  "recv_rows_host[0] = %d, but this rank sends itself %lld rows; nothing was "
                  "written",
                  a->recv_rows_host[0], (long long)tot[0][0]);
    if (tot[0][0] > a->out_rows)
      return fail(err, FCO_ERR_INVALID_ARGUMENT,
                  "this rank would receive %lld rows, more than out_rows %lld; nothing was "
                  "written",
                  (long long)tot[0][0], (long long)a->out_rows);
    /* The GEMMs first: their cuBLAS lease may be refused under capture (no handle yet), which
     * must leave nothing in the caller's graph (the check queued before it stayed captured: a
     * replay with other counts then broke the communicator). The check holds nothing back. */
    if ((r = gemm_all(l, 0, hc[0], (char*)a->out, &no_ws, &g, err)) != FCO_OK) return r;
    ga_kernel_check_counts<<<1, kThreads, 0, st>>>(
        a->counts, a->num_experts, fco_ga_digest_host(hc[0].data(), a->num_experts, 1),
        l->r[0].dev);
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall: count check launch");
    fco_plan_append(l->plan, " kernel %s%s into out (one rank: no all-to-all) counts=%s",
                    blas_word(g), no_ws ? " (no cuBLAS workspace)" : "", counts_word(l));
    return FCO_OK;
  }

  if (l->transport == FCO_TRANSPORT_LOCAL) {
    if ((r = check_receivers(l, tot, err)) != FCO_OK) return r;
    CopyParams p;
    memset(&p, 0, sizeof p);
    size_t most = 0;
    for (int i = 0; i < P; ++i) {
      const fco_gemm_a2a_args_t* a = args(l, i);
      char* y = (char*)l->r[i].ws; /* scratch (gemm_alltoall.h); one stream: no barrier */
      if ((r = gemm_all(l, i, hc[i], y, &no_ws, &g, err)) != FCO_OK) return r;
      p.y[i] = y;
      p.out[i] = (char*)a->out;
      p.counts[i] = a->counts;
      p.dev[i] = l->r[i].dev;
      p.digest[i] = fco_ga_digest_host(hc[i].data(), a->num_experts, P);
      p.E[i] = a->num_experts;
      for (int s = 0; s < P; ++s) most = (size_t)tot[i][s] * rb > most ? (size_t)tot[i][s] * rb : most;
    }
    p.P = P;
    p.a_rows = a0->a_rows;
    p.out_rows = a0->out_rows;
    p.row_bytes = (int64_t)rb;
    dim3 grid((unsigned)copy_grid(most, P * P), (unsigned)(P * P));
    ga_kernel_local_copy<<<grid, kThreads, 0, st>>>(p);
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall copy: kernel launch");
    /* fco_last_plan: grid.x blocks per (source, destination) pair */
    fco_plan_append(l->plan, " kernel %s%s + copy counts=%s, %u blocks/pair", blas_word(g),
                    no_ws ? " (no cuBLAS workspace)" : "", counts_word(l), grid.x);
    return FCO_OK;
  }

  /* nccl: one rank per call. */
  const fco_gemm_a2a_args_t* a = a0;
  ncclComm_t nc = (ncclComm_t)l->r[0].nccl_comm;
  int64_t recv[kMaxP] = {};
  const char* recv_word = a->recv_rows_host ? "hint" : "allgather"; /* plan */
  if (a->recv_rows_host) {
    /* Bad counts with hints: no exchange tells the peers (that would cost the good case a
     * sync), and no send size they expect is known here, so their ncclSend / ncclRecv with
     * this rank cannot complete (fco.h says so). A world driven by one thread refused it
     * before anything was queued (fco_cuda_gemm_alltoall_check_batch). */
    if (!valid)
      return fail(err, FCO_ERR_INVALID_ARGUMENT,
                  "this rank's counts have a negative entry or sum to more than a_rows %lld; "
                  "nothing was written (with recv_rows_host on nccl, peers in other threads wait "
                  "for it in NCCL: fco.h)",
                  (long long)a->a_rows);
    for (int s = 0; s < P; ++s) recv[s] = a->recv_rows_host[s];
  } else {
    /* Every rank's totals and validity to every rank (ncclAllGather), through the plan area of
     * the workspace, then a sync: all ranks reach the same verdict (a rank that refused before
     * the allgather left its peers in it forever: audit56 F1). */
    int32_t* dbuf = (int32_t*)((char*)l->r[0].ws + fco_ga_base_off_totals(a->a_rows, a->n, es));
    std::vector<int32_t> mine(P + 1), all((size_t)P * (P + 1));
    for (int s = 0; s < P; ++s) mine[s] = valid ? (int32_t)tot[0][s] : 0;
    mine[P] = valid ? 1 : 0;
    cudaError_t ce = cudaMemcpyAsync(dbuf, mine.data(), (P + 1) * 4, cudaMemcpyHostToDevice, st);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall nccl: totals to device");
    GA_NCCL(ncclAllGather(dbuf, dbuf + P + 1, P + 1, ncclInt32, nc, st), nc, "ncclAllGather (totals)");
    ce = cudaMemcpyAsync(all.data(), dbuf + P + 1, all.size() * 4, cudaMemcpyDeviceToHost, st);
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(st);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall nccl: totals to host");
    int me = 0;
    GA_NCCL(ncclCommUserRank(nc, &me), nc, "ncclCommUserRank");
    for (int q = 0; q < P; ++q)
      if (all[(size_t)q * (P + 1) + P] != 1)
        return fail(err, FCO_ERR_INVALID_ARGUMENT,
                    "rank %d's counts have a negative entry or sum to more than a_rows %lld; "
                    "nothing was written",
                    q, (long long)a->a_rows);
    for (int s = 0; s < P; ++s) {
      int64_t in = 0;
      for (int q = 0; q < P; ++q) in += all[(size_t)q * (P + 1) + s];
      if (in > a->out_rows)
        return fail(err, FCO_ERR_INVALID_ARGUMENT,
                    "rank %d would receive %lld rows, more than out_rows %lld; nothing was "
                    "written",
                    s, (long long)in, (long long)a->out_rows);
    }
    for (int q = 0; q < P; ++q) recv[q] = all[(size_t)q * (P + 1) + me];
  }
  int64_t in = 0;
  for (int s = 0; s < P; ++s) in += recv[s];
  if (in > a->out_rows)
    return fail(err, FCO_ERR_INVALID_ARGUMENT,
                "this rank would receive %lld rows, more than out_rows %lld; nothing was written",
                (long long)in, (long long)a->out_rows);
  char* y = (char*)l->r[0].ws; /* scratch (gemm_alltoall.h) */
  char* send = (char*)l->r[0].ws + fco_ga_base_off_send(a->a_rows, a->n, es);
  if ((r = gemm_all(l, 0, hc[0], y, &no_ws, &g, err)) != FCO_OK) return r;
  size_t most = 0;
  for (int s = 0; s < P; ++s) most = (size_t)tot[0][s] * rb > most ? (size_t)tot[0][s] * rb : most;
  PackParams pp = {y,     send, a->counts, l->r[0].dev, fco_ga_digest_host(hc[0].data(), a->num_experts, P),
                   a->num_experts, P,    a->a_rows, (int64_t)rb};
  const unsigned pack_blocks = (unsigned)copy_grid(most, P); /* per destination */
  ga_kernel_pack<<<dim3(pack_blocks, (unsigned)P), kThreads, 0, st>>>(pp);
  cudaError_t ce = cudaGetLastError();
  if (ce != cudaSuccess)
    return cuda_fail(err, ce, "gemm_alltoall nccl: pack launch");
  /* Received rows land in the workspace (registered like `send`, see gemm_alltoall.h), then
   * fco_cuda_gemm_alltoall_after_group copies them into out. */
  char* rbuf = (char*)l->r[0].ws + fco_ga_base_off_recv(P, a->a_rows, a->n, es);
  GA_NCCL(ncclGroupStart(), nc, "ncclGroupStart");
  int64_t soff = 0, roff = 0;
  ncclResult_t nr = ncclSuccess;
  for (int s = 0; s < P && (nr == ncclSuccess || nr == ncclInProgress); ++s) {
    if (tot[0][s] > 0)
      nr = ncclSend(send + (size_t)soff * rb, (size_t)tot[0][s] * a->n, nccl_type(a->dtype), s,
                    nc, st);
    if (recv[s] > 0 && (nr == ncclSuccess || nr == ncclInProgress))
      nr = ncclRecv(rbuf + (size_t)roff * rb, (size_t)recv[s] * a->n, nccl_type(a->dtype), s, nc,
                    st);
    soff += tot[0][s];
    roff += recv[s];
  }
  ncclResult_t ne = ncclGroupEnd(); /* always: balances the group */
  if (nr == ncclSuccess || nr == ncclInProgress) nr = ne;
  if (nr != ncclSuccess && nr != ncclInProgress)
    return nccl_fail(err, nr, nc, "ncclSend/ncclRecv");
  note_recv_rows(l->r[0].op, in);
  /* fco_last_plan (the pack's grid: blocks per destination); the copy into out and the barrier
   * follow in fco_cuda_gemm_alltoall_after_group */
  fco_plan_append(l->plan,
                  " kernel %s%s + pack + ncclSend/Recv + copy + barrier counts=%s recv=%s, "
                  "%u blocks/dest",
                  blas_word(g), no_ws ? " (no cuBLAS workspace)" : "", counts_word(l), recv_word,
                  pack_blocks);
  return FCO_OK;
}

/* ---- impl 2 ---------------------------------------------------------------------------------- */
struct GemmRange {
  int e;
  int64_t r0, r1; /* rows [r0, r1) of expert e's rows */
};
using ChunkPlan = std::vector<std::vector<GemmRange>>; /* chunk = GEMMs pushed together */

/* Chunks of one rank (file comment): split experts with ≥ 2T rows into pieces of about T rows
 * (multiples of 128 but the last), group smaller ones until a group reaches Tg rows. */
void plan_chunks(const int32_t* c, int E, int P, int64_t T, int64_t Tg, ChunkPlan* out) {
  out->clear();
  std::vector<GemmRange> cur;
  int64_t g = 0;
  for (int e = 0; e < E; ++e) {
    int64_t m = 0;
    for (int s = 0; s < P; ++s) m += c[(size_t)e * P + s];
    if (m == 0) continue;
    if (m >= 2 * T) {
      const int64_t k = m / T, per = ((m + k - 1) / k + 127) / 128 * 128;
      for (int64_t r0 = 0; r0 < m; r0 += per) {
        cur.push_back(GemmRange{e, r0, r0 + per < m ? r0 + per : m});
        out->push_back(cur);
        cur.clear();
        g = 0;
      }
    } else {
      cur.push_back(GemmRange{e, 0, m});
      if ((g += m) >= Tg) {
        out->push_back(cur);
        cur.clear();
        g = 0;
      }
    }
  }
  if (!cur.empty()) out->push_back(cur);
}

struct PendingPush {
  int rank;      /* local rank */
  cudaEvent_t ev; /* after the chunk's GEMMs */
  std::vector<std::array<int64_t, 4>> pieces;
};

fco_result_t run_chunks(const fco_gpu_launch_t* l, char* err) {
  const fco_gemm_a2a_args_t* a0 = args(l, 0);
  const int P = l->nranks;
  const size_t es = fco_dtype_size(a0->dtype), rb = (size_t)a0->n * es;
  cudaStream_t st = (cudaStream_t)l->stream;
  DevRes* res = nullptr;
  fco_result_t r = resources(a0->knobs, st, err, &res); /* also preloads our kernels */
  if (r != FCO_OK) return r;
  std::vector<int32_t> hc[kMaxP];
  if ((r = host_counts(l, hc, err)) != FCO_OK) return r; /* a sync: before any kernel waits */
  int device = 0, sms = 0;
  if ((r = current_device(err, &device, &sms)) != FCO_OK) return r;
  RankArgs ra[kMaxP];
  memset(ra, 0, sizeof ra);
  for (int i = 0; i < l->num_local; ++i) {
    const fco_gemm_a2a_args_t* a = args(l, i);
    ra[i] = RankArgs{(const char*)a->a, (const char*)a->w, (char*)a->out, a->counts, l->r[i].dev,
                     (char*)l->r[i].ws, a->num_experts,
                     fco_ga_digest_host(hc[i].data(), a->num_experts, P)};
    rank_sym(l, i, &ra[i]);
  }
  /* The lease (blas.cuh) binds the handle to st with st's workspace; released after the GEMM
   * loop. Taken before the fork: its refusal (no handle yet while capturing) must leave no
   * forked push stream behind in the caller's capture (cudaStreamEndCapture would then fail
   * with cudaErrorStreamCaptureUnjoined and the whole graph be lost). */
  BlasLease lease;
  if ((r = blas_lease(st, "fco_gemm_alltoall", &lease, err)) != FCO_OK) return r;
  const bool no_ws = !lease.workspace;
  cudaStream_t side = res->side;
  if ((r = join(res, st, side, err)) != FCO_OK) return r; /* fork: after the user's prior work */
  /* From the fork on, a failure still joins the push stream back (best effort): else a capture
   * the call is part of cannot end (cudaErrorStreamCaptureUnjoined: the caller's whole graph
   * lost), and eagerly the caller's next work would not wait for what the push stream holds. */
  struct JoinBack {
    DevRes* res;
    cudaStream_t from, to;
    bool armed;
    ~JoinBack() {
      char ignored[FCO_ERRMSG_LEN];
      if (armed) (void)join(res, from, to, ignored);
    }
  } join_back{res, side, st, true};
  /* A failure once the exchange is queued leaves the call half done on the device (no finish:
   * the epoch does not end; peers wait for pushes that never come): said to the transport,
   * which makes it sticky (cuda_ops.h, mid_call). */
  struct MidCall {
    int* flag;
    bool on;
    ~MidCall() {
      if (on && flag) *flag = 1;
    }
  } mid_call{l->mid_call, false};
  const int64_t env_rows = a0->knobs.chunk_rows; /* the call's knobs (read_knobs) */
  const long long env_pb = a0->knobs.push_blocks;
  const int push_blocks = env_pb > 0 ? (int)std::min<long long>(env_pb, 1 << 16)
                                     : std::max(sms / 2, 1);
  /* Rows that give 2 waves of 128×128 tiles at this N, and about one wave (rounded down). */
  const int64_t fill = ((2 * (int64_t)sms * 128 * 128 / a0->n + 127) / 128) * 128;
  const int64_t wave = std::max<int64_t>(128, ((int64_t)sms * 128 * 128 / a0->n) / 128 * 128);
  const int max_chunks = (kNumEvents - 2) / l->num_local;
  std::vector<PendingPush> pushes;
  PlanSpan n_chunks, split_rows, group_rows; /* fco_last_plan: chunks, Ts and Tg of the local ranks */

  /* 1. Every GEMM (with the lease taken above), an event after each chunk. No kernel of ours
   * that waits is issued yet. */
  for (int i = 0; i < l->num_local; ++i) {
    const fco_gemm_a2a_args_t* a = args(l, i);
    const int E = a->num_experts;
    const int32_t* c = hc[i].data();
    int64_t tot[kMaxP];
    /* Bad counts: no GEMM, no push; the exchange reports them (the same on every rank). */
    if (!rank_valid(hc[i], E, P, a->a_rows, tot)) {
      n_chunks.add(0);
      continue;
    }
    int64_t total = 0;
    for (int s = 0; s < P; ++s) total += tot[s];
    int64_t T = env_rows > 0 ? env_rows : std::max<int64_t>(fill, (total + 3) / 4);
    if (T < 1) T = 1;
    int64_t Tg = env_rows > 0 ? env_rows : std::min(T, std::max<int64_t>(wave, (total + 7) / 8));
    ChunkPlan plan;
    for (plan_chunks(c, E, P, T, Tg, &plan); (int)plan.size() > max_chunks;
         plan_chunks(c, E, P, T, Tg, &plan)) {
      T *= 2;
      Tg *= 2;
    }
    n_chunks.add((long long)plan.size());
    split_rows.add(T);
    group_rows.add(Tg);
    /* Per expert: first A row, and rows of earlier experts per destination. */
    std::vector<int64_t> arow(E + 1, 0), dl((size_t)(E + 1) * P, 0);
    for (int e = 0; e < E; ++e) {
      int64_t m = 0;
      for (int s = 0; s < P; ++s) {
        m += c[(size_t)e * P + s];
        dl[(size_t)(e + 1) * P + s] = dl[(size_t)e * P + s] + c[(size_t)e * P + s];
      }
      arow[e + 1] = arow[e] + m;
    }
    char* y = ra[i].ws + fco_ga_off_y(P, a->out_rows, a->n, es);
    for (const std::vector<GemmRange>& chunk : plan) {
      PendingPush pp;
      pp.rank = i;
      for (const GemmRange& g : chunk) {
        const int64_t row = arow[g.e] + g.r0;
        const char* W = (const char*)a->w + (size_t)g.e * a->k * a->n * es;
        r = gemm(lease.h, a, (const char*)a->a + (size_t)row * a->k * es, W,
                 y + (size_t)row * rb, g.r1 - g.r0, err);
        if (r != FCO_OK) return r;
        int64_t seg = 0; /* first row of source s's segment within the expert */
        for (int s = 0; s < P; ++s) {
          const int64_t cs = c[(size_t)g.e * P + s];
          const int64_t lo = std::max(seg, g.r0), hi = std::min(seg + cs, g.r1);
          if (hi > lo)
            pp.pieces.push_back({s, hi - lo, arow[g.e] + lo, dl[(size_t)g.e * P + s] + (lo - seg)});
          seg += cs;
        }
      }
      pp.ev = next_event(res);
      cudaError_t ce = cudaEventRecord(pp.ev, st);
      if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall chunks: event record");
      pushes.push_back(std::move(pp));
    }
  }
  lease.lock.unlock();
  /* 2. Exchange, then the pushes, on the push stream (and, FCO_GA_LAND_EARLY=1, after each
   * chunk's push the progress flags and an early landing: gemm_alltoall_fused.cu). */
  const bool early = a0->knobs.land_early;
  int64_t pushed[kMaxP][kMaxP]; /* [local rank][destination]: rows pushed so far */
  memset(pushed, 0, sizeof pushed);
  mid_call.on = true; /* a failed launch may still have queued it */
  if ((r = launch_exchange(l, ra, (void*)side, err)) != FCO_OK) return r;
  for (const PendingPush& pp : pushes) {
    cudaError_t ce = cudaStreamWaitEvent(side, pp.ev, 0);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall chunks: wait for a chunk");
    const fco_gemm_a2a_args_t* a = args(l, pp.rank);
    const char* y = ra[pp.rank].ws + fco_ga_off_y(P, a->out_rows, a->n, es);
    for (size_t k = 0; k < pp.pieces.size(); k += kMaxPieces) {
      const int np = (int)std::min<size_t>(kMaxPieces, pp.pieces.size() - k);
      r = a0->knobs.fault_push
              ? fail(err, FCO_ERR_CUDA, "FCO_FAULT_GA_PUSH=1: impl 2's first push fails (a test "
                     "hook)")
              : launch_push(ra[pp.rank], y, P, a->out_rows, a->n, (int)es,
                            reinterpret_cast<const int64_t(*)[4]>(pp.pieces[k].data()), np,
                            push_blocks, (void*)side, err);
      if (r != FCO_OK) return r;
    }
    if (early) {
      for (const std::array<int64_t, 4>& pc : pp.pieces) pushed[pp.rank][pc[0]] += pc[1];
      /* A symmetric out lands nothing early: the peers store into it (the finish kernel lands
       * the rows of one that staged because it lacks the slot: fco_ga_direct). */
      const bool snap = ra[pp.rank].out_sym < 0;
      r = launch_progress(ra[pp.rank], P, a->out_rows, a->n, (int)es, pushed[pp.rank], snap,
                          (void*)side, err);
      if (r == FCO_OK && snap)
        r = launch_land(ra[pp.rank], P, a->out_rows, a->n, (int)es, push_blocks, (void*)side, err);
      if (r != FCO_OK) return r;
    }
  }
  /* 3. Join, then land. */
  join_back.armed = false;
  if ((r = join(res, side, st, err)) != FCO_OK) return r;
  int finish_blocks = 0;
  if ((r = launch_finish(l, ra, &finish_blocks, err)) != FCO_OK) return r;
  mid_call.on = false;
  /* fco_last_plan, e.g. " kernel cublasGemmEx chunks=6 Ts=2048 Tg=512 + push direct, push 66 +
   * finish 64 blocks/rank"; land-early: FCO_GA_LAND_EARLY */
  char nc[32], ts[40], tg[40], rw[24];
  fco_plan_append(l->plan,
                  " kernel cublasGemmEx%s chunks=%s Ts=%s Tg=%s + push%s%s, push %d + finish %d "
                  "blocks/rank",
                  no_ws ? " (no cuBLAS workspace)" : "", n_chunks.str(nc, sizeof nc), split_rows.str(ts, sizeof ts),
                  group_rows.str(tg, sizeof tg), early ? " land-early" : "",
                  recv_words(ra, l->num_local, P, rw, sizeof rw), push_blocks, finish_blocks);
  return FCO_OK;
}

}  // namespace
}  // namespace ga
}  // namespace fco

/* Live push streams of impl 2 in the process (every thread and device): a test probe
 * (tests/test_streams.c), exported like fco_env_int, not in fco.h. */
extern "C" int fco_cuda_ga_push_streams_live(void) { return fco::ga::g_push_streams.load(); }

/* nccl, after the transport's NCCL group (cuda_ops.h): impl 0's barrier, ordered after its
 * send/recv on the stream. Nothing for the fused impls or the local transport. */
extern "C" fco_result_t fco_cuda_gemm_alltoall_after_group(const fco_gpu_launch_t* l, char* err) {
  using namespace fco;
  /* One rank: run_baseline wrote out directly, no send / receive (nothing noted). */
  if (!l || l->transport != FCO_TRANSPORT_NCCL || l->r[0].op->impl != 0 || l->nranks == 1)
    return FCO_OK;
  for (int i = 0; i < l->num_local; ++i) {
    /* The received rows, workspace → out, before the barrier lets peers reuse the workspace. */
    const fco_gemm_a2a_args_t* a = ga::args(l, i);
    int64_t rows = 0;
    if (!ga::noted_recv_rows(l->r[i].op, &rows))
      return fail(err, FCO_ERR_INTERNAL, "gemm_alltoall nccl: no receive count noted for the op");
    const size_t es = fco_dtype_size(a->dtype);
    /* Only where every sender's device counts were its host's (ga_kernel_land0); a kernel
     * also when nothing comes in, so that every rank reports a sender's stale rows. */
    const char* rbuf =
        (const char*)l->r[i].ws + fco_ga_base_off_recv(l->nranks, a->a_rows, a->n, es);
    const size_t bytes = (size_t)rows * (size_t)a->n * es;
    ga::ga_kernel_land0<<<(unsigned)ga::copy_grid(bytes, 1), ga::kThreads, 0,
                          (cudaStream_t)l->stream>>>(l->r[i].dev, rbuf, (char*)a->out, bytes);
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall nccl: received rows → out");
    fco_result_t r = ga::launch_barrier(l->r[i].dev, l->stream, err);
    if (r != FCO_OK) return r;
  }
  return FCO_OK;
}

/* impl 0 on nccl, one thread driving a world (fco_cuda_check_batch): every rank's host-side
 * refusals before any rank queues its send / receive, so that none is queued without its peers'.
 * run_baseline's own checks stay for ranks driven one per thread; for the failures no check
 * foresees (a launch, cuBLAS) the transport cancels its NCCL group (nccl_run), which can leave
 * NCCL's connections to a peer marked seen but never set up (audit56 R1: the next call may hang
 * in NCCL). The counts are read here and again by run_baseline (a second device→host copy
 * and sync where counts_host is not given). */
extern "C" fco_result_t fco_cuda_gemm_alltoall_check_batch(const fco_gpu_launch_t* ls, int n,
                                                           char* err) {
  using namespace fco;
  if (n < 2 || ls[0].transport != FCO_TRANSPORT_NCCL || ls[0].r[0].op->impl != 0 ||
      ls[0].nranks == 1)
    return FCO_OK;
  const int P = ls[0].nranks;
  if (n > P || P > ga::kMaxP) return fail(err, FCO_ERR_INTERNAL, "gemm_alltoall: bad batch");
  fco_gpu_launch_t w; /* every rank of the batch as one launch, in rank order */
  memset(&w, 0, sizeof w);
  w.transport = FCO_TRANSPORT_NCCL;
  w.nranks = P;
  w.num_local = 1;
  std::vector<int32_t> hc[ga::kMaxP];
  int64_t tot[ga::kMaxP][ga::kMaxP] = {};
  bool seen[ga::kMaxP] = {};
  for (int i = 0; i < n; ++i) {
    const fco_comm_t c = ls[i].r[0].op->comm;
    const fco_gemm_a2a_args_t* a = ga::args(&ls[i], 0);
    if (c->rank < 0 || c->rank >= P || seen[c->rank])
      return fail(err, FCO_ERR_INTERNAL, "gemm_alltoall: bad batch (rank %d)", c->rank);
    seen[c->rank] = true;
    cudaError_t ce = cudaSetDevice(c->device);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall: cudaSetDevice");
    fco_result_t r = ga::host_counts(&ls[i], &hc[c->rank], err);
    if (r != FCO_OK) return r;
    if (!ga::rank_valid(hc[c->rank], a->num_experts, P, a->a_rows, tot[c->rank]))
      return fail(err, FCO_ERR_INVALID_ARGUMENT,
                  "rank %d's counts have a negative entry or sum to more than a_rows %lld; "
                  "nothing was written (checked on every rank before any was queued)",
                  c->rank, (long long)a->a_rows);
    if (a->recv_rows_host) {
      int64_t in = 0;
      for (int s = 0; s < P; ++s) in += a->recv_rows_host[s];
      if (in > a->out_rows)
        return fail(err, FCO_ERR_INVALID_ARGUMENT,
                    "rank %d would receive %lld rows (recv_rows_host), more than out_rows "
                    "%lld; nothing was written",
                    c->rank, (long long)in, (long long)a->out_rows);
    }
    w.r[c->rank] = ls[i].r[0];
  }
  if (n < P) return FCO_OK; /* part of the world: what one rank's peers send is not known here */
  w.num_local = P;
  return ga::check_receivers(&w, tot, err);
}

extern "C" fco_result_t fco_cuda_gemm_alltoall_run(const fco_gpu_launch_t* l, char* err) {
  using namespace fco;
  if (!l || l->num_local < 1 || l->nranks < 1 || l->nranks > FCO_MAX_GPU_RANKS)
    return fail(err, FCO_ERR_INTERNAL, "gemm_alltoall: bad launch descriptor");
  if (l->transport == FCO_TRANSPORT_LOCAL && l->num_local != l->nranks)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "gemm_alltoall: the local transport must launch every virtual rank (%d of %d)",
                l->num_local, l->nranks);
  const int impl = l->r[0].op->impl;
  switch (impl) {
    case 0: return ga::run_baseline(l, err);
    case 1: return ga::launch_tiles(l, err);
    case 2: return ga::run_chunks(l, err);
    default:
      return fail(err, FCO_ERR_INVALID_ARGUMENT, "fco_gemm_alltoall: impl %d does not exist",
                  impl);
  }
}
