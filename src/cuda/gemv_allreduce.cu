/*
 * gemv_allreduce.cu — fco_gemv_allreduce on GPUs: y [M, N] = Σ_r x_r [M, K_r] · W_r [N, K_r]^T
 * (+ bias), M ≤ 64, on every rank. Entry point fco_cuda_gemv_allreduce_run (cuda_ops.h), called
 * by the nccl and local transports; tile math in gemv_tile.cuh, primitives in prims.cuh;
 * workspace layout in src/ops/gemv_allreduce.h.
 *
 * impl 0 — baseline (gemv_allreduce_blas.cu, with impl 3): cuBLAS GEMM (cublasGemmEx, fp32
 *   compute, output in the dtype) into y, then
 *   ncclAllReduce in place (nccl) or fco_cuda_allreduce_copy in place (local). The bias is
 *   added once: rank 0 first fills y with the broadcast bias and runs the GEMM with beta = 1.
 *   cuBLAS handle and workspaces: blas.cuh (a handle per device, made at the first eager call;
 *   a 32 MiB workspace per (device, stream), set after every cublasSetStream, which resets it):
 *   cuBLAS then never allocates, and graph capture works.
 *
 * Workspace (src/ops/gemv_allreduce.h): the call with epoch e uses the half starting at
 *   (e & 1) · ws_bytes/2: P slots of S bytes (rank p's fp32 partial tiles, [T][M][16]; grouped
 *   tiles: in the dtype unless FCO_GEMV_GROUP_FP32=1), then for
 *   impl 2 the gather area (reduced tiles in the dtype, [T][M][16]). Two halves: a fast rank can
 *   start call e+1 while a peer still reads call e, but not call e+2 (every rank hears from every
 *   peer in every call); fixed offsets: a call of another shape cannot overlap the other half.
 *
 * impl 3 — unfused like impl 0, but the all-reduce is fco's one-shot (fco_cuda_allreduce_oneshot,
 *   in place on y, workspace laid out as fco_allreduce's impl 1): for larger M, where cuBLAS's
 *   tensor-core GEMM beats the fused tiles and fco's all-reduce still beats NCCL's.
 *
 * impl 1 — one-shot, one persistent launch. Output columns are cut into T = ceil(N/16) tiles;
 *   tile t belongs to block t mod B (B blocks per rank; its j-th tile is t = b + j·B). Per tile:
 *   the block computes the fp32 partial [M][16] (gemv_tile.cuh), sums its 8 warps, stores the
 *   tile (16-byte stores) into slot `me` of EVERY rank's workspace (its own included, peers
 *   in the order me+1, me+2, ...), and raises sig[me][b] = (e << 32) | (j + 1) on each peer.
 *   After all its tiles, per tile: threads 0..P-1 wait for the peers' flags, then the block
 *   sums the P slots in rank order 0..P-1 (fp32), adds the bias, rounds to the dtype and writes
 *   y. Every rank sums the same fp32 values in the same order: y is bit-identical on all ranks.
 *   Peers' tiles arrive while this block (and every other block) still computes.
 *   P = 1 (since session 15): no slot, no flag, no second pass; each tile's sum goes straight to
 *   y (the same bits: the fp32 sum the slot would have carried). Grouped tiles alike.
 *
 * impl 1 grouped tiles (FCO_GEMV_GROUP; bf16 / f16, M 9..64; run_oneshot_group): the unit of
 *   work is a group of kG consecutive tiles (group q → block q mod B), computed by one block
 *   with x and W through a ring in shared memory, so x is read once per group instead of once
 *   per tile. Default at M 33..64 (session 23), M 9..32 (session 30, not with LL;
 *   FCO_GEMV_TMA_MIN_M):
 *   kG = 8 on the TMA-fed wgmma tile
 *   (gemv_group_tma.cuh, 288 threads: a producer warp + 2 consumer warpgroups;
 *   FCO_GEMV_GROUP_TMA=0 turns it off), kG = 4 on it where those stream W from more blocks
 *   (session 26, launch_grouped); else kG = 2 or 4, 256 threads, a cp.async ring, wgmma
 *   on the vector path (gemv_group_wgmma.cuh; this file is built for sm_90a); off the vector
 *   path (or FCO_GEMV_GROUP_MMA=1) the mma.sync tile (gemv_group_tile.cuh) in the same groups.
 *   The partials go out as in the one-shot (same slots, [T][M][16]), rounded to the dtype
 *   (8 bytes a float4, the slot's first half; FCO_GEMV_GROUP_FP32=1: fp32), one flag per group.
 *   launch_grouped has the rule and the numbers; AUTO still runs impl 3 at M > 16 (its rule
 *   was measured on two GPUs, before the TMA tile).
 *   Split groups (FCO_GEMV_SPLIT; session 14): where the groups fill at most half of the
 *   co-resident blocks (N ≤ ~4200 on H200), a group's K is cut into ks ≤ FCO_GEMV_SPLIT_MAX
 *   slices of whole 64-element slabs on as many blocks: the group's owner (block q, one group
 *   each then) computes slice 0, each helper block (b ≥ B) one other slice into the split area
 *   of the half (src/ops/gemv_allreduce.h) and raises a flag on the otherwise unused row
 *   sig[me][me]; the owner waits for them, adds the slices in slice order and goes on as
 *   above. Local to a rank (nothing else moves), so ranks may split differently. The TMA tile
 *   split in 2 (FCO_GEMV_SPLIT_PAIR, on unless 0; session 23): owner and helper are a cluster
 *   of 2 (blocks 2q, 2q + 1 of the rank), the helper stores its slice into the owner's shared
 *   memory and the cluster barrier publishes it — no split area, no flag, no L2 reads (run
 *   2026-12-02_nvidia-h200_5bdd21a-pair: 2.2–3.7 µs less per call where it applies). Split 3
 *   and 4 likewise since session 25 (clusters of 3, 4: blocks sq .. sq + s − 1, "cluster" in
 *   the plan), their slices handed over in the owner's finished ring (GroupTma::hand_buf);
 *   an automatic split is lowered to the largest whose clusters the device holds (launch_fused;
 *   run 2026-12-02_nvidia-h200_5236acd-rule).
 *
 * impl 2 grouped tiles (M 9..64, bf16 / f16; since session 27, M 9..32 since 30;
 *   run_twophase_group): impl 1's
 *   groups (launch_grouped<..., 2>: the same sizes, K splits, clusters and partial slots) under
 *   the two-phase protocol: group jj of block b is owned by rank (b + jj) mod P; a block
 *   computes the groups owned elsewhere first and pushes their partials to the owner only, then
 *   reduces its own (their rounded results go to every peer's gather area), then copies the
 *   others' into y. Fewer groups than ranks: the grouped one-shot in impl 2's half. The
 *   prologue primes the first group the block computes (twophase_first, from p.rank; the
 *   kernel checks it against the rank view). The split area lies past the gather area
 *   (p.split_off).
 *
 * impl 1 (LL and, since session 13, plain), wide blocks (FCO_GEMV_WIDE, on unless 0): where the
 *   tiles fill at most half of the 4-warp blocks' slots (N = 4096: 256 tiles), 8-warp blocks
 *   (kWideWarps, 2 per SM) so each SM keeps as many W bytes in flight as at N = 8192; B = T
 *   either way. The plain one-shot is what P = 1 (and P > 1 without LL) runs: there too the
 *   GEMV phase then has the block shape of the two-GPU LL kernel.
 *
 * Pipelined tile loop for M 9..16 (FCO_GEMV_PIPE: 1 on, 0 off, unset = on where this rank's K
 *   is ≥ kPipeAutoMinK = 12288 outside wide blocks; read by the op layer at every call;
 *   bf16 / f16, kMT = 2, impls 1 (plain, LL, wide) and 2): gemv::tile_mma's kPipe loop, which issues a
 *   warp's next group of W loads before the mmas of its current group, at 4 chunks per group
 *   instead of 8; blocks as before (4 warps, 4 per SM; wide 8 warps, 2 per SM). Why:
 *   bench/probe/gemv_stream_probe.cu on H200 at M = 16 (bf16, graph-timed µs per launch,
 *   "pipe u4 w4 b4" vs the plain "u8 w4 b4"): 8192×14336 57.78 vs 58.71, 4096×7168 18.06 vs
 *   18.66, 16384×8192 68.27 vs 69.07, 8192×4096 19.65 vs 19.67. At M = 1 it was not faster:
 *   kMT = 1 keeps the plain loop; f32 (tile_f32) is unaffected. The operator-level A/B on
 *   2×H200 (run 41b9bcb, fco-bench AUTO µs at M = 16, PIPE=0 vs 1 side by side) did not follow
 *   the probe everywhere: 8192×28672 (K_r 14336) 63.38 → 62.05, 16384² (K_r 8192) 72.74 →
 *   72.43, but 8192² (K_r 4096) 22.24 → 23.34 and 4096×14336 (K_r 7168) 20.91 → 22.03; hence on
 *   by default only for K_r ≥ 12288 — and, since session 15, never in wide blocks: at P = 1,
 *   4096×14336 M = 16 (K 14336, wide) ran 37.75 µs with it and 35.00 without (narrow blocks
 *   39.51 / 36.86; run 42702c0-probe), where the probe's "pipe u4 w8 b2" was 33.67 against
 *   "u8 w8 b2" 32.05. FCO_GEMV_PIPE=1 still forces it there. A separate instantiation (kPipe),
 *   so FCO_GEMV_PIPE=0 runs exactly the old kernels. It changes only the fp32 summation order
 *   inside a rank's own partial (K cut into
 *   runs of 4 chunks per warp instead of 8); the partials that move have the same layout and
 *   every rank sums the same bytes in rank order, so y stays bit-identical across ranks. B
 *   follows the kernel's occupancy, which is the same with and without it (128 registers, the
 *   same shared memory): ranks may set FCO_GEMV_PIPE differently; it is not in the
 *   FCO_CHECK_ARGS hash (B is, should the occupancy ever differ).
 *
 * impl 1 LL (FCO_GEMV_AR_LL=1 where fco_gemv_ar_ll_applies: P > 1, M ≤ 16): the same schedule,
 *   but each partial goes out as 64-bit LL words {fp32 bits, fco_ll_flag(e)} into the LL area
 *   past the data workspace (src/core/internal.h "LL area"; only LL words are ever stored
 *   there), half (e & 1), slot `me`; no bar.sync + release + flag: the receiving threads poll
 *   the words themselves until they carry this call's flag (run_oneshot_ll). bf16 / f16: two
 *   partials rounded to the dtype a word {2 × 16 bits, flag} (half the bytes; the sum of the P
 *   rounded partials is rounded once more at the end — the precision of cuBLAS + an all-reduce
 *   of y in the dtype, impl 0; the own partial is rounded too, so y stays bit-identical across
 *   ranks); FCO_GEMV_LL_FP32=1 keeps fp32 partials (set it alike on every rank: it is in the
 *   FCO_CHECK_ARGS hash).
 *
 * impl 2 — two-phase: tile (b, j) is owned by rank (b + j) mod P. Per block: (1) compute the
 *   tiles owned by other ranks first and push each partial to its owner only (flag
 *   sig[me][b] on the owner, value (e << 32) | (j' + 1) where j' counts this block's tiles for
 *   that owner); (2) per owned tile: compute it, wait for the P-1 peers' partials, sum in rank
 *   order, add the bias, round, write y and push the rounded tile to every peer's gather area
 *   (flag sig[me][B + b]); (3) per tile owned elsewhere: wait for its gather flag, copy the
 *   tile into y. Each rank pushes (P-1)/P of the fp32 partials plus (P-1)/P of y per peer
 *   instead of all partials to all peers. It needs B ≥ P so that every rank owns a tile (then
 *   every rank hears from every peer in every call, which the epoch halves rely on): with
 *   fewer tiles than ranks it runs the one-shot schedule (the workspace suffices).
 *
 * Argument check (FCO_CHECK_ARGS=1, both fused impls): before any data moves, thread p of
 *   every block writes (e << 32) | h into peer p's slot sig[me][FCO_SIG_SLOTS - 1], where h
 *   hashes (M, N, dtype, bias present, impl, B, T, LL or not, kG, and the partials' format of
 *   the LL and grouped kernels), waits for peer p's value in its own slot and
 *   compares: a different hash records FCO_ERR_INVALID_ARGUMENT (peer p, want = own hash,
 *   seen = theirs) and every block skips the call, so nothing is written anywhere. Costs one
 *   flag round trip. Every rank must set FCO_CHECK_ARGS alike (else the checking rank waits
 *   and times out).
 *
 * PDL (FCO_GEMV_PDL: on unless 0, the default since run 63585a1; read at every call; impls 1
 *   (plain and LL) and 2, every dtype and M, local and nccl): the fused kernel is launched with
 *   cudaLaunchKernelEx and
 *   cudaLaunchAttributeProgrammaticStreamSerialization = 1, as a separate instantiation (kPdl)
 *   so the default kernels are unchanged. It lets this call's grid be scheduled before the
 *   previous kernel of the stream has finished (under stream capture the edge becomes a
 *   programmatic graph edge, CUDA >= 12.3), to hide the launch gap and the previous call's tail
 *   (last pushes, peer poll, reduce, block exit, during which HBM idles). Per block, first:
 *   (1) cp.async.bulk.prefetch.L2 of the first FCO_GEMV_PDL_PREFETCH bytes (unset: 32 KB, the
 *   TMA tile two ring stages; the grid's total at most kPdlL2Budget) of ITS first tile's W
 *   strip, in the order the tile reads it (gemv::prefetch_tile; the TMA grouped tile: TMA
 *   tensor prefetches of its ring's first W boxes from the producer thread,
 *   GroupTma::prefetch_w); (2) griddepcontrol.wait;
 *   (3) griddepcontrol.launch_dependents.
 *   Only then the rank table (epoch, arrive, peer pointers, error), x, bias, y, the workspace,
 *   the LL area and the signals are touched. Why this is safe:
 *   - Before the wait the block reads only kernel parameters and asks L2 for W. A prefetch
 *     loads nothing into registers, shared memory or L1, and L2 is the device's point of
 *     coherence: a line prefetched while the previous kernel still writes W (a kernel that
 *     produces this layer's weights, or the chained test) is updated by that write in L2, so
 *     the loads after the wait see the final bytes. W on the peers is never read.
 *   - griddepcontrol.wait returns once the previous grid has COMPLETED and its memory
 *     operations are performed and visible to this grid (PTX ISA), so everything after it sees
 *     the previous call exactly as with a plain launch: its epoch_end (epoch, arrive), its y,
 *     its LL words and flags. Cross-GPU ordering is unchanged: call e+1 still starts its real
 *     work after call e completed on this GPU, so a peer is still at most one call ahead (the
 *     two-halves argument). A previous op that is not a kernel (a memcpy/memset, an event wait,
 *     a workspace growth, which also synchronises the device) gives a normal full dependency.
 *   - Co-residency. launch_dependents lets the runtime schedule a PDL-launched next grid "as
 *     soon as all other CTAs in the grid issue the same instruction or have completed" (PTX
 *     ISA, griddepcontrol): a CTA issues it only while resident, so when any block of the next
 *     grid is placed, every block of this grid is resident or done. Blocks of the next grid
 *     that sit in griddepcontrol.wait on SMs freed by our exited blocks therefore never keep
 *     one of our blocks from becoming resident, and our blocks spin only on our own blocks and
 *     the peers' (whose grids are resident by the same argument). The same holds for this
 *     grid as the next one: it is placed only after the previous grid's blocks all triggered
 *     or exited, it waits before spinning on anything, and once that grid completes, all B ·
 *     num_local blocks fit (B from the occupancy of an otherwise empty GPU, as before). The
 *     trigger is issued after the wait, so at most two of our grids (one running, one waiting)
 *     share the GPU.
 *   - A following kernel that is not PDL-launched (cuBLAS, NCCL, the all-reduce kernels, a
 *     user's kernel, our kernels with the knob off) waits for this grid's completion as
 *     always: the trigger only affects kernels launched with the attribute, and those must
 *     call griddepcontrol.wait before consuming anything (the attribute's contract).
 *   - Without the attribute (a kernel before ours that never triggers) the wait simply returns
 *     when that kernel completes; impls 0 and 3 (cuBLAS + NCCL / fco's all-reduce) ignore the
 *     knob and are launched as before.
 *   Ranks may set FCO_GEMV_PDL differently (no byte that moves changes; not in the hash).
 *
 * Launch requirements: every rank runs the same sequence of epoch-advancing kernels with the
 *   same M, N, dtype, bias presence and impl, on the same GPU model, so B and the tile plan
 *   agree (they do not depend on K); all num_local·B blocks co-resident (B ≤ occupancy × SMs /
 *   num_local, B ≤ max_blocks(impl) so flags fit FCO_SIG_SLOTS; then B is lowered so every block gets
 *   the same number of tiles, ceil(T / B)); dev->ws_bytes ≥ 2 × half (checked on the device:
 *   FCO_ERR_INTERNAL otherwise). W, x and K·esize 16-byte aligned for the vector path (per
 *   rank; else the scalar path, correct and slow).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>

#include "../ops/gemv_allreduce.h"
#include "cuda_ops.h"
#include "gemv_allreduce_group.cuh"
#include "gemv_allreduce_ll.cuh"
#include "gemv_allreduce_plan.cuh"
#include "gemv_allreduce_sched.cuh"
#include "launch.cuh"
#include "prims.cuh"

namespace fco {
namespace {

/* kImpl 1 = one-shot, 2 = two-phase; kLL: impl 1 through the LL area (kMT ≤ 2 only). Block →
 * (local rank blockIdx.x / B, part b). Threads: kWarpsOf<kMT> · 32 (≥ 4·M for the M ≤ 16 of
 * kMT ≤ 2, ≥ 4·M = 256 otherwise). */
