/*
 * gemv_allreduce_plan.cuh — host side of the fused GEMV + all-reduce launch
 * (src/cuda/gemv_allreduce.cu): how many owner blocks a rank runs, the K split of its groups
 * and whether the split blocks run as clusters, and the FCO_CHECK_ARGS hash's mixing step.
 * The launcher (launch_fused) plans with these; so does the automatic TMA group size
 * (tma_streams), which plans both group sizes before it launches either.
 */
#ifndef FCO_CUDA_GEMV_ALLREDUCE_PLAN_CUH_
#define FCO_CUDA_GEMV_ALLREDUCE_PLAN_CUH_

#include <stdint.h>
#include <string.h>

#include <atomic>

#include "../ops/gemv_allreduce.h"
#include "gemv_group_tma.cuh"
#include "launch.cuh"

namespace fco {
namespace {

uint32_t fnv1a(uint32_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (uint32_t)(v >> (8 * i)) & 0xffu;
    h *= 16777619u;
  }
  return h;
}

/* The most clusters of cs blocks of kKernel (threads, dyn bytes of shared memory each) the
 * device holds at once (cudaOccupancyMaxActiveClusters; grid: any multiple of cs), asked once
 * per device and cluster size; −1 where the query fails. */
template <auto kKernel>
int max_clusters(int device, int cs, int grid, int threads, size_t dyn) {
  static std::atomic<int> cache[kMaxDevices][FCO_GEMV_SPLIT_MAX + 1]; /* 0: not asked yet */
  const bool cached = device >= 0 && device < kMaxDevices && cs >= 1 && cs <= FCO_GEMV_SPLIT_MAX;
  int n = cached ? cache[device][cs].load() : 0;
  if (n != 0) return n;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1] = {};
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = (unsigned)cs;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3((unsigned)grid);
  cfg.blockDim = dim3((unsigned)threads);
  cfg.dynamicSmemBytes = dyn;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  if (cudaOccupancyMaxActiveClusters(&n, kKernel, &cfg) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    n = -1;
  }
  if (cached) cache[device][cs].store(n);
  return n;
}

/* knob = FCO_GEMV_SPLIT (grouped tiles, see the header; the op layer refused other values):
 * -1 = auto, 1 = off, 2..FCO_GEMV_SPLIT_MAX = that many K slices a group where they fit. They
 * fit where every group has its own block (B == groups), the helpers too are co-resident
 * (groups · split ≤ slots, the co-resident blocks per rank) and the split area holds split − 1
 * slices (unless `clusters`: the caller bounds a split that runs without clusters, plan_split).
 * Auto: as many as fit, where the groups fill at most half the slots. */
void pick_split(int knob, int groups, int B, int slots, size_t M, size_t N, size_t es, int impl,
                int kG, bool clusters, int* split, uint64_t* slice_bytes) {
  *split = 1;
  *slice_bytes = fco_round_up((size_t)groups * kG * gemv::kTileN * M * 4, 256);
  if (knob == 1 || B != groups || groups < 1) return;
  const size_t area = fco_gemv_ar_split_bytes(impl, M, N, es);
  long long fit = slots / groups;
  if (fit > FCO_GEMV_SPLIT_MAX) fit = FCO_GEMV_SPLIT_MAX;
  if (!clusters && fit > 1 + (long long)(area / *slice_bytes))
    fit = 1 + (long long)(area / *slice_bytes);
  if (knob < 0 && 2 * groups > slots) return;
  *split = (int)(knob > 1 && knob < fit ? knob : fit);
  if (*split < 1) *split = 1;
}

/* Owner blocks a rank: one per work unit up to the slots (co-resident blocks a rank) and the
 * flag limit, then balanced so every block gets the same number of units (512 tiles on 396
 * slots would leave the 116 blocks with a second tile as the critical path: 2 tile times
 * instead of 1.3). */
int owner_blocks(int slots, int limit, int units) {
  int B = slots < limit ? slots : limit;
  if (B > units) B = units;
  if (B >= 1) {
    const int per_block = (units + B - 1) / B;
    B = (units + per_block - 1) / per_block;
  }
  return B;
}

/* A grouped launch's K split: split (1: none), the split area's slice bytes, pair (the split
 * blocks run as clusters) and miss_s / miss_n (the largest split whose clusters did not fit,
 * and how many of them did; 0 if none). */
struct SplitPlan {
  int split, pair, miss_s, miss_n;
  uint64_t slice_bytes;
};

/* pick_split, then for the TMA grouped tile split in 2..4 (FCO_GEMV_SPLIT_PAIR, on unless 0):
 * owner and helpers as a cluster of split blocks, each helper's slice stored into the owner's
 * shared memory (GroupTma::run to_owner, hand_buf) instead of the split area + flag + the
 * owner's L2 reads; where the device holds all num_local·B clusters at once (the owner waits
 * for its helpers). With the split automatic (FCO_GEMV_SPLIT unset), the largest split ≤
 * pick_split's whose clusters fit: on H200 32 clusters of 4 (N = 4096 at one rank a GPU, groups
 * of 8) do not, and pairs beat 4 slices through the split area there (run
 * 2026-12-02_nvidia-h200_4ee3277-cluster, P = 1, M 64: 4096×7168 22.4 against 26.2 µs,
 * 4096×14336 38.4 / 40.1; 2048×8192, 16 clusters of 4: 19.0 against 22.0 through the split
 * area). FCO_GEMV_SPLIT=2..4: that split, in clusters where they fit, else through the split
 * area. Local, as the split. kKernel: the kernel launched (threads, dyn: its launch). */
template <auto kKernel, bool kTma>
void plan_split(const fco_gemv_ar_args_t* a0, int impl, int device, int num_local, int B,
                int slots, int units, int kG, int threads, size_t dyn, size_t es, SplitPlan* sp) {
  memset(sp, 0, sizeof *sp);
  sp->split = 1;
  const bool clusters = kTma && a0->split_pair;
  if (kG > 1)
    pick_split(a0->split, units, B, slots, a0->M, a0->N, es, impl, kG, clusters, &sp->split,
               &sp->slice_bytes);
  static_assert(FCO_GEMV_SPLIT_MAX <= gemv::GroupTma<8>::kMaxCluster, "clusters of split blocks");
  if constexpr (kTma) {
    if (sp->split >= 2 && clusters) {
      for (int cs = sp->split; cs >= 2 && !sp->pair; --cs) {
        const int n = max_clusters<kKernel>(device, cs, B * cs * num_local, threads, dyn);
        if (n >= B * num_local) {
          sp->pair = 1;
          sp->split = cs;
        } else if (!sp->miss_s) {
          sp->miss_s = cs;
          sp->miss_n = n;
        }
        if (a0->split > 1) break; /* the knob's split or none */
      }
      /* no cluster fits: the slices go through the split area, as many as it holds (none
       * at M ≤ 32, where it is not reserved) */
      const uint64_t area = fco_gemv_ar_split_bytes(impl, a0->M, a0->N, es);
      if (!sp->pair && sp->split > 1 + (int)(area / sp->slice_bytes))
        sp->split = 1 + (int)(area / sp->slice_bytes);
    }
  }
}

}  // namespace
}  // namespace fco

#endif /* FCO_CUDA_GEMV_ALLREDUCE_PLAN_CUH_ */
