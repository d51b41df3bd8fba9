/*
 * gemm_alltoall.h — fco_gemm_alltoall's argument record (stored in fco_op_t.u.raw) and the
 * layout of its symmetric workspace, shared by src/ops, src/cpu and src/cuda (plain C).
 *
 * Workspace of one rank, H = fco_ws_half_bytes(ws_bytes) (the library-wide rule of
 * src/core/internal.h). Offsets depend only on values every rank agrees on (P, out_rows, N,
 * dtype, a_rows, ws_bytes), so a sender computes where its data lands at the receiver.
 *
 *   Fused impls (1, 2) and the cpu backend; call with epoch e uses half h = e & 1:
 *     h·H + 0              hdr      P slots × hdr_bytes: slot r holds rank r's header for this
 *                                   rank (written by r, then signalled). A header says what r
 *                                   sends:  [0] valid: 0 bad counts, else r's protocol
 *                                   (FCO_GA_PROTO_*: 1 impl 1 and Triton, 2 impl 2; every
 *                                   rank refuses a call whose valid headers differ)  [1] E_r
 *                                   [2] blocks per rank (impl 1)  [3] why invalid (FCO_GA_WHY_*)
 *                                   [4 + s]      tot[s]    rows r sends to rank s
 *                                   [4 + P + s]  tiles[s]  impl 1 (C and Triton): flags r
 *                                                          raises at s (blocks when tot[s] > 0,
 *                                                          else 0: one per block);
 *                                                          cpu: recv[s] = r's recv_rows_host[s]
 *                                                          (−1: no hint), checked against
 *                                                          tot_s[r] by every rank
 *                                   [4 + 2P + s] tstart[s] impl 1: running sum of tiles[] in
 *                                                          the order r+1, r+2, ... (so part q
 *                                                          of r raises count_mod(tstart, tstart
 *                                                          + tiles, q, blocks) = 1 flag at s)
 *                                   [4 + 3P]     sym       GPU impls 1, 2: 1 + k when r's own
 *                                                          `out` lies in its symmetric buffer
 *                                                          of slot k (fco_mem_alloc), else 0
 *                                   [5 + 3P]     sym_off   its byte offset in that buffer
 *                                   [6 + 3P]     held      GPU impls 1, 2: bit k set when r's
 *                                                          table maps slot k of every peer
 *                                                          (fco_mem_free is local: a rank
 *                                                          that freed slot k has none)
 *     h·H + staging        staging  out_rows × N elements laid out like `out`: rows from peers
 *                                   land here; the receiver copies them into `out` once they
 *                                   arrived (peers cannot write an ordinary `out`: only the
 *                                   workspace is mapped). Rows a rank sends itself go to `out`
 *                                   directly, and so do a peer's when the receiver's header
 *                                   says its `out` is symmetric (sym ≠ 0) and the sender's
 *                                   says it holds that slot (held, bit k): then the sender
 *                                   stores at its table's slot k of the receiver + sym_off,
 *                                   and the receiver copies nothing from it (fco_ga_direct:
 *                                   per pair, from the two headers, so sender and receiver
 *                                   agree; a sender without the slot stages). Safe without more
 *                                   handshake: a sender stores only after it read the
 *                                   receiver's header of this call, posted when the receiver's
 *                                   call began (its stream's earlier readers of `out` done).
 *                          -- R = peer_bytes: everything above is written by peers --
 *     h·H + R              plan     private: impl 1's segment table, impl 2's placement
 *     0·H + R + plan       y        private, impl 2 only: the chunks' GEMM output, at a fixed
 *                                   place (the host hands it to cuBLAS). Safe in either parity:
 *                                   it avoids both halves' peer bytes [0, R) and [H, H + R),
 *                                   and no peer can start the next call (whose data may fill
 *                                   the other half) before this rank signalled "all pushed",
 *                                   i.e. before the last read of y.
 *   impl 0 (GPU transports): private scratch only, from the workspace start:
 *     0                    y        a_rows × N: the GEMM result
 *     S(a_rows)            send     nccl: y packed destination-major for ncclSend
 *     2·S(a_rows)          totals   nccl without recv_rows_host: ncclAllGather of the totals
 *     2·S(a_rows) + T      recv     nccl: out_rows × N, what ncclRecv receives (laid out like
 *                                   out); copied into out after the send/recv
 *   Why nccl receives into the workspace and not into `out`: the workspace is an NCCL window,
 *   and ncclCommWindowRegister also registers it for NCCL's zero-copy p2p (ncclCommRegister).
 *   Above the LL threshold (SIMPLE protocol, tens of KiB) NCCL picks the registered path per
 *   side: a send from a registered buffer to a receive into an unregistered one (the caller's
 *   out) runs mismatched protocols and both ncclSend/ncclRecv kernels spin forever (the hang of
 *   fco-bench and examples/moe_layer.py at 8 MiB per peer; the tests' few-KiB messages used LL
 *   and passed). Send and receive buffers must be registered alike on both sides: both here.
 *   On nccl the pack kernel also raises, on slot FCO_SIG_SLOTS − 3 of every rank (itself
 *   included), whether its device counts were the ones the sends were sized from
 *   (sig_value(e, 0) yes, (e, 1) no); the copy recv → out is a kernel that waits for every
 *   rank's and copies nothing when one says no (every rank then reports the sender).
 *   On nccl, impl 0 ends with the copy recv → out and a barrier kernel (every rank signals
 *   every peer, waits for all, advances the epoch) after its send/recv: a peer that receives
 *   nothing from this rank could otherwise finish the call at once and start the next fused
 *   call, writing into this rank's workspace while its scratch is still being read; with the
 *   barrier, impl 0 is a call like any other under the workspace rule. On local all ranks run
 *   in one stream: no barrier.
 */