template <typename T, int kMT, int kImpl, bool kLL, bool kPdl, bool kPipe = false,
          int kW = kWarpsOf<kMT>, int kG = 1, bool kWg = false, bool kTma = false>
__global__ void __launch_bounds__(kW * 32, kG > 1 ? 1 : kW == kWarpsOf<kMT> ? kMinBlocksOf<kMT> : 2)
    gemv_allreduce_kernel(const GarParams p, const __grid_constant__ gemv::GroupMaps<kTma> maps) {
  static_assert(!kLL || (kImpl == 1 && kMT <= 2), "LL: one-shot, M <= 16");
  static_assert(kW == kWarpsOf<kMT> || kTma || (kImpl == 1 && kG == 1 && kMT <= 2),
                "wide blocks: the one-tile one-shot (plain or LL), M <= 16; TMA's producer warp");
  static_assert(!kPipe || (kMT == 2 && sizeof(T) == 2), "FCO_GEMV_PIPE: kMT 2, bf16 / f16");
  static_assert(!kWg || kG > 1, "kWg: grouped tiles");
  static_assert(!kTma || kWg, "kTma: the wgmma grouped tile fed by TMA");
  static_assert(kG == 1 || (!kLL && !kPipe && sizeof(T) == 2 && kMT >= 4 &&
                            kW == (kTma ? gemv::GroupTma<kG>::kWarps : gemv::kGroupWarps)),
                "grouped tiles: plain one-shot or two-phase, bf16 / f16, M > 16, 8 warps (+ TMA's "
                "producer)");
  /* Grouped tiles keep x and their partials in dynamic shared memory (gemv_group_tile.cuh). */
  using S = typename std::conditional<(kG > 1), SmemView, Smem<kMT, kW>>::type;
  __shared__ S s;
  extern __shared__ __align__(16) unsigned char dyn_smem[];
  const int B = p.blocks_per_rank, BT = p.blocks_total;
  const int li = blockIdx.x / BT;
  int bi = (int)blockIdx.x - li * BT; /* this block's index in its rank's B owners + helpers */
  if constexpr (kTma)
    if (threadIdx.x == 0) {
      FCO_GTRACE(0);
      FCO_GTRACE_SM();
    }
  if constexpr (kTma) {
    if (p.pair) { /* clusters of split blocks: (owner q, its helpers); see run_split_helper */
      const int cs = p.split, cr = bi % cs, cq = bi / cs; /* cr: the rank in the cluster */
      bi = cr ? B + cq * (cs - 1) + (cr - 1) : cq;
      /* rounds or fin_split (split 2): the hand-off barriers, published by the arrival below */
      if (rounds_path(p) && threadIdx.x == 0) gemv::GroupTma<kG>::init_round_bars(dyn_smem);
      /* phase 1 (gemv_group_tma.cuh): helpers now; the owner now at split 2 (its pair buffer
       * lies past the ring), at split 3, 4 once its ring is done (run_oneshot_group) */
      if (cr || cs == 2) gemv::cluster_arrive_relaxed();
    }
  }
  /* Two-phase groups: the first group an owner block computes (twophase_first), else 0. */
  int jj0 = 0;
  if constexpr (kImpl == 2 && kG > 1)
    if (bi < B) jj0 = twophase_first(p, kG, bi, B, p.rank[li]);
  if constexpr (kPdl) {
    /* PDL (see the header): until griddepcontrol.wait returns, the previous kernel of the
     * stream may still run; touch nothing but the kernel parameters and W, and W only through
     * L2 prefetches (L2 is the device's point of coherence: a prefetched line can never be
     * stale, even if that kernel writes W). Block b's first tile is b. */
    if constexpr (kTma) /* the ring's first W boxes, by the producer (GroupTma::prefetch_w) */
      group_prefetch<kG>(p, &maps.w[li], p.K[li], bi, B, jj0);
    else if (p.prefetch_bytes && bi < B) /* helpers start inside a row */
      gemv::prefetch_tile<T>((const T*)p.w[li], p.N, p.K[li], bi * kG * kTileN, p.vec[li] != 0,
                             p.prefetch_bytes);
    grid_dep_wait();
    grid_dep_launch_dependents();
  }
  /* kTma: the producer starts the block's first TMA stages now, before the rank view. */
  int primed = 0;
  if constexpr (kTma)
    primed = group_prime<kG>(p, &maps.x[li], &maps.w[li], p.K[li], bi, B, jj0, dyn_smem);
  fco_dev_rank_t* dev = p.dev[li];
  load_rank_view(dev, &s.v, FCO_OP_GEMV_ALLREDUCE);
  if constexpr (kTma)
    if (threadIdx.x == 0) FCO_GTRACE(1);
  Ctx c;
  c.x = (const char*)p.x[li];
  c.w = (const char*)p.w[li];
  c.bias = (const char*)p.bias[li];
  c.y = (char*)p.y[li];
  c.K = p.K[li];
  c.vec = p.vec[li] != 0;
  c.b = bi;
  c.B = B;
  c.P = s.v.nranks;
  c.me = s.v.rank;
  c.e = s.v.epoch + 1;
  /* Halves at a fixed offset (half the workspace), not at this call's size: consecutive calls
   * of other shapes or ops then never overlap the half a slow peer may still be reading. */
  c.hoff = (size_t)(c.e & 1) * (size_t)(s.v.ws_bytes / 2 / 256 * 256);
  /* LL: the LL area follows the data workspace; its halves at fixed offsets too (internal.h). */
  c.lloff = fco_ws_ll_offset(s.v.ws_bytes) +
            (size_t)(c.e & 1) * fco_ws_ll_half_bytes(s.v.ws_bytes);
  if constexpr (kTma) {
    c.mx = &maps.x[li];
    c.mw = &maps.w[li];
  }
  /* A table that does not match the launch must not turn into writes past a workspace. */
  const uint64_t need = kLL ? 2 * (uint64_t)c.P * p.ll_slot_bytes : 2 * p.half_bytes;
  const uint64_t have = kLL ? 2 * (uint64_t)fco_ws_ll_half_bytes(s.v.ws_bytes) : s.v.ws_bytes;
  if (c.P < 1 || c.P > FCO_MAX_GPU_RANKS || c.me < 0 || c.me >= c.P || have < need ||
      c.P != p.nranks || c.me != p.rank[li]) {
    if (threadIdx.x == 0)
      record_error(s.v.err, FCO_ERR_INTERNAL, FCO_OP_GEMV_ALLREDUCE, c.me, -1, need, have);
    if constexpr (kTma) gemv::GroupTma<kG>::drain(dyn_smem, primed);
    epoch_end(dev, c.e, BT);
    return;
  }
  const WaitCtx wc{s.v.err, s.v.timeout_ns, FCO_OP_GEMV_ALLREDUCE};
  if constexpr (kTma)
    if (threadIdx.x == 0) FCO_GTRACE(13);
  if constexpr (kG > 1) {
    if (c.b >= B) { /* a split helper: local work only, no argument check — but with
                     * fin_split, where it pushes half of its group to every rank */
      if constexpr (kTma && kImpl == 1)
        if (rounds_path(p)) {
          /* Without fin_split the helper runs its rounds whatever the check says (its owner
           * takes the hand-offs either way: rounds_bail), but it still waits for the peers'
           * hashes: its hand_empty wait sits behind the owner's check, and an mbarrier wait
           * traps after ~2^26 polls (~1 s), so a peer issuing the call a second late killed the
           * context until session 56 instead of waiting up to FCO_TIMEOUT_MS. */
          const bool check = p.check_args && c.P > 1;
          if (!p.fin_split) {
            if (check) (void)check_args(s.v, c, wc, p.arg_hash);
            run_oneshot_rounds<T, kG>(p, c, s.v, dyn_smem, wc, primed);
          } else if (!check || check_args(s.v, c, wc, p.arg_hash)) {
            run_oneshot_rounds<T, kG>(p, c, s.v, dyn_smem, wc, primed);
          } else {
            rounds_bail<kG>(p, c, dyn_smem, primed);
          }
          epoch_end(dev, c.e, BT);
          return;
        }
      run_split_helper<T, kMT, kG, kWg, kTma>(p, c, s.v, dyn_smem, primed);
      epoch_end(dev, c.e, BT);
      return;
    }
  }
  if (!p.check_args || c.P == 1 || check_args(s.v, c, wc, p.arg_hash)) {
    if constexpr (kG > 1 && kImpl == 2)
      run_twophase_group<T, kMT, kG, kWg, kTma>(p, c, s.v, dyn_smem, wc, primed);
    else if constexpr (kG > 1 && kTma) {
      if (rounds_path(p))
        run_oneshot_rounds<T, kG>(p, c, s.v, dyn_smem, wc, primed);
      else
        run_oneshot_group<T, kMT, kG, kWg, kTma>(p, c, s.v, dyn_smem, wc, primed);
    } else if constexpr (kG > 1)
      run_oneshot_group<T, kMT, kG, kWg, kTma>(p, c, s.v, dyn_smem, wc, primed);
    else if constexpr (kLL)
      run_oneshot_ll<T, kMT, kPipe, kW>(p, c, s, wc);
    else if constexpr (kImpl == 1)
      run_oneshot<T, kMT, kPipe, kW>(p, c, s, wc);
    else
      run_twophase<T, kMT, kPipe>(p, c, s, wc);
  } else if constexpr (kTma) { /* the argument check failed */
    if (kImpl == 1 && rounds_path(p)) {
      rounds_bail<kG>(p, c, dyn_smem, primed);
    } else {
      gemv::GroupTma<kG>::drain(dyn_smem, primed);
      if (p.pair) gemv::pair_handoff(p.split); /* the helpers wait for their owner */
    }
  }
  if constexpr (kTma)
    if (threadIdx.x == 0) FCO_GTRACE(9);
  epoch_end(dev, c.e, BT);
}

