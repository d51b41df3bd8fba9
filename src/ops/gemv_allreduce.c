/*
 * gemv_allreduce.c — fco_gemv_allreduce: argument checks, impl choice (AUTO), workspace need,
 * submit. Kernels: src/cuda/gemv_allreduce.cu (+ gemv_tile.cuh); CPU reference:
 * src/cpu/gemv_allreduce.c. Layout of the workspace: src/ops/gemv_allreduce.h.
 *
 * Workspace (data bytes per rank), T = ceil(N/16), S = roundup(T·16·M·4, 256),
 * Sg = roundup(T·16·M·esize, 256):
 *   impl 1 (one-shot):   2 · P · S         fp32 partial tiles, a slot per source rank, 2 halves
 *   impl 1 LL:           2 · P · SL        SL = roundup(T·16·M·8, 256): sizes the LL area
 *                                          past the workspace, where the partials travel
 *   impl 2 (two-phase):  2 · (P · S + Sg)  + the gather area of reduced tiles
 *   impl 3 (cuBLAS + fco one-shot all-reduce), P > 1: 2 · P · roundup(M·N·esize, 256)
 *   impl 0 local:        roundup(M·N·esize, 256)   (the copy allreduce)
 *   impl 0 nccl:         0
 *   cpu, every impl:     2 · P · roundup(M·N·4, 256)
 *
 * LL one-shot, the default (FCO_GEMV_AR_LL=0 turns it off, =1 forces it wherever it applies;
 * unset: where it applies and a rank pushes ≤ 2 MiB of LL words, not on local above P = 4 nor
 * on local at M 9..16 in bf16 / f16 unless P = 2 and N ≤ 4096 (the TMA tile there), see
 * use_ll; read at every call, set it alike on every rank: a mismatch times out, or
 * FCO_CHECK_ARGS=1 reports it):
 * impl 1 (also when AUTO picks it) sends its partials as LL words {fp32, flag} through the LL
 * area (src/core/internal.h) where fco_gemv_ar_ll_applies (GPU transports, P > 1, M ≤ 16,
 * ≤ 16 MiB of LL words), else the plain one-shot runs. Measured on 2×H200 (run 6583ba3, CUDA graphs,
 * bf16, µs plain / LL, impl 0 in brackets): 8192×8192 M = 1/4/16 24.82 / 22.17, 25.49 / 22.39,
 * 26.27 / 23.35 (30.58, 31.65, 33.25: LL 1.38–1.42× impl 0); 4096×14336 23.29 / 20.81,
 * 23.28 / 20.97, 25.29 / 22.13; 8192×28672 63.87 / 61.07, 63.69 / 61.21, 64.81 / 63.66;
 * 16384×16384 (AUTO took impl 3 there then) 73.02 / 69.64, 72.85 / 69.42, 74.06 / 72.59. LL was
 * faster at every shape it applies to.
 *
 * PDL, on by default since run 63585a1 (FCO_GEMV_PDL=0 turns it off; read at every call like
 * FCO_GEMV_AR_LL; ranks need not agree): the fused kernels (impls 1, 2, also when AUTO picks
 * them) are launched with programmatic stream serialization and first prefetch
 * FCO_GEMV_PDL_PREFETCH bytes (unset: 32 KiB for the one-tile kernels, the first two ring
 * stages for the TMA tile, see gemv_allreduce.h; 0 = none, at most 256 KiB) of their W into L2
 * before waiting for the previous kernel of the stream (src/cuda/gemv_allreduce.cu: "PDL", why
 * it is safe). The cpu transport and impls 0, 3 ignore it. Measured on 2×H200 (run 63585a1,
 * back-to-back calls in CUDA graphs, LL one-shot µs without / with): 8192×8192 M = 1, 4, 16
 * 22.16 / 20.96, 22.76 / 20.96, 23.31 / 22.17; 4096×14336 20.99 / 20.02, 21.01 / 20.92,
 * 23.03 / 22.34; 8192×28672 61.24 / 59.25, 61.26 / 60.00, 63.64 / 62.80.
 *
 * shape[] = {M, N, dtype, bias present}: compared across ranks by the local (same group) and
 * cpu (shared memory) transports at every call; on nccl, FCO_CHECK_ARGS=1 makes the fused
 * kernels compare them on the device (src/cuda/gemv_allreduce.cu: "argument check").
 */
