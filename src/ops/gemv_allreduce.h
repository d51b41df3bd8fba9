/*
 * gemv_allreduce.h — the argument record of fco_gemv_allreduce (stored in fco_op_t.u.raw) and
 * the workspace layout every backend shares (src/ops/gemv_allreduce.c computes the need, the
 * CUDA kernels and the CPU backend address it the same way). Plain C, included by .c and .cu.
 *
 * Output tiles: the N output columns are cut into T = ceil(N / 16) tiles of 16 columns; a
 * partial tile is [M][16] fp32 (64·M bytes), a reduced tile is [M][16] of the dtype.
 *
 * Workspace per rank (two halves alternating with the epoch parity; half h starts at
 * h · (workspace bytes / 2, rounded down to 256), whatever the call's size, so consecutive
 * calls of different shapes or ops never share bytes):
 *   impl 1 one-shot:   2 · P · S                 S  = roundup(T · 16 · M · 4, 256)
 *   impl 2 two-phase:  2 · (P · S + Sg)          Sg = roundup(T · 16 · M · esize, 256)
 *   (+ the split area in each half for the grouped tiles, fco_gemv_ar_split_bytes)
 *   impl 0 local:      roundup(M · N · esize, 256)   (fco_cuda_allreduce_copy's need)
 *   impl 0 nccl:       0
 *   cpu (every impl):  2 · P · roundup(M · N · 4, 256)
 * A half holds P slots of S bytes (slot p: rank p's fp32 partial tiles, [T][M][16]; the grouped
 * tiles' in the dtype, the first half, unless FCO_GEMV_GROUP_FP32=1) and, for
 * impl 2, after them the gather area of Sg bytes (reduced tiles in the dtype, [T][M][16]).
 *
 * LL one-shot (impl 1 with FCO_GEMV_AR_LL=1 where fco_gemv_ar_ll_applies): the partials travel
 * through the LL area past the data workspace (src/core/internal.h: LL area), not the halves
 * above. LL half (e & 1) holds P slots of SL = roundup(T · 16 · M · 8, 256) bytes: slot p =
 * rank p's partial tiles as LL words, [T][M][16] × {fp32 bits, flag}. The data workspace the
 * call asks for is 2 · P · SL (≥ impl 1's 2 · P · S), which makes the LL area ≥ 2 · P · SL as
 * long as that is ≤ FCO_WS_LL_MAX_BYTES (else the call runs the plain one-shot).
 */
#ifndef FCO_OPS_GEMV_ALLREDUCE_H_
#define FCO_OPS_GEMV_ALLREDUCE_H_

#include <stddef.h>

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FCO_GEMV_TILE_N 16 /* output columns per tile */
/* N < this on every transport (the op layer's check): the kernels' int tile columns, up to 128
 * past N, never wrap. */
#define FCO_GEMV_MAX_N (((size_t)1 << 31) - ((size_t)1 << 16))

