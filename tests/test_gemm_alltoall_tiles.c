/*
 * test_gemm_alltoall_tiles.c — impl 1 (tiles) at the shapes test_gemm_alltoall.c never reaches
 * (audit56's coverage probe, folded in): K > 256 (the TMA tile has more k-slabs than pipeline
 * stages: the empty-mbarrier refill and its parity run inside the fused kernel), N > 256 (a
 * ragged second N tile), N = 8 and K = 8 (TMA boxes larger than the tensor), experts spanning
 * several 128-row M tiles, a source sending nothing, E_r = 3 and 2; every tile variant
 * (FCO_GA_TILE = tma, tma2, wgmma, mma; FCO_GA_EPI=async; FCO_GA_TILES_BLOCKS = 5, and 4 with
 * tma2: many tiles per block), each variant's plan asserted to name its tile on compute
 * capability 9.x (a knob that fell back silently would pass the data check); and on the local
 * transport one CUDA graph replayed with three count sets (a rank sending nothing, all rows to
 * one destination) and fresh inputs each time.
 * Float64 reference (ga_check: rows past the received total stay poison). Two ranks, GPU
 * transports; exit 77 on cpu. About 10 s on one H100.
 *   FCO_TRANSPORT=local build/tests/test_gemm_alltoall_tiles
 */
#include <stdlib.h>

#include "ga_fixture.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>

enum { P = 2, NSETS = 3 };
static const int kE[P] = {3, 2};
/* counts[set][rank][e][s] */
static const int32_t kCounts[NSETS][P][3][P] = {
    {{{300, 0}, {0, 0}, {7, 140}}, {{129, 1}, {0, 260}, {0, 0}}},
    {{{0, 0}, {0, 0}, {0, 0}}, {{1, 0}, {0, 513}, {0, 0}}},
    {{{128, 128}, {1, 0}, {0, 255}}, {{0, 0}, {0, 0}, {0, 0}}}};

static void set_counts(ga_case_t* c, int set) {
  for (int r = 0; r < P; r++)
    for (int e = 0; e < kE[r]; e++)
      for (int s = 0; s < P; s++) c->counts[r][e * P + s] = kCounts[set][r][e][s];
}

/* Rows a rank's A and out need for `set`. */
static void need_rows(int set, int64_t* a, int64_t* out) {
  int64_t to[P] = {0};
  *a = 0;
  for (int r = 0; r < P; r++) {
    int64_t sum = 0;
    for (int e = 0; e < kE[r]; e++)
      for (int s = 0; s < P; s++) {
        sum += kCounts[set][r][e][s];
        to[s] += kCounts[set][r][e][s];
      }
    if (sum > *a) *a = sum;
  }
  *out = to[0] > to[1] ? to[0] : to[1];
}

/* Count set 0, capacities that hold every set. */
static void make_case(ga_case_t* c, fco_dtype_t dt, int layout, int K, int N) {
  ga_case_init(c, P, K, N, layout, dt);
  for (int r = 0; r < P; r++) {
    c->E[r] = kE[r];
    c->counts[r] = (int32_t*)calloc((size_t)kE[r] * P, sizeof(int32_t));
  }
  set_counts(c, 0);
  int64_t a0, o0, slack = 0;
  need_rows(0, &a0, &o0);
  for (int set = 1; set < NSETS; set++) {
    int64_t a, o;
    need_rows(set, &a, &o);
    if (a - a0 > slack) slack = a - a0;
    if (o - o0 > slack) slack = o - o0;
  }
  ga_finish_case(c, t_next_seed(), (int)slack + 5);
}

/* Does rank 0's plan name the tile `want` asked for? want[0] == '=': the default tile, "tiles
 * wgmma tma <BM>x<BN>" with neither cluster nor epilogue word; else a substring. */
static int plan_has(const t_world_t* w, const char* want) {
  const char* plan = fco_last_plan(w->comms[0]);
  if (want[0] != '=') return strstr(plan, want) != NULL;
  static const char kTma[] = " kernel tiles wgmma tma ";
  const char* t = strstr(plan, kTma);
  return t && t[sizeof kTma - 1] >= '0' && t[sizeof kTma - 1] <= '9';
}