#include <string.h>

#include "gemv_allreduce.h"

_Static_assert(sizeof(fco_gemv_ar_args_t) <= FCO_OP_ARGS_BYTES, "args do not fit the op record");

/* AUTO, from fco-bench gemv_allreduce on 2×H200 with CUDA graphs, every impl side by side in
 * one run (bench/results/2026-11-30_nvidia-h200-x2_6a09520, bench-gemv_allreduce-nccl-graph.txt,
 * after the fused tile moved to 4-warp blocks at 4 per SM; the f32 and M = 64 rows from
 * ..._ed0108a38b78):
 *  - cpu transport: 1 (every impl is the same reference there);
 *  - P == 1: 0 (nothing to reduce: cuBLAS alone);
 *  - bf16/f16 with M ≤ FCO_GEMV_AR_AUTO_MAX_M (16) and N ≤ FCO_GEMV_AR_FUSED_MAX_N (16384):
 *    fused. There every block of the persistent grid (≤ 4 per SM: 528 on H200) has a single
 *    16-column tile, and the fused kernel beat cuBLAS + fco's one-shot all-reduce (impl 3) at
 *    all 9 such shapes: 8192×8192 M = 1/4/16: 25.2/25.4/26.7 vs 25.8/25.7/26.8 µs;
 *    8192×28672: 64.4/64.7/65.1 vs 65.9/66.0/67.4; 4096×14336: 23.3/23.3/25.5 vs
 *    25.6/25.6/26.3 (impl 0: 30.5–73.9). With two tiles per block (N = 16384) impl 3 was
 *    faster: 72.2/72.8/74.0 vs 73.8/73.1/75.1 — until the LL words and PDL: run a70f468
 *    (2×H200, graphs) gave the fused LL one-shot 68.86/69.02/72.57 µs at 16384×16384 M =
 *    1/4/16 against impl 3's 71.55/71.64/72.81, so N ≤ 16384 (FCO_GEMV_AR_FUSED_MAX_N) is fused
 *    since; at M = 64 impl 3 wins, by 1.15–1.7× over the grouped wgmma tiles of run c616e61
 *    (src/cuda/gemv_allreduce.cu, launch_grouped).
 *    One-shot (1) while the bytes each rank pushes, (P−1)·M·N·4, stay ≤
 *    FCO_GEMV_AR_ONESHOT_MAX (4 MiB), two-phase (2) above;
 *  - otherwise unfused: 3 (cuBLAS + fco's one-shot all-reduce) where fco_allreduce's AUTO
 *    would take its one-shot for y's bytes, else 0. impl 3 vs impl 0: 1.07–1.31× for bf16 at
 *    every listed shape, 1.03–1.21× for f32 (whose CUDA-core fused tile ran 0.03–0.71× of
 *    impl 0: never fused).
 *  - local transport (P virtual ranks sharing one GPU's HBM and SMs): fused only to N ≤ 8192
 *    (FCO_GEMV_AR_FUSED_MAX_N, when set, for both), and unfused is impl 0 — its all-reduce is
 *    one copy pass on the same GPU, where fco's one-shot kernel only adds launches and flags.
 *    From runs 2026-12-01_nvidia-h200_8b9715b-local (P = 2) and 7a8c689-local8 (P = 4, 8), bf16,
 *    graphs, µs: 16384² M = 1/4/16 impl 0 132.2/133.6/133.9 vs AUTO's fused 131.6/132.1/144.9
 *    at P = 2, 141.1/142.6/144.5 vs 139.7/142.9/173.2 at P = 4, 159.3/161.1/166.2 vs
 *    174.7/173.3/191.6 at P = 8; at M = 64 impl 0 beat impl 3 at every shape and P (P = 8:
 *    82.3 vs 100.1 at 8192², 185.6 vs 232.7 at 16384²). At N ≤ 8192 the fused kernels stay ahead
 *    (1.07–1.76× at M ≤ 16) except 8192×28672 M = 16 (0.84–0.98×: K decides there, and K_r is
 *    a rank's own, not in shape[]; fco_gemv_ar_agree below revises that choice with Σ K_r,
 *    which the local transport's batch of every rank's call knows). One-shot while all ranks'
 *    pushes, P·(P−1)·M·N·4, stay
 *    ≤ FCO_GEMV_AR_ONESHOT_MAX (they share one HBM), else two-phase: P = 8, 8192² M = 4 / 16
 *    one-shot 53.46 / 71.76 vs two-phase 52.47 / 53.53, 4096×14336 M = 16 51.17 / 44.92;
 *    at M = 1 (1.75 MiB) 51.86 / 52.01. At M 17..64 in bf16 / f16 (M 33..64 since session 27,
 *    M 17..32 since session 30, with the TMA tile there) the same one-shot / two-phase choice on
 *    the grouped tiles, N ≤
 *    8192 as above (fco_gemv_ar_agree keeps impl 0 where a rank is off their vector path):
 *    runs 2026-12-02_nvidia-h200_277baf1-tp (P = 2, 4) and ..._3bf8601-tp8 (P = 8), µs at M
 *    48 / 64, the rule's impl against impl 0 — P = 2 (impl 1) 8192² 41.67 / 42.69 vs 45.34 /
 *    47.02, 8192×28672 118.31 / 119.82 vs 129.53 / 131.37, 4096×14336 35.82 / 36.40 vs
 *    46.77 / 41.31; P = 4 (impl 2) 50.08 / 54.18 vs 56.40 / 58.15, 125.94 / 131.31 vs
 *    132.52 / 140.66, 43.27 / 46.28 vs 62.59 / 52.26 (impl 1 41.56 / 44.71 there: one group a
 *    block); P = 8 (impl 2) 69.38 / 77.17 vs 78.62 / 81.51, 149.43 / 157.01 vs 159.27 /
 *    165.67, 55.09 / 61.32 vs 73.05 / 73.57; 16384² (N > 8192, impl 0) 1.00–1.04× impl 2.
 * Every input of the rule is in shape[], the communicator or an env knob (FCO_GEMV_AR_*,
 * FCO_ALLREDUCE_ONESHOT_MAX, FCO_GEMV_GROUP*: set them alike on every rank), so every rank
 * resolves the same; on nccl an impl that differs across processes is caught only by the
 * fused impls' FCO_CHECK_ARGS exchange, not where a rank resolved impl 0 or 3. */
