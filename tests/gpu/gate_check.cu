/*
 * gate_check.cu — standalone check of the gate ahead of the nccl transport's collective setup
 * steps (src/cuda/gate.{h,cu}: workspace growth, fco_mem_alloc) on ONE GPU, below the library:
 * P virtual ranks, each with its own signal area in device memory and a peer table pointing at
 * all of them (as the local transport would build it), each rank's gate on its own stream.
 *
 * Build and run from the repository root:
 *   nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -o /tmp/gate_check \
 *     tests/gpu/gate_check.cu -Lbuild/lib -lfco -Xlinker -rpath=$PWD/build/lib && /tmp/gate_check
 * Exit 0 pass, 1 fail, 77 skip (no GPU).
 *
 * What it checks (fresh random values every run and every generation):
 *   - P = 2..8, 30 generations with every rank: every rank goes through, and every rank's result
 *     holds the maximum and minimum of all ranks' values; the argument errors of fco_cuda_gate;
 *   - a late rank inside the bound (launched 100 ms after its peers, timeout 3 s): all go;
 *   - a rank that never comes (P = 3, rank 2 absent, timeout 200 ms): ranks 0 and 1 give up,
 *     both naming rank 2, within the bound; then rank 2 comes, after its peers gave up: it
 *     finds the generation abandoned (the CAS decision) instead of going on alone — the case a
 *     gate without one decision for all got wrong; and every rank's next gate finds the ranks
 *     out of step;
 *   - two ranks racing their bounds (P = 2, 300 fresh pairs, each rank's bound 0..40 µs, so
 *     some trials go through and some are abandoned): both ranks always read one decision.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "../../src/cuda/gate.h"
#include "check.cuh"

static uint64_t g_rng;
static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* P virtual ranks: device states, signal areas (zeroed), results, streams. */
struct World {
  int P;
  fco_dev_rank_t* dev[FCO_MAX_GPU_RANKS];
  uint64_t* sig[FCO_MAX_GPU_RANKS];
  fco_gate_result_t* res;  /* device, one a rank */
  cudaStream_t st[FCO_MAX_GPU_RANKS];
  uint64_t gen[FCO_MAX_GPU_RANKS];
};

static void world_make(World* w, int P) {
  memset(w, 0, sizeof *w);
  w->P = P;
  const size_t area = FCO_SIG_BYTES + FCO_GATE_BYTES;
  for (int r = 0; r < P; r++) {
    CUDA_CHECK(cudaMalloc((void**)&w->sig[r], area));
    CUDA_CHECK(cudaMemset(w->sig[r], 0, area));
    CUDA_CHECK(cudaStreamCreateWithFlags(&w->st[r], cudaStreamNonBlocking));
  }
  for (int r = 0; r < P; r++) {
    fco_dev_rank_t h;
    memset(&h, 0, sizeof h);
    for (int q = 0; q < P; q++) h.peer_sig[q] = w->sig[q];
    h.rank = r;
    h.nranks = P;
    CUDA_CHECK(cudaMalloc((void**)&w->dev[r], sizeof h));
    CUDA_CHECK(cudaMemcpy(w->dev[r], &h, sizeof h, cudaMemcpyHostToDevice));
  }
  CUDA_CHECK(cudaMalloc((void**)&w->res, P * sizeof(fco_gate_result_t)));
  CUDA_CHECK(cudaDeviceSynchronize());
}

static void world_free(World* w) {
  CUDA_CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < w->P; r++) {
    CUDA_CHECK(cudaFree(w->sig[r]));
    CUDA_CHECK(cudaFree(w->dev[r]));
    CUDA_CHECK(cudaStreamDestroy(w->st[r]));
  }
  CUDA_CHECK(cudaFree(w->res));
}

static void enter_ns(World* w, int r, uint64_t value, uint64_t timeout_ns) {
  char err[FCO_ERRMSG_LEN];
  const fco_result_t x = fco_cuda_gate(w->dev[r], ++w->gen[r], value, timeout_ns, w->res + r,
                                       w->st[r], err);
  if (x != FCO_OK) {
    fprintf(stderr, "fco_cuda_gate: %s\n", err);
    exit(1);
  }
}
static void enter(World* w, int r, uint64_t value, uint64_t timeout_ms) {
  enter_ns(w, r, value, timeout_ms * 1000000ull);
}

static fco_gate_result_t result(World* w, int r) {
  fco_gate_result_t g;
  CUDA_CHECK(cudaStreamSynchronize(w->st[r]));
  CUDA_CHECK(cudaMemcpy(&g, w->res + r, sizeof g, cudaMemcpyDeviceToHost));
  return g;
}