static void eager(const t_world_t* w, ga_case_t* c, ga_bufs_t* b, const char* what) {
  t_context("%s K=%d N=%d %s %s", fco_dtype_name(c->dtype), c->K, c->N,
            c->layout ? "W[N,K]" : "W[K,N]", what);
  ga_refill_a(w, c, b, t_next_seed());
  ga_poison(w, c, b);
  ASSERT_OK(ga_issue(w, c, b, 1, 0, NULL));
  t_sync(w);
  for (int r = 0; r < P; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(ga_check(w, c, b), 0);
  printf("ok   %s K=%d N=%d %s [%s]\n", fco_dtype_name(c->dtype), c->K, c->N, what,
         fco_last_plan(w->comms[0]));
}

/* Captured with count set 0, replayed with sets 1, 2, 0, 1 written into the same device counts. */
static void graph(const t_world_t* w, ga_case_t* c, ga_bufs_t* b) {
  cudaStream_t st;
  ASSERT_EQ(cudaSetDevice(ga_dev_of(w, 0)), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  size_t ws = 0;
  ASSERT_OK(fco_gemm_alltoall_workspace(w->comms[0], c->a_rows, c->out_rows, c->K, c->N,
                                        c->dtype, 1, &ws));
  ASSERT_OK(fco_comm_reserve(w->comms[0], ws));
  t_context("%s K=%d N=%d graph capture", fco_dtype_name(c->dtype), c->K, c->N);
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r = ga_issue(w, c, b, 1, 0, st);
  cudaGraph_t g = NULL;
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_OK(r);
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  static const int kSets[] = {1, 2, 0, 1};
  for (int i = 0; i < 4; i++) {
    t_context("%s K=%d N=%d graph replay %d (count set %d)", fco_dtype_name(c->dtype), c->K,
              c->N, i, kSets[i]);
    set_counts(c, kSets[i]);
    for (int q = 0; q < P; q++)
      t_put(w->transport, ga_dev_of(w, q), b->counts[q], c->counts[q], (size_t)kE[q] * P * 4);
    ga_refill_a(w, c, b, t_next_seed());
    ga_poison(w, c, b);
    ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    for (int q = 0; q < P; q++) ASSERT_OK(fco_comm_get_async_error(w->comms[q]));
    ASSERT_EQ(ga_check(w, c, b), 0);
  }
  printf("ok   %s K=%d N=%d graph replays with count sets 1, 2, 0, 1\n", fco_dtype_name(c->dtype),
         c->K, c->N);
  set_counts(c, 0);
  for (int q = 0; q < P; q++)
    t_put(w->transport, ga_dev_of(w, q), b->counts[q], c->counts[q], (size_t)kE[q] * P * 4);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  if (!t_is_gpu(t)) t_skip("impl 1's tiles run on the GPU transports only");
  t_require_ranks(t, P);
  t_world_t w;
  ASSERT_OK(t_world_init(&w, t, P, NULL));
  /* The tiles' plans are asserted where wgmma exists (compute capability 9.x): there a knob
   * whose tile fell back to mma.sync is a failure, whatever the default plan says. */
  struct cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, ga_dev_of(&w, 0)), cudaSuccess);
  const int hopper = prop.major == 9;
  if (!hopper) printf("note: compute capability %d.%d: the variants' plans are not asserted\n",
                      prop.major, prop.minor);
  static const struct {
    fco_dtype_t dt;
    int layout, K, N, variants, graph;
  } kShapes[] = {{FCO_BF16, FCO_W_KN, 520, 264, 1, 1},
                 {FCO_F16, FCO_W_NK, 1032, 136, 1, 1},
                 {FCO_BF16, FCO_W_NK, 264, 8, 0, 0},
                 {FCO_BF16, FCO_W_KN, 8, 520, 0, 0}};
  /* FCO_GA_TILE, FCO_GA_EPI, FCO_GA_TILES_BLOCKS (NULL: unset) */
  static const char* const kVariants[][3] = {{NULL, NULL, NULL},  {"tma2", NULL, NULL},
                                             {"wgmma", NULL, NULL}, {"mma", NULL, NULL},
                                             {NULL, "async", NULL}, {NULL, NULL, "5"},
                                             {"tma2", NULL, "4"}};
  static const char* const kKnobs[3] = {"FCO_GA_TILE", "FCO_GA_EPI", "FCO_GA_TILES_BLOCKS"};
  /* What each variant's plan must say (a knob that silently fell back would pass the data check
   * alone: audit56 R7); the second word only for the last variant. */
  static const char* const kWant[][2] = {{"=", NULL},
                                         {"wgmma tma cluster=2 ", NULL},
                                         {"wgmma cp.async ", NULL},
                                         {"mma.sync ", NULL},
                                         {"wgmma tma epi=async ", NULL},
                                         {", 5 blocks/rank", NULL},
                                         {"cluster=2 ", ", 4 blocks/rank"}};
  for (size_t si = 0; si < sizeof kShapes / sizeof kShapes[0]; si++) {
    ga_case_t c;
    ga_bufs_t b;
    make_case(&c, kShapes[si].dt, kShapes[si].layout, kShapes[si].K, kShapes[si].N);
    ga_upload(&w, &c, &b);
    const size_t nv = kShapes[si].variants ? sizeof kVariants / sizeof kVariants[0] : 1;
    for (size_t v = 0; v < nv; v++) {
      char what[128];
      int n = snprintf(what, sizeof what, "variant");
      for (int k = 0; k < 3; k++) {
        t_knob_set(kKnobs[k], kVariants[v][k]);
        if (kVariants[v][k])
          n += snprintf(what + n, sizeof what - (size_t)n, " %s=%s", kKnobs[k], kVariants[v][k]);
      }
      if (v == 0) snprintf(what + n, sizeof what - (size_t)n, " default");
      eager(&w, &c, &b, what);
      for (int k = 0; kShapes[si].variants && hopper && k < 2; k++)
        if (kWant[v][k] && !plan_has(&w, kWant[v][k]))
          t_fail(__FILE__, __LINE__, "%s: the plan [%s] lacks \"%s\"", what,
                 fco_last_plan(w.comms[0]), kWant[v][k]);
    }
    for (int k = 0; k < 3; k++) t_knob_reset(kKnobs[k]);
    if (kShapes[si].graph && t == FCO_TRANSPORT_LOCAL) graph(&w, &c, &b);
    ga_free_bufs(&w, &c, &b);
    ga_free_case(&c);
  }
  t_world_destroy(&w, 0);
  printf("PASS\n");
  return 0;
}
#else
int main(void) {
  t_skip("built without CUDA");
}
#endif