#ifdef FCO_GEMV_TRACE
/* FCO_GEMV_TRACE: prints what the first min(blocks, kGtraceBlocks) blocks of the kernel before
 * it recorded, one line a block, times in ns from that block's start (a kernel of its own: a
 * printf in the fused kernel makes ptxas serialise its wgmma, C7510). */
__global__ void gtrace_print(int pair, int blocks) {
  if (blocks > gemv::kGtraceBlocks) blocks = gemv::kGtraceBlocks;
  for (int b = 0; b < blocks; ++b) {
    const unsigned long long* t = gemv::g_gtrace[b];
    printf("gtrace block %d sm %d pair %d t0 %llu: view %lld init %lld issue0 %lld data0 %lld "
           "lastmma %lld out %lld handoff %lld finish %lld end %lld entry %lld pentry %lld "
           "ctx %lld path %lld\n",
           b, (int)t[10], pair, t[0], (long long)(t[1] - t[0]), (long long)(t[2] - t[0]),
           (long long)(t[3] - t[0]), (long long)(t[4] - t[0]), (long long)(t[5] - t[0]),
           (long long)(t[6] - t[0]), (long long)(t[7] - t[0]), (long long)(t[8] - t[0]),
           (long long)(t[9] - t[0]), (long long)(t[11] - t[0]), (long long)(t[12] - t[0]),
           (long long)(t[13] - t[0]), (long long)(t[14] - t[0]));
  }
}
#endif