#ifndef FCO_OPS_GEMM_ALLTOALL_H_
#define FCO_OPS_GEMM_ALLTOALL_H_

#include <stdint.h>

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The layout helpers are used by kernels too. */
#ifdef __CUDACC__
#define FCO_GA_HD __host__ __device__
#else
#define FCO_GA_HD
#endif

/* The launch knobs of impls 0..2 and AUTO's (FCO_GA_*, FCO_GEMM_A2A_AUTO: docs/gemm_alltoall.md's
 * knob list), read once a call by the op layer (src/ops/gemm_alltoall.c, read_knobs: values no
 * kernel exists for refused) into the call's record, so that a launch — inside a group at
 * fco_group_end — runs what the call checked and reads no environment. All zero = every default
 * (a record made by hand, as tests/test_gemm_alltoall_checks.c's, needs nothing set). */
typedef struct {
  int64_t tiles_blocks; /* FCO_GA_TILES_BLOCKS: n > 0 lowers impl 1's blocks a rank to n       */
  int64_t chunk_rows;   /* FCO_GA_CHUNK_ROWS: n > 0 sets impl 2's chunk rows                    */
  int64_t push_blocks;  /* FCO_GA_PUSH_BLOCKS: n > 0 sets impl 2's push grid                    */
  int32_t auto_impl;    /* FCO_GEMM_A2A_AUTO + 1 (0: unset, AUTO's rule)                        */
  int32_t tile;         /* FCO_GA_TILE: FCO_GA_TILE_NAMES' index (0: tma, the default)           */
  int32_t epi_async;    /* FCO_GA_EPI=async                                                      */
  int32_t blas_loop;    /* FCO_GA_BLAS=loop (impl 0: a GEMM per expert)                          */
  int32_t staged;       /* FCO_GA_DIRECT=0 (a symmetric out staged too)                          */
  int32_t land_early;   /* FCO_GA_LAND_EARLY=1                                                   */
  int32_t fault_push;   /* FCO_FAULT_GA_PUSH=1, a test hook (not an API): impl 2's first push
                         * fails, after the exchange was queued on its push stream            */
} fco_ga_knobs_t;

/* Host arrays (counts_host, recv_rows_host) are pointers to caller memory, read when the call
 * executes: valid until the call (or fco_group_end, inside a group) returns, as for every op. */
typedef struct {
  const void* a;
  const void* w;
  void* out;
  const int32_t* counts;         /* device [E][P] (host memory on the cpu transport) */
  const int32_t* counts_host;    /* NULL or host [E][P]                               */
  const int32_t* recv_rows_host; /* NULL or host [P]                                  */
  int64_t a_rows, out_rows, k, n;
  int32_t num_experts, w_layout;
  fco_dtype_t dtype;
  fco_ga_knobs_t knobs;
} fco_gemm_a2a_args_t;

/* The names of impl 1's string knobs (fco_env_choice, first = default), read by the op layer
 * (read_knobs) into fco_ga_knobs_t's indices, which the tile picker (src/cuda/
 * gemm_alltoall_fused.cu) takes in this order; FCO_GA_EPI=async beside a FCO_GA_TILE other than
 * tma is refused (the asynchronous epilogue exists for the default tile only). */
#define FCO_GA_TILE_NAMES {"tma", "tma2", "wgmma", "mma", NULL}
#define FCO_GA_EPI_NAMES {"store", "async", NULL}