int fco_gemv_ar_auto_impl(fco_comm_t comm, size_t M, size_t N, fco_dtype_t dtype) {
  if (comm->transport == FCO_TRANSPORT_CPU) return 1;
  if (comm->nranks == 1) return 0;
  const int local = comm->transport == FCO_TRANSPORT_LOCAL;
  long long max_m = dtype == FCO_F32 ? 0 : fco_env_int("FCO_GEMV_AR_AUTO_MAX_M", 16);
  long long max_n = fco_env_int("FCO_GEMV_AR_FUSED_MAX_N", local ? 8192 : 16384);
  long long oneshot_max = fco_env_int("FCO_GEMV_AR_ONESHOT_MAX", 4 << 20);
  long long pushed = (long long)(comm->nranks - 1) * (long long)(M * N * 4);
  if (local) pushed *= comm->nranks; /* every rank's pushes go through the one GPU's HBM */
  const int fused = pushed <= oneshot_max ? 1 : 2;
  if ((long long)M > max_m || (long long)N > max_n) {
    /* local, bf16 / f16, M 17..64, N ≤ max_n: the grouped tiles (above) */
    if (local) return dtype != FCO_F32 && M > 16 && (long long)N <= max_n ? fused : 0;
    return fco_allreduce_auto_impl(comm, M * N * fco_dtype_size(dtype)) == 1 ? 3 : 0;
  }
  return fused;
}

static int resolve_impl(fco_comm_t comm, size_t M, size_t N, fco_dtype_t dtype, int impl) {
  return impl != FCO_IMPL_AUTO ? impl : fco_gemv_ar_auto_impl(comm, M, N, dtype);
}