typedef struct {
  const void* x;     /* [M, K] row-major, this rank's slice of the activations            */
  const void* w;     /* [N, K] row-major, this rank's slice of the weight (torch layout)  */
  const void* bias;  /* [N] or NULL; added once                                           */
  void* y;           /* [M, N] row-major, the sum over ranks (+ bias), on every rank      */
  size_t M, N, K;    /* K: this rank's slice; may differ across ranks                     */
  fco_dtype_t dtype;
  int check_args;    /* FCO_CHECK_ARGS=1: kernels compare (M, N, dtype, bias, impl) across ranks */
  int ll;            /* impl 1 via the LL area (FCO_GEMV_AR_LL=1, fco_gemv_ar_ll_applies) */
  int pdl;           /* fused impls: programmatic dependent launch (FCO_GEMV_PDL, on unless 0) */
  size_t pdl_prefetch; /* with pdl: bytes of W per block prefetched into L2 before the wait;
                        * FCO_GEMV_PDL_PREFETCH_AUTO: the launcher's choice by kernel */
  /* Tuning knobs of the GPU kernels, read once per call by the op layer (which refuses values
   * the launcher has no kernel for); their rules are in src/cuda/gemv_allreduce.cu. */
  int pipe;      /* FCO_GEMV_PIPE: 1 on, 0 off, -1 (unset) automatic                        */
  int wide;      /* FCO_GEMV_WIDE: 1 (unset) where they apply, 0 off                         */
  int group;     /* FCO_GEMV_GROUP: -1 (unset) automatic, 0 one-tile kernels, 2 or 4          */
  int group_mma; /* FCO_GEMV_GROUP_MMA=1: the mma.sync grouped tile even on the vector path   */
  int group_tma; /* FCO_GEMV_GROUP_TMA: -1 (unset) automatic (the TMA tile at M 9..64); 8 (or 1)
                  * / 4: groups of 8 / 4 on the TMA tile, at M 1..8 too; 0 off */
  int split;     /* FCO_GEMV_SPLIT: -1 (unset) automatic, 1 off, 2..FCO_GEMV_SPLIT_MAX        */
  int split_pair; /* FCO_GEMV_SPLIT_PAIR: 1 (unset) the TMA tile's split groups as clusters; 0 off */
  int tma_stages; /* FCO_GEMV_TMA_STAGES: TMA tile's ring stages in use, 2..4 (0 = unset: all:
                   * 4 in groups of 8, 6 in groups of 4) */
  int rounds;    /* FCO_GEMV_ROUNDS: -1 (unset) rounds where a block has several groups anyway; 1
                  * off; 2..FCO_GEMV_ROUNDS_MAX: the TMA tile's one-shot takes that many groups a
                  * block as rounds of one ring (wherever the TMA tile runs), with fewer owners */
  int pair_fin;  /* FCO_GEMV_PAIR_FIN: 1 (unset) a cluster pair's owner and helper finalise half
                  * of their group each (the TMA tile's one-shot, unless FCO_GEMV_ROUNDS=1); 0 off */
  int ll_fp32;   /* FCO_GEMV_LL_FP32=1: LL partials as fp32 words for bf16 / f16              */
  int group_fp32; /* FCO_GEMV_GROUP_FP32=1: grouped tiles push fp32 partials (else the dtype's) */
} fco_gemv_ar_args_t;

/* FCO_GEMV_PDL_PREFETCH: bytes per block, at most _MAX (the launcher also keeps the whole grid's
 * prefetch within a budget well below L2). Unset (_AUTO): the one-tile kernels _DEFAULT, the TMA
 * tile its ring's first two stages of W (16 KiB a stage in groups of 4, 32 KiB in groups of 8;
 * session 32, run 2026-12-03_nvidia-h200_b81e345-pfsweep: 64 KiB in groups of 8 took 0.18–0.39
 * µs off the N 8192 shapes against 32 KiB, 32 KiB in groups of 4 was the best at N 4096; more
 * delays the rank view: 128 KiB lost 0.3–1.3 µs at six of eight rows, 256 KiB 1.4–4.1 at all). */
#define FCO_GEMV_PDL_PREFETCH_DEFAULT ((size_t)32 << 10)
#define FCO_GEMV_PDL_PREFETCH_MAX ((size_t)256 << 10)
#define FCO_GEMV_PDL_PREFETCH_AUTO ((size_t)-1)

/* shape[] of the op record: what every rank must agree on (K may differ). */
enum { FCO_GEMV_SHAPE_M = 0, FCO_GEMV_SHAPE_N, FCO_GEMV_SHAPE_DTYPE, FCO_GEMV_SHAPE_BIAS };

static inline size_t fco_gemv_ar_tiles(size_t N) {
  return (N + FCO_GEMV_TILE_N - 1) / FCO_GEMV_TILE_N;
}
/* S: bytes of one rank's fp32 partial tiles. */
static inline size_t fco_gemv_ar_slot_bytes(size_t M, size_t N) {
  return fco_round_up(fco_gemv_ar_tiles(N) * FCO_GEMV_TILE_N * M * 4, 256);
}
/* Sg: bytes of the reduced tiles in the dtype (impl 2's gather area). */
static inline size_t fco_gemv_ar_gather_bytes(size_t M, size_t N, size_t esize) {
  return fco_round_up(fco_gemv_ar_tiles(N) * FCO_GEMV_TILE_N * M * esize, 256);
}
/* Split groups (the grouped tiles of impls 1 and 2 on GPUs, bf16 / f16, M 33..64;
 * src/cuda/gemv_allreduce.cu has the rule): up to FCO_GEMV_SPLIT_MAX K slices a group, the
 * slices past the first as fp32 [T'][M][16] (T' = T rounded up to groups of 8, the largest
 * group) in a split area after the P slots (impl 2: after its gather area,
 * fco_gemv_ar_split_off). Reserved only where a split can apply: the groups (of 8, the default
 * since session 23, or of 4 with FCO_GEMV_GROUP_TMA=0) fill at most half of the co-resident
 * blocks, which on GPUs of up to 160 SMs (one grouped block each) means N ≤
 * FCO_GEMV_SPLIT_MAX_N (groups of 8; of 4: 5120). Not at M ≤ 32 (the TMA tile there since
 * session 30): a split runs only as clusters, which need no area (plan_split). */