/* Header fields (int64 each). */
#define FCO_GA_H_VALID 0
#define FCO_GA_H_E 1
#define FCO_GA_H_BLOCKS 2
#define FCO_GA_H_TOT(P, s) (4 + (s))
#define FCO_GA_H_TILES(P, s) (4 + (P) + (s))
#define FCO_GA_H_TSTART(P, s) (4 + 2 * (P) + (s))
#define FCO_GA_H_WHY 3
#define FCO_GA_H_RECV(P, s) (4 + (P) + (s)) /* cpu backend only (impl 1's tiles slot) */
#define FCO_GA_H_SYM(P) (4 + 3 * (P))
#define FCO_GA_H_SYM_OFF(P) (5 + 3 * (P))
#define FCO_GA_H_HELD(P) (6 + 3 * (P))
#define FCO_GA_HDR_WORDS(P) (7 + 3 * (P))

/* Header [0] of a valid header: the sender's protocol. Impl 1 (and fco.triton, which reads
 * [0] != 1 as invalid) raises one flag per block; impl 2 one "all pushed" flag. A receiver of the
 * other protocol would land rows not yet stored (impl 1 waits for 0 flags from an impl 2
 * header) or wait until the timeout, so mixed protocols are refused on every rank (cpu: 1). */
#define FCO_GA_PROTO_TILES 1
#define FCO_GA_PROTO_CHUNKS 2

/* Whether sender r stores its rows for s straight into s's symmetric out (GPU impls 1, 2 and
 * fco.triton): s announced one (hs: sym = 1 + k) and r holds slot k (hr: held, bit k). Both
 * from this call's headers, which every rank reads before its first store or landing, so r
 * (stores there, or stages) and s (lands nothing from r, or r's staged rows) always agree. */
static inline FCO_GA_HD int fco_ga_direct(const int64_t* hr, const int64_t* hs, int P, int r,
                                          int s) {
  const int64_t k = hs[FCO_GA_H_SYM(P)] - 1;
  return r != s && k >= 0 && k < FCO_MAX_SYMMETRIC && ((hr[FCO_GA_H_HELD(P)] >> k) & 1);
}

/* Why a header is invalid ([3]; the kernels' kBadCounts / kCountsChanged are the same numbers). */
#define FCO_GA_WHY_BAD_COUNTS 1     /* a negative count, or Σ counts > a_rows */
#define FCO_GA_WHY_COUNTS_CHANGED 4 /* counts differ from counts_host */

/* Plan area: impl 1 keeps one 32-byte entry per (destination, expert) segment. */
#define FCO_GA_SEG_BYTES 32

static inline FCO_GA_HD size_t fco_ga_round(size_t x) { return (x + 255) / 256 * 256; }
static inline FCO_GA_HD size_t fco_ga_hdr_bytes(int P) { return (8 * (size_t)FCO_GA_HDR_WORDS(P) + 127) / 128 * 128; }
static inline FCO_GA_HD size_t fco_ga_hdr_area(int P) { return fco_ga_round((size_t)P * fco_ga_hdr_bytes(P)); }
static inline FCO_GA_HD size_t fco_ga_rows_bytes(int64_t rows, int64_t n, size_t es) {
  return fco_ga_round((size_t)rows * (size_t)n * es);
}
/* Within a half: staging, then the end of what peers write (R). */
static inline FCO_GA_HD size_t fco_ga_off_staging(int P) { return fco_ga_hdr_area(P); }
static inline FCO_GA_HD size_t fco_ga_peer_bytes(int P, int64_t out_rows, int64_t n, size_t es) {
  return fco_ga_off_staging(P) + fco_ga_rows_bytes(out_rows, n, es);
}
static inline FCO_GA_HD size_t fco_ga_plan_bytes(int P) {
  return fco_ga_round((size_t)FCO_GEMM_ALLTOALL_MAX_EXPERTS * (size_t)P * FCO_GA_SEG_BYTES + 1024);
}
/* impl 2's y, from the workspace start (in half 0, after its peer bytes and plan). */
static inline FCO_GA_HD size_t fco_ga_off_y(int P, int64_t out_rows, int64_t n, size_t es) {
  return fco_ga_peer_bytes(P, out_rows, n, es) + fco_ga_plan_bytes(P);
}
/* impl 0's scratch: y at 0, send after it, then the totals of the AllGather. */
static inline FCO_GA_HD size_t fco_ga_base_off_send(int64_t a_rows, int64_t n, size_t es) {
  return fco_ga_rows_bytes(a_rows, n, es);
}
static inline FCO_GA_HD size_t fco_ga_base_off_totals(int64_t a_rows, int64_t n, size_t es) {
  return 2 * fco_ga_rows_bytes(a_rows, n, es);
}
#define FCO_GA_TOTALS_BYTES(P) fco_ga_round((size_t)4 * (size_t)((P) + 1) * (size_t)((P) + 1))
static inline FCO_GA_HD size_t fco_ga_base_off_recv(int P, int64_t a_rows, int64_t n, size_t es) {
  return fco_ga_base_off_totals(a_rows, n, es) + FCO_GA_TOTALS_BYTES(P);
}