/* ---- host side -------------------------------------------------------------------------- */
/* Grouped tiles: dynamic shared memory for either tile (wgmma or mma.sync). */
template <int kMT, int kG>
constexpr size_t group_dyn_smem() {
  return gemv::group_smem_bytes<kMT, kG>() > gemv::GroupWgmma<kG>::kSmemBytes
             ? gemv::group_smem_bytes<kMT, kG>()
             : gemv::GroupWgmma<kG>::kSmemBytes;
}

template <typename T, int kMT, int kImpl, bool kLL, bool kPdl, bool kPipe = false,
          int kW = kWarpsOf<kMT>, int kG = 1, bool kWg = false, bool kTma = false>
fco_result_t launch_fused(const fco_gpu_launch_t* g, const fco_gemv_ar_args_t* a0, int impl,
                          char* err) {
  constexpr auto kKernel = gemv_allreduce_kernel<T, kMT, kImpl, kLL, kPdl, kPipe, kW, kG, kWg, kTma>;
  /* Two-phase groups need a group a rank (every rank owns some): fewer groups than ranks run
   * the grouped one-shot inside impl 2's half (as the one-tile kernels do with fewer tiles). */
  if constexpr (kImpl == 2 && kG > 1)
    if ((fco_gemv_ar_tiles(a0->N) + kG - 1) / kG < (size_t)g->nranks)
      return launch_fused<T, kMT, 1, kLL, kPdl, kPipe, kW, kG, kWg, kTma>(g, a0, impl, err);
  gemv::GroupMaps<kTma> maps;
  memset(&maps, 0, sizeof maps);
  if constexpr (kG > 1 && !kWg) {
    /* Grouped tiles: the wgmma kernel where every local rank is on the vector path (x, W and
     * K·esize 16-byte aligned) and FCO_GEMV_GROUP_MMA is not set; else this, the mma.sync one.
     * Groups of 8 (launch_grouped: FCO_GEMV_GROUP_TMA unset or 1) run the wgmma kernel fed by TMA
     * (gemv_group_tma.cuh) there instead, where the tensor maps encode; else (logged) the
     * mma.sync one. The tile changes no group, block, flag or byte that moves: ranks may
     * choose differently (kG, which does, is decided from the knobs and the shape alone). */
    bool vec = !a0->group_mma;
    for (int i = 0; i < g->num_local && vec; ++i) {
      fco_gemv_ar_args_t a;
      memcpy(&a, g->r[i].op->u.raw, sizeof a);
      vec = (uintptr_t)a.x % 16 == 0 && (uintptr_t)a.w % 16 == 0 && (a.K * sizeof(T)) % 16 == 0;
    }
    if constexpr (kG == 8 || (kG == 4 && kMT == 8)) /* groups of 4: FCO_GEMV_GROUP_TMA=4 */
      if (vec && (kG == 8 || a0->group_tma == 4))
        return launch_fused<T, kMT, kImpl, kLL, kPdl, kPipe, gemv::GroupTma<kG>::kWarps, kG, true,
                            true>(g, a0, impl, err);
    if constexpr (kG != 8)
      if (vec) return launch_fused<T, kMT, kImpl, kLL, kPdl, kPipe, kW, kG, true>(g, a0, impl, err);
  }
  if constexpr (kTma) {
    for (int i = 0; i < g->num_local; ++i) {
      fco_gemv_ar_args_t a;
      memcpy(&a, g->r[i].op->u.raw, sizeof a);
      const char* why = a.K > (size_t)INT32_MAX - 1024
                            ? "K past TMA's 32-bit coordinates"
                            : gemv::GroupTma<kG>::encode(&maps.x[i], &maps.w[i], a.x, (int)a.M,
                                                         a.w, (int)a.N, (int64_t)a.K);
      if (why) {
        fco_log(g->r[0].op->comm, "fco_gemv_allreduce: %s (local rank %d): the mma.sync grouped "
                "tile instead of TMA", why, i);
        fco_gemv_ar_args_t a1 = *a0;
        a1.group_mma = 1;
        return launch_fused<T, kMT, kImpl, kLL, kPdl, kPipe, gemv::kGroupWarps, kG, false>(
            g, &a1, impl, err);
      }
    }
  }
  int device = 0, sms = 0, cap = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  constexpr int kThreads = kW * 32;
  /* Grouped tiles keep their ring in dynamic shared memory (the kernel opts in per device). */
  const size_t dyn = !(kG > 1) ? 0
                     : kTma    ? gemv::GroupTma<(kG > 1 ? kG : 2)>::kSmemPairBytes
                               : group_dyn_smem<kMT, (kG > 1 ? kG : 2)>();
  if (kG > 1 && (res = opt_in_smem<kKernel>(device, (int)dyn, err)) != FCO_OK) return res;
  res = max_coresident_blocks<kKernel>(err, device, sms, kThreads, &cap, dyn);
  if (res != FCO_OK) return res;
  const int T_ = (int)fco_gemv_ar_tiles(a0->N);
  const int units = (T_ + kG - 1) / kG; /* work units: tiles, or groups of kG tiles */
  if constexpr (kImpl == 1 && kG == 1 && kMT <= 2 && kW == kWarpsOf<kMT>) {
    /* Wide blocks (kWideWarps, see Smem) where the tiles fill at most half the narrow slots and
     * one wide block per tile fits: then B = T either way (ranks need not agree on the knob). */
    if (a0->wide && 2 * T_ <= cap / g->num_local) {
      int cap_wide = 0;
      res = max_coresident_blocks<
          gemv_allreduce_kernel<T, kMT, kImpl, kLL, kPdl, kPipe, kWideWarps>>(
          err, device, sms, kWideWarps * 32, &cap_wide);
      if (res != FCO_OK) return res;
      if (T_ <= cap_wide / g->num_local && T_ <= max_blocks(kImpl)) {
        /* FCO_GEMV_PIPE unset: never in wide blocks (run 42702c0-probe, see the header) */
        if constexpr (kPipe)
          if (a0->pipe < 0)
            return launch_fused<T, kMT, kImpl, kLL, kPdl, false, kWideWarps>(g, a0, impl, err);
        return launch_fused<T, kMT, kImpl, kLL, kPdl, kPipe, kWideWarps>(g, a0, impl, err);
      }
    }
  }
  /* Rounds (the TMA tile's one-shot, run_oneshot_rounds). FCO_GEMV_ROUNDS = R ≥ 2:
   * ceil(units / R) owners, each taking up to R groups as rounds of one ring; K split in cluster
   * pairs where they fit (FCO_GEMV_SPLIT unset or 2, pairs not turned off), else not split.
   * Unset: the same owners as without rounds, in rounds wherever they take several groups
   * anyway (more groups than owners: the ring runs on instead of refilling per group; run
   * 2026-12-03_nvidia-h200_fee17dc-rounds, local, M 48 / 64, same blocks: P = 4 8192² 53.34 /
   * 58.75 against 56.02 / 61.97 µs, 8192×28672 −1.7 / −2.1 %, 16384² −2.8 / −3.9 %, P = 2
   * 16384² −1.1 / −0.2 %). 1: never. Ranks may differ in it where their owners agree (B is
   * in the FCO_CHECK_ARGS hash): the slots, flags and values are the one-shot's. */
  int B = owner_blocks(cap / g->num_local, max_blocks(kImpl), units);
  int rounds = 1;
  if (kTma && kImpl == 1) {
    if (a0->rounds > 1) {
      rounds = a0->rounds;
      if ((units + rounds - 1) / rounds < B) B = (units + rounds - 1) / rounds;
    } else if (a0->rounds < 0 && B >= 1 && units > B) {
      rounds = (units + B - 1) / B;
    }
  }
  if (kImpl == 2 && B < g->nranks)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "fco_gemv_allreduce: two-phase needs a block per rank, and %d co-resident blocks "
                "on device %d give %d per rank (nranks %d)", cap, device, B, g->nranks);
  if (B < 1)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "fco_gemv_allreduce: %d co-resident blocks on device %d cannot give each of "
                "num_local %d ranks one block", cap, device, g->num_local);
  const size_t es = sizeof(T);
  SplitPlan sp;
  if (rounds > 1) { /* pairs or nothing: B owners, each its own unit of the split rule; unset:
                     * not split, as without rounds where owners take several groups */
    fco_gemv_ar_args_t a = *a0;
    a.split = a0->rounds < 0 || a0->split == 1 || !a0->split_pair ? 1 : 2;
    plan_split<kKernel, kTma>(&a, impl, device, g->num_local, B, cap / g->num_local, B, kG,
                              kThreads, dyn, es, &sp);
    if (!sp.pair) sp.split = 1;
  } else {
    plan_split<kKernel, kTma>(a0, impl, device, g->num_local, B, cap / g->num_local, units, kG,
                              kThreads, dyn, es, &sp);
  }
  const int split = sp.split, pair = sp.pair, miss_s = sp.miss_s, miss_n = sp.miss_n;
  const uint64_t split_slice = sp.slice_bytes;
  const int helpers = B * (split - 1); /* flags on sig[me][me][0 .. helpers) */
  if (helpers >= kCheckSlot)
    return fail(err, FCO_ERR_INTERNAL, "fco_gemv_allreduce: %d split helpers", helpers);
  GarParams p;
  memset(&p, 0, sizeof p);
  for (int i = 0; i < g->num_local; ++i) {
    fco_gemv_ar_args_t a;
    memcpy(&a, g->r[i].op->u.raw, sizeof a);
    p.x[i] = a.x;
    p.w[i] = a.w;
    p.bias[i] = a.bias;
    p.y[i] = a.y;
    p.dev[i] = g->r[i].dev;
    p.rank[i] = g->r[i].op->comm->rank;
    p.K[i] = (int64_t)a.K;
    p.vec[i] = (uintptr_t)a.x % 16 == 0 && (uintptr_t)a.w % 16 == 0 && (a.K * es) % 16 == 0;
  }
  p.M = (int)a0->M;
  p.N = (int)a0->N;
  p.T = T_;
  p.blocks_per_rank = B;
  p.blocks_total = B + helpers;
  p.split = split;
  p.pair = pair;
  p.rounds = rounds;
  /* The pair's split finalise (run_oneshot_rounds): owner and helper each add, push (or write
   * y) and reduce half of their group, through the rounds code even at one group a block;
   * FCO_GEMV_PAIR_FIN=0 or FCO_GEMV_ROUNDS=1: the owner finalises the whole group. What crosses
   * ranks is unchanged (ranks need not agree). */
  p.fin_split = kTma && kImpl == 1 && pair && split == 2 && a0->pair_fin && a0->rounds != 1;
  p.split_slice_bytes = split_slice;
  p.split_off = fco_gemv_ar_split_off(impl, g->nranks, a0->M, a0->N, es);
  p.nranks = g->nranks;
  p.tma_stages = a0->tma_stages;
  p.slot_bytes = fco_gemv_ar_slot_bytes(a0->M, a0->N);
  /* Two-phase with fewer tiles than ranks runs the one-shot schedule inside impl 2's half. */
  p.half_bytes = fco_gemv_ar_half_bytes(impl, g->nranks, a0->M, a0->N, es);
  p.ll_slot_bytes = fco_gemv_ar_ll_slot_bytes(a0->M, a0->N);
  p.check_args = a0->check_args;
  p.ll_half = es == 2 && !a0->ll_fp32;
  p.group_half = es == 2 && !a0->group_fp32;
  uint32_t h = 2166136261u;
  h = fnv1a(h, a0->M);
  h = fnv1a(h, a0->N);
  h = fnv1a(h, (uint64_t)a0->dtype);
  h = fnv1a(h, a0->bias != nullptr);
  h = fnv1a(h, (uint64_t)impl);
  h = fnv1a(h, (uint64_t)B);
  h = fnv1a(h, (uint64_t)T_);
  h = fnv1a(h, (uint64_t)kLL); /* FCO_GEMV_AR_LL set differently: reported, not a timeout */
  h = fnv1a(h, (uint64_t)kG);  /* FCO_GEMV_GROUP set differently: reported, not a timeout */
  if (kLL) h = fnv1a(h, (uint64_t)p.ll_half); /* FCO_GEMV_LL_FP32 set differently: reported */
  if (kG > 1) h = fnv1a(h, (uint64_t)p.group_half); /* FCO_GEMV_GROUP_FP32 likewise */
  p.arg_hash = h;
  const unsigned grid = (unsigned)(B + helpers) * (unsigned)g->num_local;
  /* FCO_GEMV_PDL: not in the hash, ranks need not agree (it changes no byte that moves). The
   * prefetch: the knob's bytes per block, at most kPdlL2Budget for the whole grid (so the
   * prefetched lines stay well inside L2), in whole 256-byte steps (16 rows × 16 bytes). */
  if (kPdl && a0->pdl_prefetch > 0) {
    uint64_t per_block = a0->pdl_prefetch;
    if (per_block == FCO_GEMV_PDL_PREFETCH_AUTO) { /* unset: by kernel (the op header) */
      per_block = FCO_GEMV_PDL_PREFETCH_DEFAULT;
      if constexpr (kTma) per_block = 2 * (uint64_t)gemv::GroupTma<kG>::kWBytes;
    }
    if (per_block > kPdlL2Budget / grid) per_block = kPdlL2Budget / grid;
    p.prefetch_bytes = (uint32_t)(per_block / 256 * 256);
  }
  cudaError_t ce;
  if (kPdl || p.pair) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[2] = {};
    int na = 0;
    if (kPdl) {
      at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[na++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (p.pair) {
      at[na].id = cudaLaunchAttributeClusterDimension;
      at[na].val.clusterDim.x = (unsigned)p.split;
      at[na].val.clusterDim.y = 1;
      at[na++].val.clusterDim.z = 1;
    }
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = dyn;
    cfg.stream = (cudaStream_t)g->stream;
    cfg.attrs = at;
    cfg.numAttrs = (unsigned)na;
    ce = cudaLaunchKernelEx(&cfg, kKernel, p, maps);
  } else {
    kKernel<<<grid, kThreads, dyn, (cudaStream_t)g->stream>>>(p, maps);
    ce = cudaGetLastError();
  }
#ifdef FCO_GEMV_TRACE
  { /* FCO_GEMV_TRACE_EVERY=n: print after every n-th launch only (a graph of k calls then has
     * n − 1 calls back to back, as without the trace, before each printed one) */
    static int launches = 0, every = 0;
    if (!every) every = (int)fco_env_int("FCO_GEMV_TRACE_EVERY", 1);
    if (every < 1) every = 1;
    if (kTma && ce == cudaSuccess && ++launches % every == 0)
      gtrace_print<<<1, 1, 0, (cudaStream_t)g->stream>>>(p.pair, (int)grid);
  }
#endif
  if (ce != cudaSuccess) {
    char what[160];
    snprintf(what, sizeof what, "fco_gemv_allreduce: launch of %u blocks x %d threads%s", grid,
             kThreads, kPdl ? " with programmatic stream serialization (FCO_GEMV_PDL=1)" : "");
    return cuda_fail(err, ce, what);
  }
  /* fco_last_plan: which kernel, e.g. "gemv_allreduce impl 1 kernel grouped wgmma kG=4 split=2
   * kMT=8 warps=8 PDL, 32 blocks/rank of 132 co-resident" (the slots the split rule counts);
   * impl 2's kernels add " two-phase" to the name ("kernel grouped wgmma tma two-phase kG=8 ..."),
   * not where impl 2 runs the one-shot schedule (fewer tiles or groups than ranks) */
  fco_plan_append(g->plan, " kernel %s%s%s", kLL ? "LL " : "",
                  kG > 1 ? (kTma ? "grouped wgmma tma" : kWg ? "grouped wgmma" : "grouped mma.sync")
                         : "one-tile",
                  kImpl == 2 ? " two-phase" : ""); /* impl 2 on the one-shot schedule: none */
  if (kG > 1)
    fco_plan_append(g->plan, " kG=%d split=%d%s%s", kG, split,
                    p.pair ? (split == 2 ? " pair" : " cluster") : "",
                    p.group_half ? "" : " fp32-partials");
  if (rounds > 1) fco_plan_append(g->plan, " rounds=%d", rounds);
  if (p.fin_split) fco_plan_append(g->plan, " fin-split");
  if (miss_s) /* e.g. " (clusters of 4: 30 fit, 32 wanted)" */
    fco_plan_append(g->plan, " (clusters of %d: %d fit, %d wanted)", miss_s, miss_n,
                    B * g->num_local);
  fco_plan_append(g->plan, " kMT=%d warps=%d%s%s, %d blocks/rank of %d co-resident", kMT, kW,
                  kPipe ? " pipe" : "", kPdl ? " PDL" : "", B + helpers, cap / g->num_local);
  return FCO_OK;
}