static void all_go(int P, int gens) {
  World w;
  world_make(&w, P);
  for (int g = 1; g <= gens; g++) {
    uint64_t v[FCO_MAX_GPU_RANKS], hi = 0, lo = ~0ull;
    for (int r = 0; r < P; r++) {
      v[r] = rnd() >> (rnd() % 64);
      hi = v[r] > hi ? v[r] : hi;
      lo = v[r] < lo ? v[r] : lo;
    }
    int order[FCO_MAX_GPU_RANKS]; /* a random order of launches (Fisher-Yates): every rank
                                   * once (i·5 + g mod P entered one rank P times at P = 5) */
    for (int r = 0; r < P; r++) order[r] = r;
    for (int i = P - 1; i > 0; i--) {
      const int j = (int)(rnd() % (uint64_t)(i + 1)), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    for (int i = 0; i < P; i++) enter(&w, order[i], v[order[i]], 3000);
    for (int r = 0; r < P; r++) {
      const fco_gate_result_t x = result(&w, r);
      EXPECT(x.went == 1 && x.missing == -1 && x.decided == (uint64_t)g << 2,
             "P=%d gen %d rank %d: went %d missing %d decided 0x%llx", P, g, r, x.went,
             x.missing, (unsigned long long)x.decided);
      EXPECT(x.max_value == hi && x.min_value == lo,
             "P=%d gen %d rank %d: max 0x%llx min 0x%llx, want 0x%llx 0x%llx", P, g, r,
             (unsigned long long)x.max_value, (unsigned long long)x.min_value,
             (unsigned long long)hi, (unsigned long long)lo);
    }
  }
  world_free(&w);
  printf("P=%d: %d generations, all ranks through with every value\n", P, gens);
}

static void late_inside(void) {
  World w;
  world_make(&w, 4);
  for (int r = 0; r < 3; r++) enter(&w, r, 10 + r, 3000);
  usleep(100000);
  enter(&w, 3, 99, 3000);
  for (int r = 0; r < 4; r++) {
    const fco_gate_result_t x = result(&w, r);
    EXPECT(x.went == 1 && x.max_value == 99 && x.min_value == 10,
           "late inside the bound: rank %d went %d max %llu min %llu", r, x.went,
           (unsigned long long)x.max_value, (unsigned long long)x.min_value);
  }
  world_free(&w);
  printf("a rank 100 ms late inside a 3 s bound: all through\n");
}

static void absent(void) {
  World w;
  world_make(&w, 3);
  enter(&w, 0, 5, 3000); /* generation 1: everyone */
  enter(&w, 1, 6, 3000);
  enter(&w, 2, 7, 3000);
  for (int r = 0; r < 3; r++) EXPECT(result(&w, r).went == 1, "gen 1 rank %d", r);
  const double t0 = now_s();
  enter(&w, 0, 5, 200); /* generation 2: rank 2 absent */
  enter(&w, 1, 6, 200);
  for (int r = 0; r < 2; r++) {
    const fco_gate_result_t x = result(&w, r);
    EXPECT(x.went == 0 && x.missing == 2 && x.decided == ((2ull << 2) | 1),
           "absent rank 2: rank %d went %d missing %d decided 0x%llx", r, x.went, x.missing,
           (unsigned long long)x.decided);
  }
  const double dt = now_s() - t0;
  EXPECT(dt < 10.0, "the gates ended after %.1f s (bound 0.2 s)", dt);
  printf("rank 2 absent: ranks 0 and 1 gave up naming it after %.0f ms\n", dt * 1e3);
  enter(&w, 2, 7, 200); /* rank 2 comes after its peers gave up */
  fco_gate_result_t x = result(&w, 2);
  EXPECT(x.went == 0 && x.decided == ((2ull << 2) | 1),
         "rank 2 after its peers gave up: went %d decided 0x%llx (it must not go on alone)",
         x.went, (unsigned long long)x.decided);
  for (int r = 0; r < 3; r++) enter(&w, r, 1, 200); /* generation 3: out of step */
  for (int r = 0; r < 3; r++) {
    x = result(&w, r);
    EXPECT(x.went == 0 && x.decided >> 2 != 3, "gen 3 after an abandoned gen: rank %d went %d "
           "decided 0x%llx (want another generation's D)", r, x.went,
           (unsigned long long)x.decided);
  }
  world_free(&w);
  printf("rank 2 after its peers gave up: abandoned, as is every later gate\n");
}

/* Both ranks' bounds (0..40 µs) end about when the other arrives: whichever way each trial
 * goes, both ranks read one decision. A fresh pair each trial (an abandoned one stays out of
 * step). */
static void racing(int trials) {
  int went = 0, gave_up = 0;
  for (int t = 0; t < trials; t++) {
    World w;
    world_make(&w, 2);
    const int first = (int)(rnd() & 1);
    enter_ns(&w, first, 1, rnd() % 40000);
    enter_ns(&w, 1 - first, 2, rnd() % 40000);
    const fco_gate_result_t a = result(&w, 0), b = result(&w, 1);
    EXPECT(a.decided == b.decided && a.went == b.went && a.decided >> 2 == 1,
           "trial %d: rank 0 decided 0x%llx went %d, rank 1 0x%llx went %d", t,
           (unsigned long long)a.decided, a.went, (unsigned long long)b.decided, b.went);
    EXPECT(!a.went || (a.max_value == 2 && b.max_value == 2 && a.min_value == 1),
           "trial %d: went with max %llu / %llu min %llu", t, (unsigned long long)a.max_value,
           (unsigned long long)b.max_value, (unsigned long long)a.min_value);
    if (a.went) went++;
    else gave_up++;
    world_free(&w);
  }
  printf("2 ranks racing their bounds: %d trials through, %d abandoned, one decision each\n",
         went, gave_up);
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("SKIP: no GPU\n");
    return 77;
  }
  g_rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  printf("seed 0x%llx\n", (unsigned long long)g_rng);
  char err[FCO_ERRMSG_LEN];
  fco_gate_result_t* res = NULL;
  CUDA_CHECK(cudaMalloc((void**)&res, sizeof *res));
  EXPECT(fco_cuda_gate(NULL, 1, 0, 1000, res, 0, err) == FCO_ERR_INVALID_ARGUMENT, "no dev");
  EXPECT(fco_cuda_gate((fco_dev_rank_t*)res, 0, 0, 1000, res, 0, err) ==
             FCO_ERR_INVALID_ARGUMENT && strstr(err, "generation"),
         "generation 0: %s", err);
  CUDA_CHECK(cudaFree(res));
  for (int P = 2; P <= FCO_MAX_GPU_RANKS; P++) all_go(P, 30);
  late_inside();
  absent();
  racing(300);
  if (g_failures) {
    printf("FAIL: %d checks\n", g_failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