#define FCO_GEMV_SPLIT_MAX 4
/* FCO_GEMV_ROUNDS: the most groups a block takes as rounds of one TMA ring (gemv_allreduce.cu) */
#define FCO_GEMV_ROUNDS_MAX 8
#define FCO_GEMV_SPLIT_MAX_N 10240
static inline size_t fco_gemv_ar_split_bytes(int impl, size_t M, size_t N, size_t esize) {
  if ((impl != 1 && impl != 2) || esize != 2 || M <= 32 || M > 64 || N > FCO_GEMV_SPLIT_MAX_N)
    return 0;
  return (FCO_GEMV_SPLIT_MAX - 1) *
         fco_round_up((fco_gemv_ar_tiles(N) + 7) / 8 * 8 * FCO_GEMV_TILE_N * M * 4, 256);
}
/* Offset of the split area in a half: past the P slots (and impl 2's gather area). */
static inline size_t fco_gemv_ar_split_off(int impl, int P, size_t M, size_t N, size_t esize) {
  size_t h = (size_t)P * fco_gemv_ar_slot_bytes(M, N);
  if (impl == 2) h += fco_gemv_ar_gather_bytes(M, N, esize);
  return h;
}
/* Bytes of one epoch half for the fused impls. */
static inline size_t fco_gemv_ar_half_bytes(int impl, int P, size_t M, size_t N, size_t esize) {
  return fco_gemv_ar_split_off(impl, P, M, N, esize) + fco_gemv_ar_split_bytes(impl, M, N, esize);
}

/* SL: bytes of one rank's partial tiles as LL words (8 bytes per fp32). */
static inline size_t fco_gemv_ar_ll_slot_bytes(size_t M, size_t N) {
  return fco_round_up(fco_gemv_ar_tiles(N) * FCO_GEMV_TILE_N * M * 8, 256);
}
/* Smallest M at which impls 1 and 2 (bf16 / f16, GPU transports) run the TMA tile by default
 * (FCO_GEMV_GROUP_TMA unset, FCO_GEMV_GROUP unset; why 9: src/cuda/gemv_allreduce.cu, "The TMA
 * tile ... from M = FCO_GEMV_TMA_MIN_M"; not where the LL one-shot runs). */
#define FCO_GEMV_TMA_MIN_M 9
/* Does the plain path of impl 1 / 2 (bf16 / f16) run the TMA tile at M below 33, by the knobs
 * (fco_gemv_ar_args_t's group_tma, group)? Forced by FCO_GEMV_GROUP_TMA at any M; by default
 * from FCO_GEMV_TMA_MIN_M unless FCO_GEMV_GROUP is set. The launcher's rule; the op layer's LL
 * choice on local follows it (use_ll, src/ops/gemv_allreduce.c). Shape and knobs only: every
 * rank decides alike. */
static inline int fco_gemv_ar_tma_tile(int group_tma, int group, size_t M) {
  return group_tma > 0 || (group_tma < 0 && group < 0 && M >= FCO_GEMV_TMA_MIN_M);
}
/* Largest M of the LL one-shot (the kernels with one or two m-tiles). */
#define FCO_GEMV_AR_LL_MAX_M 16
/* Does the LL one-shot apply? GPU transports, impl 1, P > 1, M ≤ 16, both LL halves ≤ the
 * largest LL area. A function of the call's shape only: every rank decides alike. */
static inline int fco_gemv_ar_ll_applies(fco_transport_t t, int impl, int P, size_t M, size_t N) {
  return t != FCO_TRANSPORT_CPU && impl == 1 && P > 1 && M <= FCO_GEMV_AR_LL_MAX_M &&
         2 * (size_t)P * fco_gemv_ar_ll_slot_bytes(M, N) <= FCO_WS_LL_MAX_BYTES;
}

#ifdef __cplusplus
}
#endif
#endif /* FCO_OPS_GEMV_ALLREDUCE_H_ */