using FusedFn = fco_result_t (*)(const fco_gpu_launch_t*, const fco_gemv_ar_args_t*, int, char*);

/* FCO_GEMV_GROUP (impl 1, bf16 / f16, M 17..64): 0 = the one-tile kernels; 2 or 4 = grouped
 * tiles of that many 16-column tiles (gemv_group_wgmma.cuh on the vector path, else
 * gemv_group_tile.cuh); unset (or negative) = at M 33..64 groups of 4 where they fill at least
 * kGroupFill of the co-resident blocks (N = 8192: 128 groups on 132 SMs), else groups of 2;
 * at M 17..32 the one-tile kernels. Why (run 429aee0, 2×H200, bf16, impl 1 µs, one-tile /
 * grouped): M = 64 8192×8192 57.9 / 36.0 (4), 8192×28672 160.3 / 87.9 (4), 16384×16384
 * 195.2 / 107.9 (4), 4096×14336 47.5 / 45.2 (2; 48.6 with 4); M = 32 the one-tile kernels win
 * (27.8–99.3 against 38.1–114.9 with 4). impl 3 (cuBLAS + fco's one-shot, 26.7–80.9) is still
 * faster at M > 16 and is what AUTO runs there. A function of M, N, the GPU model and
 * num_local: every rank of one job decides alike; the choice is in the FCO_CHECK_ARGS hash.
 * Since session 23, at M 33..64 FCO_GEMV_GROUP_TMA (unset = 1) goes first: groups of 8 on the
 * TMA tile, K split by pick_split (local runs 2026-12-02_nvidia-h200_418224d-skew and
 * 5bdd21a-pair, bf16, CUDA graphs, µs, P = 1, M 64, groups of 4 / of 8 with TMA; cuBLAS
 * alone): 8192×8192 49.1 / 41.3 (36.1–37.4), 4096×14336 45.4 / 42.4–44.3 (35.1–35.7), 8192×28672
 * 156.6 / 119.3 (125.7–128.3), 16384×16384 182.3 / 134.7 (131.5–133.2); at P = 2 (local)
 * 1.01–1.36× faster than groups of 4 / 2. Since session 26 that tile in groups of 4 where
 * those stream from more blocks (tma_streams, below). FCO_GEMV_GROUP=2 / 4 / 0 and _TMA=0 keep
 * the rule below. */