/* The LL one-shot runs for this call: it applies and FCO_GEMV_AR_LL is 1, or unset and each
 * rank's LL words to its peers, (P − 1)·SL, stay ≤ FCO_GEMV_AR_LL_AUTO_PUSH. Why the bound (run
 * 39ee289, 4×H200, the first at P = 4; µs plain one-shot / LL): at P = 4 the LL words (twice the
 * bytes) cost more than the fence they save once a rank pushes ~3 MiB of them — 8192×8192
 * M = 16 21.60 / 23.99 (3 MiB), 8192×28672 M = 16 39.48 / 41.72 (3 MiB), 16384² M = 16 46.27 /
 * 46.51 (6 MiB) — while LL stays ahead at ≤ 1.5 MiB: 8192² M = 1, 4 17.55 / 15.22, 17.56 /
 * 16.31, 4096×14336 M = 16 19.97 / 18.66, 16384² M = 4 41.73 / 39.54; at P = 2 every listed
 * shape is ≤ 2 MiB, where LL was faster at all of them (run 6583ba3). Shape and P only: every
 * rank decides alike. The bound counts fp32-sized words (fco_gemv_ar_ll_slot_bytes, also the LL
 * area's size), as in the runs that set it; since session 12 bf16 / f16 partials travel two a
 * word, half those bytes, so the bound is conservative there by 2× — left as measured until a
 * P = 4 run times half-width words against the plain one-shot.
 * On the local transport with P > 4 virtual ranks, not by default: the ranks' blocks poll each
 * other's LL words on one GPU, taking issue slots from the GEMV (run 7a8c689-local8, P = 8, µs
 * plain one-shot / LL + PDL: 8192² M = 1 51.86 / 64.06, 4096×14336 M = 1 38.81 / 43.36; at P = 4
 * LL + PDL was still ahead: 39.80 / 40.47 at 8192² M = 1). */
#define FCO_GEMV_AR_LL_AUTO_PUSH ((size_t)2 << 20)
#define FCO_GEMV_AR_LOCAL_LL_MAX_N 4096
/* The TMA tile is the plain one-shot's kernel at M 9..16 for this call, FCO_GEMV_GROUP unset
 * (fco_gemv_ar_tma_tile, the launcher's rule; bf16 / f16; off the tiles' vector path it runs
 * the mma.sync grouped tile). group_tma, group: the knobs as fco_gemv_ar_args_t holds them. */
static int tma_tile_default(size_t M, fco_dtype_t dtype, int group_tma, int group) {
  return dtype != FCO_F32 && M >= FCO_GEMV_TMA_MIN_M && group < 0 &&
         fco_gemv_ar_tma_tile(group_tma, group, M);
}
static int use_ll(fco_comm_t comm, size_t M, size_t N, fco_dtype_t dtype, int impl) {
  long long knob = fco_env_int("FCO_GEMV_AR_LL", -1);
  if (knob == 0 || !fco_gemv_ar_ll_applies(comm->transport, impl, comm->nranks, M, N)) return 0;
  if (knob > 0) return 1;
  if (comm->transport == FCO_TRANSPORT_LOCAL && comm->nranks > 4) return 0;
  /* On local at M 9..16 (the TMA tile's M) the tile's plain pushes, except at P = 2 with N ≤
   * FCO_GEMV_AR_LOCAL_LL_MAX_N: run 2026-12-03_nvidia-h200_abc7a89-localtile (bf16, graphs,
   * M 9 / 12 / 16, µs LL / tile): P = 2 8192² 38.37 / 37.17, 39.97 / 38.32, 39.93 / 37.54,
   * 8192×28672 118.15 / 116.38, 119.49 / 117.04, 123.81 / 116.54, but at N ≤ 4096 LL ahead
   * (4096×4096 12.62 / 14.11, 12.89 / 14.13, 13.30 / 14.27; 2048×8192 12.77 / 15.14 ..
   * 14.05 / 15.16; 4096×14336 32.24 / 33.83 .. 33.69 / 33.95) except 4096×28672 at M 12 / 16
   * (62.31 / 61.24, 65.06 / 60.93); P = 4 the tile at 19 of 21 rows (8192×28672 M 16 139.36
   * / 120.13, 4096×14336 40.41 / 35.04; LL ahead only at 2048×8192 M 9 / 12, 13.80 / 14.39,
   * 14.25 / 14.30). On nccl LL stays (two GPUs: unmeasured against the tile). */
  if (comm->transport == FCO_TRANSPORT_LOCAL &&
      tma_tile_default(M, dtype, (int)fco_env_int("FCO_GEMV_GROUP_TMA", -1),
                       (int)fco_env_int("FCO_GEMV_GROUP", -1)) &&
      !(comm->nranks == 2 && N <= FCO_GEMV_AR_LOCAL_LL_MAX_N))
    return 0;
  return (size_t)(comm->nranks - 1) * fco_gemv_ar_ll_slot_bytes(M, N) <= FCO_GEMV_AR_LL_AUTO_PUSH;
}