/* Fused impls (1, 2; cpu: 1): bytes one half must hold; the workspace needs 2× this (the
 * rounding of fco_ws_half_bytes is covered: a multiple of 256). impl 0: its whole scratch (no
 * halves); nccl also needs the send buffer, the totals and the receive buffer. */
static inline FCO_GA_HD size_t fco_ga_half_need(int impl, int nccl, int P, int64_t a_rows,
                                                int64_t out_rows, int64_t n, size_t es) {
  if (impl == 0 && P == 1) return 0; /* one rank: the GEMMs write out directly, no scratch */
  if (impl == 0)
    return nccl ? fco_ga_base_off_recv(P, a_rows, n, es) + fco_ga_rows_bytes(out_rows, n, es)
                : fco_ga_rows_bytes(a_rows, n, es);
  size_t h = fco_ga_peer_bytes(P, out_rows, n, es) + fco_ga_plan_bytes(P);
  return impl == 2 ? h + fco_ga_rows_bytes(a_rows, n, es) : h;
}

/* Start of this call's half (fused impls, cpu): (e & 1)·H. */
static inline FCO_GA_HD size_t fco_ga_half_off(size_t ws_bytes, uint64_t e) {
  return (size_t)(e & 1) * fco_ws_half_bytes(ws_bytes);
}
/* Pointer to the header slot of `src` in the workspace `ws` (of ws_bytes) for epoch e. */
static inline FCO_GA_HD int64_t* fco_ga_hdr(void* ws, size_t ws_bytes, int P, uint64_t e, int src) {
  return (int64_t*)((char*)ws + fco_ga_half_off(ws_bytes, e) + (size_t)src * fco_ga_hdr_bytes(P));
}

/* Order-independent digest of counts [E][P] (so a block can fold it in parallel): the sum over
 * i of a 64-bit mix of (i, counts[i]), plus E and P. The host digests counts_host, the kernels
 * of impls 0 and 2 digest the device counts: a difference means the device counts are not the
 * ones the cuBLAS GEMMs were sized from (e.g. a graph captured with hints replayed with new
 * counts), reported as FCO_ERR_INVALID_ARGUMENT, nothing written. */
static inline FCO_GA_HD uint64_t fco_ga_mix(uint64_t i, int32_t c) {
  uint64_t x = (i << 32) ^ (uint64_t)(uint32_t)c;
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
static inline uint64_t fco_ga_digest_host(const int32_t* c, int E, int P) {
  uint64_t d = ((uint64_t)(uint32_t)E << 32) | (uint32_t)P;
  for (size_t i = 0; i < (size_t)E * (size_t)P; i++) d += fco_ga_mix(i, c[i]);
  return d;
}

/* impl 0's GEMMs on GPU transports (src/cuda/gemm_alltoall.cu): where every one of a rank's E ≥ 2
 * experts has the same rows m > 0 in counts [E][P] (balanced routing, or a capacity every expert
 * is padded to) and m · n ≤ 2^21 (an expert's GEMM alone fills less than a wave of the GPU), one
 * cublasGemmStridedBatchedEx for all of them — returns m — unless blas_loop (FCO_GA_BLAS=loop,
 * the call's knobs); else 0 (one cublasGemmEx per expert). src/ops/gemm_alltoall.c says what was
 * measured; AUTO reads it at one rank. */
int64_t fco_ga_batched_rows(const int32_t* counts, int E, int P, int64_t n, int blas_loop);

/* AUTO's choice for one rank's call (gemm_alltoall.c: the rule and its measurements), before
 * fco_ga_agree revises a local batch; capturing: the call's stream is being captured. A host
 * function, exported by libfco (not in fco.h) for the tests. */
int fco_ga_auto_impl(fco_comm_t comm, const fco_gemm_a2a_args_t* a, int capturing);

#ifdef __cplusplus
}
#endif
#endif /* FCO_OPS_GEMM_ALLTOALL_H_ */