constexpr double kGroupFill = 0.75;

/* FCO_GEMV_GROUP_TMA unset (session 26): groups of 4 tiles (64 columns) instead of 8 where
 * they stream W from more blocks, or from as many with fewer K slices each. Local runs
 * 2026-12-02_nvidia-h200_bff4c11-g4 and ..._ebcc1f1-rule4 (bf16, graphs, µs, impl 1 at M 64,
 * groups of 8 / of 4; cuBLAS alone): P = 1 4096×14336 38.25 / 32.47 (35.5), 4096×7168 22.84 /
 * 18.60 (17.6), 2048×8192 18.74 / 15.59 (13.9) — more blocks; 8192×4096 (the P = 2 slice of
 * 8192²) 21.40 / 20.18 (20.0), 8192² 37.02 / 36.51, 8192×14336 59.82 / 59.64, 8192×28672
 * 113.51 / 114.99, 5120×8192 30.42 / 30.33, local P = 2 4096×14336 39.79 / 36.08 — as many
 * blocks, groups of 8 split in 2 against 4 unsplit; 16384×8192 67.86 / 73.27, local P = 2
 * 8192² 42.37 / 47.51 — as many blocks, groups of 4 two a block: groups of 8. x is read from
 * L2 once per 64 W rows instead of 128: the long K of 8192×28672 is the one tie lost.
 * Session 29: since a cluster pair's two blocks finalise half the group each (fin_split), the
 * tie of groups of 8 split in 2 as cluster pairs against unsplit groups of 4 goes to the pairs
 * on impl 1 with one rank a GPU (num_local 1; N 8192, i.e. 8192² and 8192×28672 on each of two
 * GPUs): runs 2026-12-03_nvidia-h200_9860fb4-finsplit2 and ..._e40d507-fintrace (P = 1, bf16,
 * graphs, µs, M 48 / 64, groups of 4 / pairs of 8): 8192×4096 20.44 / 20.05, 20.35 / 20.40;
 * 8192×14336 60.29 / 58.92, 59.80 / 58.90. Not on the local transport's shared GPU, where
 * local P = 2 4096×14336 ran the pairs 10 % slower (session 26, before fin_split; unmeasured
 * with it). The rule reads no knob ranks may set differently (FCO_GEMV_PAIR_FIN, _ROUNDS). Shape,
 * GPU model and num_local only (never K_r, which may differ between ranks): the group size is
 * in the FCO_CHECK_ARGS hash, every rank decides alike. */