/* The GPU kernels' tuning knobs (fco_gemv_ar_args_t), read once per call; values no kernel
 * exists for are refused here, on every transport, before anything is launched or written. */
static fco_result_t read_knobs(fco_comm_t comm, fco_gemv_ar_args_t* a, const char* fn) {
  long long pipe = fco_env_int("FCO_GEMV_PIPE", -1);
  long long group = fco_env_int("FCO_GEMV_GROUP", -1);
  long long split = fco_env_int("FCO_GEMV_SPLIT", -1);
  long long stages = fco_env_int("FCO_GEMV_TMA_STAGES", 0);
  long long tma = fco_env_int("FCO_GEMV_GROUP_TMA", -1);
  long long rounds = fco_env_int("FCO_GEMV_ROUNDS", -1);
  /* -1 (as unset) is automatic; other negative values are refused like any other stray */
  if (pipe < -1 || pipe > 1)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: FCO_GEMV_PIPE=%lld is not 0 or 1 (unset or -1: automatic)", fn, pipe);
  if (group < -1 || (group > 0 && group != 2 && group != 4))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: FCO_GEMV_GROUP=%lld is not 0, 2 or 4 (unset or -1: automatic)", fn,
                         group);
  if (tma < -1 || (tma > 1 && tma != 4 && tma != 8))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: FCO_GEMV_GROUP_TMA=%lld is not 0, 1, 4 or 8 (unset or -1: automatic)",
                         fn, tma);
  if (split == 0 || split < -1 || split > FCO_GEMV_SPLIT_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: FCO_GEMV_SPLIT=%lld is not 1..%d (unset or -1: automatic)", fn, split,
                         FCO_GEMV_SPLIT_MAX);
  if (stages != 0 && (stages < 2 || stages > 4))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: FCO_GEMV_TMA_STAGES=%lld is not 2..4 (unset or 0: all, 4 or 6)", fn,
                         stages);
  if (rounds != -1 && (rounds < 1 || rounds > FCO_GEMV_ROUNDS_MAX))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: FCO_GEMV_ROUNDS=%lld is not 1..%d (unset or -1: automatic)", fn,
                         rounds, FCO_GEMV_ROUNDS_MAX);
  a->pipe = pipe < 0 ? -1 : pipe > 0;
  a->wide = fco_env_flag("FCO_GEMV_WIDE", 1);
  a->group = group < 0 ? -1 : (int)group;
  a->group_mma = fco_env_flag("FCO_GEMV_GROUP_MMA", 0);
  a->group_tma = tma < 0 ? -1 : tma == 1 ? 8 : (int)tma; /* unset: groups of 8 or 4 (session 26) */
  a->split = split < 0 ? -1 : (int)split;
  a->split_pair = fco_env_flag("FCO_GEMV_SPLIT_PAIR", 1);
  a->tma_stages = (int)stages;
  a->rounds = (int)rounds;
  a->pair_fin = fco_env_flag("FCO_GEMV_PAIR_FIN", 1);
  a->ll_fp32 = fco_env_flag("FCO_GEMV_LL_FP32", 0);
  a->group_fp32 = fco_env_flag("FCO_GEMV_GROUP_FP32", 0);
  return FCO_OK;
}

static size_t workspace(fco_comm_t comm, size_t M, size_t N, fco_dtype_t dtype, int impl) {
  size_t es = fco_dtype_size(dtype);
  int P = comm->nranks;
  if (comm->transport == FCO_TRANSPORT_CPU)
    return 2 * (size_t)P * fco_round_up(M * N * 4, 256);
  /* The LL area is the data workspace's size up to FCO_WS_LL_MAX_BYTES: asking for 2·P·SL of
   * workspace makes it hold both LL halves (use_ll checked that they fit the maximum). */
  if (use_ll(comm, M, N, dtype, impl)) return 2 * (size_t)P * fco_gemv_ar_ll_slot_bytes(M, N);
  if (impl == 1 || impl == 2) return 2 * fco_gemv_ar_half_bytes(impl, P, M, N, es);
  if (impl == 3) return P > 1 ? 2 * (size_t)P * fco_round_up(M * N * es, 256) : 0;
  if (comm->transport == FCO_TRANSPORT_LOCAL && P > 1) return fco_round_up(M * N * es, 256);
  return 0;
}

/* AUTO revised with every rank's call at hand (fco_op_info_t.agree; src/core/group.c calls it
 * for each batch): on the local transport a batch holds all P virtual ranks' calls, so Σ K_r —
 * the K of the unsplit layer, which fco_gemv_ar_auto_impl cannot read (a rank knows only its
 * own K_r) — is known there. The fused kernels lose to impl 0 on local where a tile has two m-tiles
 * (M 9..16) and W is large: 8192×28672 M = 16 (N·ΣK = 2^27.8 elements) AUTO's fused / impl 0
 * 125.28 / 122.85 µs at P = 2, 136.10 / 127.83 at P = 4, 154.65 / 150.23 at P = 8, while at
 * M ≤ 4 of the same shape the fused kernels won (1.07–1.17×) and at 8192×8192 (2^26) and
 * 4096×14336 (2^25.8) M = 16 too (1.07–1.36×, 1.35–1.55×; run 2026-12-01_nvidia-h200_
 * dcbed43-local-auto, bf16, graphs). So on local, a call every rank made with FCO_IMPL_AUTO
 * that resolved to a fused impl at M > 8 runs impl 0 where N·ΣK_r ≥ FCO_GEMV_AR_LOCAL_MAX_W
 * (elements; default 2^27, between the measured points: 2^26 fused, 2^27.8 not; ≤ 0 turns
 * the revision off; with it AUTO ran impl 0 there at 1.00× at P = 2, 4, 8 and every other row's
 * choice stayed, run 2026-12-01_nvidia-h200_88a6af4-local-k) — the one-tile kernels' numbers:
 * since session 31 the revision applies at M 9..16 only where they still run (LL, off the TMA
 * tile's vector path, the tile turned off); on the tile's plain pushes AUTO / impl 0 at
 * 8192×28672 M 16 116.46 / 125.45 µs at P = 2, 120.19 / 130.10 at P = 4, 128.35 / 152.36 at
 * P = 8 (two-phase; run 2026-12-03_nvidia-h200_abc7a89-localtile). At M 17..64 (the grouped
 * tiles, sessions 27 and 30) not by W's size but where a rank is off the tiles' vector path. Other
 * transports, and batches that are not every rank's, keep the per-rank choice (a
 * multi-process nccl world never has every rank's call in one batch, so the rule there must
 * not depend on it). */