/* Blocks a rank that would stream W with groups of kG tiles on the TMA tile (owners × split),
 * the split and, where `pair` is not null, whether it runs as clusters — as launch_fused plans
 * them with the split automatic and clusters allowed (whatever FCO_GEMV_SPLIT / _PAIR say: they
 * are local, the group size is not). */
template <typename T, int kMT, int kImpl, bool kPdl, int kG>
fco_result_t tma_streams(const fco_gpu_launch_t* g, const fco_gemv_ar_args_t* a0, int impl,
                         int device, int sms, int* streams, int* split, int* pair,
                         char* err) {
  constexpr int kThreads = gemv::GroupTma<kG>::kWarps * 32;
  constexpr auto kKernel = gemv_allreduce_kernel<T, kMT, kImpl, false, kPdl, false,
                                                 gemv::GroupTma<kG>::kWarps, kG, true, true>;
  const size_t dyn = gemv::GroupTma<kG>::kSmemPairBytes;
  int cap = 0;
  fco_result_t res = opt_in_smem<kKernel>(device, (int)dyn, err);
  if (res == FCO_OK) res = max_coresident_blocks<kKernel>(err, device, sms, kThreads, &cap, dyn);
  if (res != FCO_OK) return res;
  const int units = ((int)fco_gemv_ar_tiles(a0->N) + kG - 1) / kG;
  const int slots = cap / g->num_local, B = owner_blocks(slots, max_blocks(kImpl), units);
  fco_gemv_ar_args_t a = *a0;
  a.split = -1;
  a.split_pair = 1;
  SplitPlan sp;
  plan_split<kKernel, true>(&a, impl, device, g->num_local, B, slots, units, kG, kThreads, dyn,
                            sizeof(T), &sp);
  *streams = B * sp.split;
  *split = sp.split;
  if (pair) *pair = sp.pair;
  return FCO_OK;
}

template <typename T, int kMT, bool kPdl, int kImpl = 1>
fco_result_t launch_grouped(const fco_gpu_launch_t* g, const fco_gemv_ar_args_t* a0, int impl,
                            char* err) {
  const int knob = a0->group; /* the op layer refused values other than -1, 0, 2, 4 */
  if (knob == 0) return launch_fused<T, kMT, kImpl, false, kPdl>(g, a0, impl, err);
  if (knob == 2) return launch_fused<T, kMT, kImpl, false, kPdl, false, 8, 2>(g, a0, impl, err);
  if (knob == 4) return launch_fused<T, kMT, kImpl, false, kPdl, false, 8, 4>(g, a0, impl, err);
  /* FCO_GEMV_GROUP_TMA (unset: the rule of tma_streams; 8 or 1 / 4 force the size): groups
   * of 8 or 4 tiles on the TMA-fed wgmma tile (gemv_group_tma.cuh; the mma.sync tile in the
   * same groups off the vector path), K split by plan_split. */
  int device = 0, sms = 0, cap = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  if constexpr (kMT == 8)
    if (a0->group_tma != 0) {
      bool four = a0->group_tma == 4;
      int s8 = 0, s4 = 0, sp8 = 1, sp4 = 1, pr8 = 0;
      bool pairs8 = false;
      if (a0->group_tma < 0) { /* automatic (see tma_streams) */
        res = tma_streams<T, kMT, kImpl, kPdl, 8>(g, a0, impl, device, sms, &s8, &sp8, &pr8, err);
        if (res == FCO_OK)
          res = tma_streams<T, kMT, kImpl, kPdl, 4>(g, a0, impl, device, sms, &s4, &sp4, nullptr,
                                                    err);
        if (res != FCO_OK) return res;
        pairs8 = kImpl == 1 && g->num_local == 1 && s4 == s8 && sp4 == 1 && sp8 == 2 && pr8;
        four = s4 > s8 || (s4 == s8 && sp4 < sp8 && !pairs8);
      }
      fco_gemv_ar_args_t a = *a0;
      a.group_tma = four ? 4 : 8; /* launch_fused: the TMA tile for groups of 4 too */
      res = four ? launch_fused<T, kMT, kImpl, false, kPdl, false, 8, 4>(g, &a, impl, err)
                 : launch_fused<T, kMT, kImpl, false, kPdl, false, 8, 8>(g, &a, impl, err);
      /* e.g. " (groups of 4: 128 blocks, split 2; of 8: 96, split 3)"; ", pairs": the tie
       * went to pairs of groups of 8 */
      if (res == FCO_OK && a0->group_tma < 0)
        fco_plan_append(g->plan, " (groups of 4: %d blocks, split %d; of 8: %d, split %d%s)", s4,
                        sp4, s8, sp8, pairs8 ? ", pairs" : "");
      return res;
    }
  constexpr auto kFour =
      gemv_allreduce_kernel<T, kMT, kImpl, false, kPdl, false, gemv::kGroupWarps, 4>;
  const size_t dyn = group_dyn_smem<kMT, 4>();
  if ((res = opt_in_smem<kFour>(device, (int)dyn, err)) != FCO_OK) return res;
  res = max_coresident_blocks<kFour>(err, device, sms, gemv::kGroupWarps * 32, &cap, dyn);
  if (res != FCO_OK) return res;
  if (kMT != 8) return launch_fused<T, kMT, kImpl, false, kPdl>(g, a0, impl, err);
  const double groups4 = (double)((fco_gemv_ar_tiles(a0->N) + 3) / 4);
  if (groups4 >= kGroupFill * (double)(cap / g->num_local))
    return launch_fused<T, kMT, kImpl, false, kPdl, false, 8, 4>(g, a0, impl, err);
  /* Split groups (session 14): where groups of 4 fill at most half the slots, groups of 4 with
   * their K split (pick_split) rather than groups of 2 — x read once per 4 tiles, every slot
   * busy (gemv_group_probe, run 92d7f1b-probe: at 64×4096×7168 the TMA tile with K in 2 slices
   * 28.3 µs against 40.3 unsplit, cuBLAS 28.9). FCO_GEMV_SPLIT=1: the groups of 2 as before. */
  if (2 * groups4 <= (double)(cap / g->num_local) && a0->split != 1 &&
      fco_gemv_ar_split_bytes(impl, a0->M, a0->N, sizeof(T)) > 0)
    return launch_fused<T, kMT, kImpl, false, kPdl, false, 8, 4>(g, a0, impl, err);
  return launch_fused<T, kMT, kImpl, false, kPdl, false, 8, 2>(g, a0, impl, err);
}

/* The TMA tile (launch_grouped at kMT = 8, its group size by tma_streams' rule; x's box of M
 * rows) is impl 1's and 2's default from M = FCO_GEMV_TMA_MIN_M (session 30; before, at M
 * 33..64 only; the rule: fco_gemv_ar_tma_tile, src/ops/gemv_allreduce.h).
 * Runs 2026-12-03_nvidia-h200_0c2bdbb-tma32 and ..._776b263-xrows (P = 1, bf16, graphs, µs,
 * the one-tile kernels / the TMA tile in groups of 4 / 8): M 16 4096×7168 18.34 / 17.88 /
 * 21.36, 8192×4096 20.83 / 19.58 / 19.74, 8192² 36.58 / 35.38 / 35.37, 8192×14336 60.68 /
 * 58.46 / 58.92, 16384×8192 69.65 / 66.61 / 66.86, 4096×14336 33.15 / 31.42 / 36.36; M 32
 * 0.71–0.81× the one-tile kMT = 4 kernels at every shape (8192² 49.47 → 35.32); M 1 the
 * one-tile kernels ahead by 0.6–1.7 µs (4096×7168 16.51 / 17.86, 8192² 34.60 / 35.56). M 9..16
 * at the same six shapes (run 2026-12-03_nvidia-h200_31c07dd-tmamin): the tile 0.94–1.00× at 45
 * of 48 rows, 1.026 / 1.014× at 4096×7168 M 9 / 10 only — the bound stays at 9. Local
 * P = 2 at M 16, the plain pushes from the TMA tile against the LL kernels (FCO_GEMV_AR_LL=0 /
 * the default): 4096×14336 33.35 / 34.23, 8192² 37.99 / 41.87, 8192×28672 116.30 / 125.02
 * — on nccl LL stays the default where it applies (on two GPUs unmeasured); on local since
 * session 31 the tile, except at P = 2 with N ≤ 4096 (src/ops/gemv_allreduce.c, use_ll).
 * pipe: FCO_GEMV_PIPE, the kMT = 2 kernels of bf16 / f16 with the pipelined tile loop (kPipe).
 * tma: the TMA tile at M ≤ 32 (the caller's rule, above). */
template <typename T, int kImpl, bool kPdl>
FusedFn pick_mt(size_t M, bool ll, bool pipe, bool tma) {
  constexpr bool kMma = sizeof(T) == 2; /* f32 has no pipelined loop: pipe ignored */
  if constexpr (kMma && (kImpl == 1 || kImpl == 2))
    if (tma && !ll && M <= 32) return launch_grouped<T, 8, kPdl, kImpl>;
  if constexpr (kImpl == 1) {
    static_assert(FCO_GEMV_AR_LL_MAX_M == 16, "LL kernels: kMT 1 and 2");
    if (ll && M <= 8) return launch_fused<T, 1, 1, true, kPdl>;
    if (ll && M <= 16) {
      if constexpr (kMma)
        if (pipe) return launch_fused<T, 2, 1, true, kPdl, true>;
      return launch_fused<T, 2, 1, true, kPdl>;
    }
  }
  if (M <= 8) return launch_fused<T, 1, kImpl, false, kPdl>;
  if (M <= 16) {
    if constexpr (kMma)
      if (pipe) return launch_fused<T, 2, kImpl, false, kPdl, true>;
    return launch_fused<T, 2, kImpl, false, kPdl>;
  }
  if constexpr (kImpl == 1 && kMma) {
    if (M <= 32) return launch_grouped<T, 4, kPdl>;
    if (M <= 64) return launch_grouped<T, 8, kPdl>;
  }
  /* impl 2 at M 33..64: the same groups, two-phase (run_twophase_group; since session 27) */
  if constexpr (kImpl == 2 && kMma)
    if (M > 32 && M <= 64) return launch_grouped<T, 8, kPdl, 2>;
  if (M <= 32) return launch_fused<T, 4, kImpl, false, kPdl>;
  if (M <= 64) return launch_fused<T, 8, kImpl, false, kPdl>;
  return nullptr;
}

/* pdl: FCO_GEMV_PDL=1, the kernels with the PDL prologue (kPdl), a separate instantiation so
 * that the default kernels stay exactly as they were. */
template <int kImpl>
FusedFn pick_fused(fco_dtype_t dt, size_t M, bool ll, bool pdl, bool pipe, bool tma) {
  switch (dt) {
    case FCO_F32:
      return pdl ? pick_mt<float, kImpl, true>(M, ll, pipe, tma)
                 : pick_mt<float, kImpl, false>(M, ll, pipe, tma);
    case FCO_F16:
      return pdl ? pick_mt<__half, kImpl, true>(M, ll, pipe, tma)
                 : pick_mt<__half, kImpl, false>(M, ll, pipe, tma);
    case FCO_BF16:
      return pdl ? pick_mt<__nv_bfloat16, kImpl, true>(M, ll, pipe, tma)
                 : pick_mt<__nv_bfloat16, kImpl, false>(M, ll, pipe, tma);
    default: return nullptr;
  }
}

}  // namespace
}  // namespace fco

extern "C" fco_result_t fco_cuda_gemv_allreduce_run(const fco_gpu_launch_t* g, char* err) {
  if (!g || g->num_local < 1 || g->num_local > FCO_MAX_GPU_RANKS || g->nranks < 1 ||
      g->nranks > FCO_MAX_GPU_RANKS || g->num_local > g->nranks)
    return fco::fail(err, FCO_ERR_INTERNAL, "fco_gemv_allreduce: bad launch descriptor");
  const fco_op_t* op0 = g->r[0].op;
  fco_gemv_ar_args_t a0;
  memcpy(&a0, op0->u.raw, sizeof a0);
  if (a0.M < 1 || a0.M > FCO_GEMV_ALLREDUCE_MAX_M)
    return fco::fail(err, FCO_ERR_UNSUPPORTED, "fco_gemv_allreduce: M %zu is not in 1..%d", a0.M,
                     FCO_GEMV_ALLREDUCE_MAX_M);
  for (int i = 0; i < g->num_local; ++i)
    if (!g->r[i].dev)
      return fco::fail(err, FCO_ERR_INTERNAL, "fco_gemv_allreduce: local rank %d: dev is NULL", i);
  int impl = op0->impl;
  if (impl == 0 || impl == 3) return fco_cuda_gemv_allreduce_baseline(g, impl == 3, err);
  if (impl == 2 && fco_gemv_ar_tiles(a0.N) < (size_t)g->nranks) impl = 1; /* see the header */
  fco::FusedFn fn = nullptr;
  /* LL only where the op layer found it applies (impl 1 asked, shape fits the LL area). */
  const bool ll = a0.ll && op0->impl == 1 && g->nranks > 1 &&
                  fco_gemv_ar_ll_applies(g->transport, 1, g->nranks, a0.M, a0.N);
  const bool pdl = a0.pdl != 0;
  /* FCO_GEMV_PIPE: 0 off, 1 on, unset (-1): on where K_r ≥ kPipeAutoMinK, except in wide blocks
   * (launch_fused; see the header). */
  const bool pipe = a0.pipe > 0 || (a0.pipe < 0 && a0.K >= (size_t)fco::kPipeAutoMinK);
  /* The TMA tile below M 33 (not with LL; pick_mt): at M 9..32 by default (session 30), unless
   * FCO_GEMV_GROUP_TMA=0 or FCO_GEMV_GROUP is set; at M 1..8 where FCO_GEMV_GROUP_TMA is set
   * (1, 4 or 8). The kernel family is in the FCO_CHECK_ARGS hash. Why M 9: above pick_mt. */
  const bool tma = fco_gemv_ar_tma_tile(a0.group_tma, a0.group, a0.M) != 0;
  if (impl == 1) fn = fco::pick_fused<1>(a0.dtype, a0.M, ll, pdl, pipe, tma);
  else if (impl == 2) fn = fco::pick_fused<2>(a0.dtype, a0.M, false, pdl, pipe, tma);
  else
    return fco::fail(err, FCO_ERR_INVALID_ARGUMENT,
                     "fco_gemv_allreduce: impl %d is not available on the %s transport", impl,
                     fco_transport_name(g->transport));
  if (!fn)
    return fco::fail(err, FCO_ERR_UNSUPPORTED, "fco_gemv_allreduce: no kernel for dtype %d, M %zu",
                     (int)a0.dtype, a0.M);
  /* The half size follows the requested impl (impl 2's half holds impl 1's layout too). */
  return fn(g, &a0, op0->impl, err);
}