#define FCO_GEMV_AR_LOCAL_MAX_W_DEFAULT (1LL << 27)
void fco_gemv_ar_agree(fco_op_t* ops, int n) {
  fco_comm_t c0 = ops[0].comm;
  if (c0->transport != FCO_TRANSPORT_LOCAL || n != c0->nranks || n < 2) return;
  if (ops[0].impl != 1 && ops[0].impl != 2) return;
  fco_gemv_ar_args_t a;
  size_t ksum = 0;
  int vec = 1; /* every rank on the grouped tiles' vector path (x, W, K·esize 16-byte aligned) */
  for (int i = 0; i < n; i++) {
    if (ops[i].kind != FCO_OP_GEMV_ALLREDUCE || !ops[i].impl_auto || ops[i].impl != ops[0].impl)
      return; /* explicit impls stay the caller's; a mismatch is the transport's to report */
    memcpy(&a, ops[i].u.raw, sizeof a);
    ksum += a.K;
    vec = vec && (uintptr_t)a.x % 16 == 0 && (uintptr_t)a.w % 16 == 0 &&
          (a.K * fco_dtype_size(a.dtype)) % 16 == 0;
  }
  memcpy(&a, ops[0].u.raw, sizeof a);
  if (a.M > 16) { /* the grouped tiles (the AUTO rule's): impl 0 where a rank is off their vector
                   * path (the mma.sync grouped tile, not measured against impl 0); W's size is
                   * no reason at M 33..64 (8192×28672 fused 1.06–1.10× impl 0 at P = 2, 4, 8)
                   * nor at M 17..32 (P = 2, M 32: 116.6 / 125.9 µs, run
                   * 2026-12-03_nvidia-h200_776b263-xrows) */
    if (vec) return;
  } else if (vec && !a.ll && tma_tile_default(a.M, a.dtype, a.group_tma, a.group)) {
    return; /* M 9..16 on the TMA tile's plain pushes (use_ll): no W-size revision */
  } else {
    const long long max_w =
        fco_env_int("FCO_GEMV_AR_LOCAL_MAX_W", FCO_GEMV_AR_LOCAL_MAX_W_DEFAULT);
    if (max_w <= 0 || a.M <= 8 || (double)a.N * (double)ksum < (double)max_w) return;
  }
  for (int i = 0; i < n; i++) {
    memcpy(&a, ops[i].u.raw, sizeof a);
    ops[i].impl = 0;
    ops[i].ws_bytes = workspace(ops[i].comm, a.M, a.N, a.dtype, 0);
    a.ll = 0;
    memcpy(ops[i].u.raw, &a, sizeof a);
  }
}

static fco_result_t check_common(fco_comm_t comm, size_t M, size_t N, size_t K, fco_dtype_t dtype,
                                 int impl, const char* fn) {
  if (!comm) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "%s: comm is NULL", fn);
  if (M == 0) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: M is 0", fn);
  if ((long long)M < 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: M %zu is negative", fn, M);
  if (M > FCO_GEMV_ALLREDUCE_MAX_M)
    return fco_set_error(comm, FCO_ERR_UNSUPPORTED,
                         "%s: M = %zu rows is more than a GEMV (M <= %d): use a GEMM (e.g. "
                         "cublasGemmEx) followed by fco_allreduce", fn, M,
                         FCO_GEMV_ALLREDUCE_MAX_M);
  /* N < FCO_GEMV_MAX_N = 2^31 - 2^16: every row index and row length fits an int, and so do the
   * kernels' tile columns, which run up to 128 past N (a group of 8 tiles of 16; until session
   * 56 N up to 2^31 - 1 was taken, and a column test wrapped near 2^31); offsets are 64-bit. */
  if (N == 0) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: N is 0", fn);
  if (N >= FCO_GEMV_MAX_N)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: N %zu is negative or too large (N < 2^31 - 2^16 = %zu)", fn, N,
                         (size_t)FCO_GEMV_MAX_N);
  if (K == 0) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: K is 0", fn);
  if (K >= ((size_t)1 << 31))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: K %zu is negative or absurd (>= 2^31)", fn, K);
  if (fco_dtype_size(dtype) == 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: dtype %d is not FCO_F32, FCO_F16 or FCO_BF16", fn, (int)dtype);
  if (N * K > ((size_t)1 << 40))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: N x K = %zu x %zu elements of W is absurd (> 2^40)", fn, N, K);
  if (impl != FCO_IMPL_AUTO && (impl < 0 || impl >= FCO_GEMV_ALLREDUCE_NUM_IMPLS))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: impl %d is not 0..%d or FCO_IMPL_AUTO (-1)", fn, impl,
                         FCO_GEMV_ALLREDUCE_NUM_IMPLS - 1);
  return FCO_OK;
}

fco_result_t fco_gemv_allreduce_workspace(fco_comm_t comm, size_t M, size_t N, size_t K,
                                          fco_dtype_t dtype, int impl, size_t* bytes) {
  FCO_CHECK(check_common(comm, M, N, K, dtype, impl, "fco_gemv_allreduce_workspace"));
  if (!bytes)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "fco_gemv_allreduce_workspace: bytes is NULL");
  *bytes = workspace(comm, M, N, dtype, resolve_impl(comm, M, N, dtype, impl));
  return FCO_OK;
}

const char* fco_gemv_allreduce_impl_name(fco_comm_t comm, int impl) {
  if (!comm) return NULL;
  if (impl == FCO_IMPL_AUTO) return "auto";
  return fco_op_impl_name(FCO_OP_GEMV_ALLREDUCE, comm->transport, impl);
}

static int overlaps(const void* a, size_t na, const void* b, size_t nb) {
  const char* x = (const char*)a;
  const char* y = (const char*)b;
  return x < y + nb && y < x + na;
}

static fco_result_t gemv_allreduce_call(fco_comm_t comm, const void* x, const void* w,
                                        const void* bias, void* y, size_t M, size_t N, size_t K,
                                        fco_dtype_t dtype, int impl, void* stream) {
  static const char fn[] = "fco_gemv_allreduce";
  FCO_CHECK(check_common(comm, M, N, K, dtype, impl, fn));
  if (comm->async_error != FCO_OK) return fco_async_refuse(comm, fn);
  if (!x) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: x is NULL", fn);
  if (!w) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: w is NULL", fn);
  if (!y) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: y is NULL", fn);
  size_t es = fco_dtype_size(dtype);
  const void* ptrs[4] = {x, w, bias, y};
  static const char* const names[4] = {"x", "w", "bias", "y"};
  for (int i = 0; i < 4; i++)
    if (ptrs[i] && (uintptr_t)ptrs[i] % es)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: %s %p is not aligned to the element size (%zu bytes of %s)", fn,
                           names[i], ptrs[i], es, fco_dtype_name(dtype));
  size_t ybytes = M * N * es;
  if (overlaps(y, ybytes, x, M * K * es))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: y overlaps x", fn);
  if (overlaps(y, ybytes, w, N * K * es))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: y overlaps w", fn);
  if (bias && overlaps(y, ybytes, bias, N * es))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: y overlaps bias", fn);

  fco_op_t op;
  memset(&op, 0, sizeof op);
  op.kind = FCO_OP_GEMV_ALLREDUCE;
  op.comm = comm;
  op.impl = resolve_impl(comm, M, N, dtype, impl);
  op.impl_auto = impl == FCO_IMPL_AUTO;
  op.stream = stream;
  op.ws_bytes = workspace(comm, M, N, dtype, op.impl);
  fco_gemv_ar_args_t a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.w = w;
  a.bias = bias;
  a.y = y;
  a.M = M;
  a.N = N;
  a.K = K;
  a.dtype = dtype;
  FCO_CHECK(read_knobs(comm, &a, fn));
  a.check_args = fco_env_flag("FCO_CHECK_ARGS", 0);
  a.ll = use_ll(comm, M, N, dtype, op.impl);
  a.pdl = fco_env_flag("FCO_GEMV_PDL", 1); /* on unless FCO_GEMV_PDL=0 (run 63585a1) */
  if (a.pdl) {
    long long pf = fco_env_int("FCO_GEMV_PDL_PREFETCH", -1); /* unset: by kernel (the header) */
    a.pdl_prefetch = pf < 0    ? FCO_GEMV_PDL_PREFETCH_AUTO
                     : pf == 0 ? 0
                     : (size_t)pf > FCO_GEMV_PDL_PREFETCH_MAX ? FCO_GEMV_PDL_PREFETCH_MAX
                                                              : (size_t)pf;
  }
  memcpy(op.u.raw, &a, sizeof a);
  op.shape[FCO_GEMV_SHAPE_M] = (int64_t)M;
  op.shape[FCO_GEMV_SHAPE_N] = (int64_t)N;
  op.shape[FCO_GEMV_SHAPE_DTYPE] = (int64_t)dtype;
  op.shape[FCO_GEMV_SHAPE_BIAS] = bias != NULL;
  return fco_op_submit(&op);
}

/* The public entry: a refusal inside a group is noted (fco_op_call_result). */
fco_result_t fco_gemv_allreduce(fco_comm_t comm, const void* x, const void* w, const void* bias,
                                void* y, size_t M, size_t N, size_t K, fco_dtype_t dtype,
                                int impl, void* stream) {
  return fco_op_call_result(comm, gemv_allreduce_call(comm, x, w, bias, y, M, N, K, dtype, impl,
                                                      stream));
}
