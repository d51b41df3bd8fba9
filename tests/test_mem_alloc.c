/*
 * test_mem_alloc.c — symmetric buffers (fco_mem_alloc / fco_mem_free): on worlds of 1–4 ranks
 * every rank gets its own zero-filled buffer from one collective allocation (the first rank's
 * call allocates for all, the others take theirs, in the same order), buffers are usable
 * memory (written and read back), bytes that differ between ranks, bad pointers and NULL
 * arguments are refused with a message, FCO_MAX_SYMMETRIC live buffers are the limit and freed
 * slots are reused, and destroying a world with buffers left frees them (cpu, glibc: the heap
 * in use, mallinfo2, is back within 256 KiB of what it was before the world). Operators writing
 * into symmetric outputs are tested by test_gemm_alltoall (sym_outputs).
 *   make test   or   build/tests/test_mem_alloc   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
/* Heap bytes in use (every arena, plus mmapped chunks); -1 where unknown. */
static long long heap_in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return (long long)(m.uordblks + m.hblkhd);
}
#else
static long long heap_in_use(void) { return -1; }
#endif

/* Every rank of w allocates `bytes` (rank order); each buffer is zero, distinct, and holds what
 * is written into it. */
static void alloc_all(const t_world_t* w, size_t bytes, void** p) {
  for (int r = 0; r < w->n; r++) {
    p[r] = NULL;
    ASSERT_OK(fco_mem_alloc(w->comms[r], bytes, &p[r]));
    ASSERT_NOT_NULL(p[r]);
    for (int q = 0; q < r; q++) ASSERT_TRUE(p[q] != p[r]);
  }
  unsigned char* h = (unsigned char*)malloc(bytes);
  for (int r = 0; r < w->n; r++) {
    const int d = t_rank_device(w->transport, r);
    memset(h, 0x5A, bytes);
    t_get(w->transport, d, h, p[r], bytes);
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; i++) nonzero += h[i] != 0;
    ASSERT_EQ(nonzero, 0);
    uint64_t seed = t_next_seed();
    for (size_t i = 0; i < bytes; i++) h[i] = (unsigned char)t_mix(seed + i);
    t_put(w->transport, d, p[r], h, bytes);
    memset(h, 0, bytes);
    t_get(w->transport, d, h, p[r], bytes);
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; i++) wrong += h[i] != (unsigned char)t_mix(seed + i);
    ASSERT_EQ(wrong, 0);
  }
  free(h);
}

static void world(fco_transport_t t, int n) {
  t_world_t w;
  const long long heap0 = heap_in_use();
  t_context("P=%d: fco_comm_init_all", n);
  ASSERT_OK(t_world_init(&w, t, n, NULL));
  void* p[8][FCO_MAX_SYMMETRIC];
  void* x = (void*)1;

  t_context("P=%d: arguments", n);
  ASSERT_RES(fco_mem_alloc(NULL, 64, &x), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_RES(fco_mem_alloc(w.comms[0], 64, NULL), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_RES(fco_mem_alloc(w.comms[0], 0, &x), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_NULL(x);
  ASSERT_MSG(w.comms[0], "bytes");
  ASSERT_OK(fco_mem_free(w.comms[0], NULL));
  int local = 0;
  ASSERT_RES(fco_mem_free(w.comms[0], &local), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_MSG(w.comms[0], "fco_mem_alloc");

  t_context("P=%d: every slot, sizes 1 B .. 1 MiB", n);
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) {
    void* col[8];
    alloc_all(&w, k % 4 == 0 ? 1 : (size_t)4096 << (k % 9), col);
    for (int r = 0; r < n; r++) p[r][k] = col[r];
  }
  t_context("P=%d: fco_mem_find", n);
  for (int r = 0; r < n; r++) {
    for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) {
      const size_t bytes = k % 4 == 0 ? 1 : (size_t)4096 << (k % 9);
      int slot = -9;
      size_t off = 99;
      void* table = (void*)1;
      ASSERT_OK(fco_mem_find(w.comms[r], p[r][k], bytes, &slot, &off, &table));
      ASSERT_EQ(slot, k);
      ASSERT_EQ(off, 0);
      if (t == FCO_TRANSPORT_CPU) ASSERT_NULL(table);
      else ASSERT_NOT_NULL(table);
      if (bytes > 1) { /* a range inside: its offset; one byte too long: none */
        ASSERT_OK(fco_mem_find(w.comms[r], (char*)p[r][k] + 16, bytes - 16, &slot, &off, NULL));
        ASSERT_EQ(slot, k);
        ASSERT_EQ(off, 16);
        ASSERT_OK(fco_mem_find(w.comms[r], (char*)p[r][k] + 16, bytes - 15, &slot, &off, NULL));
        ASSERT_EQ(slot, -1);
        ASSERT_EQ(off, 0);
      }
      if (t != FCO_TRANSPORT_CPU) { /* entry [k][q] of rank r's table: rank q's buffer k */
        void* row[FCO_MAX_GPU_RANKS];
        t_get(t, t_rank_device(t, r), row, (void**)table + (size_t)k * FCO_MAX_GPU_RANKS,
              sizeof row);
        for (int q = 0; q < n; q++)
          if (t == FCO_TRANSPORT_LOCAL) ASSERT_TRUE(row[q] == p[q][k]); /* one address space */
          else ASSERT_NOT_NULL(row[q]); /* nccl: q's buffer mapped into r's space */
      }
    }
    int local = 0, slot = 7;
    ASSERT_OK(fco_mem_find(w.comms[r], &local, sizeof local, &slot, NULL, NULL));
    ASSERT_EQ(slot, -1);
    ASSERT_OK(fco_mem_find(w.comms[r], NULL, 8, &slot, NULL, NULL));
    ASSERT_EQ(slot, -1);
  }
  ASSERT_RES(fco_mem_find(NULL, p[0][0], 1, NULL, NULL, NULL), FCO_ERR_INVALID_ARGUMENT);

  t_context("P=%d: the limit", n);
  ASSERT_RES(fco_mem_alloc(w.comms[0], 64, &x), FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(w.comms[0], "FCO_MAX_SYMMETRIC");

  t_context("P=%d: free, reuse the slot, double free", n);
  for (int r = 0; r < n; r++) ASSERT_OK(fco_mem_free(w.comms[r], p[r][3]));
  for (int r = 0; r < n; r++)
    ASSERT_RES(fco_mem_free(w.comms[r], p[r][3]), FCO_ERR_INVALID_ARGUMENT);
  void* col[8];
  alloc_all(&w, 1000, col);
  for (int r = 0; r < n; r++) p[r][3] = col[r];

  if (n > 1 && t != FCO_TRANSPORT_CPU) {
    t_context("P=%d: bytes differ between ranks", n);
    for (int r = 0; r < n; r++) ASSERT_OK(fco_mem_free(w.comms[r], p[r][5]));
    ASSERT_OK(fco_mem_alloc(w.comms[0], 512, &p[0][5]));
    ASSERT_RES(fco_mem_alloc(w.comms[1], 1024, &x), FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(w.comms[1], "same bytes");
    for (int r = 1; r < n; r++) ASSERT_OK(fco_mem_alloc(w.comms[r], 512, &p[r][5]));
  }

  if (n > 1 && t != FCO_TRANSPORT_CPU) {
    /* After a free, a newer collective allocation can sit in a lower slot than an older one
     * still pending on the other ranks: each rank's call takes the oldest (before session 55
     * the lowest slot, so rank 1's call got rank 0's newer buffer: another slot than rank 0's,
     * or with other sizes a false "bytes differ"). Slots 5 and 7 are free on every rank here. */
    t_context("P=%d: pending allocations taken oldest first", n);
    void* q[8][3];
    for (int r = 0; r < n; r++) ASSERT_OK(fco_mem_free(w.comms[r], p[r][5]));
    for (int r = 0; r < n; r++) ASSERT_OK(fco_mem_free(w.comms[r], p[r][7]));
    ASSERT_OK(fco_mem_alloc(w.comms[0], 4096, &q[0][0])); /* A: slot 5 */
    ASSERT_OK(fco_mem_alloc(w.comms[0], 8192, &q[0][1])); /* B: slot 7 */
    for (int r = 1; r < n; r++) ASSERT_OK(fco_mem_alloc(w.comms[r], 4096, &q[r][0]));
    for (int r = 0; r < n; r++) ASSERT_OK(fco_mem_free(w.comms[r], q[r][0])); /* slot 5 free */
    ASSERT_OK(fco_mem_alloc(w.comms[0], 16384, &q[0][2])); /* C: slot 5, B still pending */
    for (int r = 1; r < n; r++) {
      ASSERT_OK(fco_mem_alloc(w.comms[r], 8192, &q[r][1])); /* B, not C */
      ASSERT_OK(fco_mem_alloc(w.comms[r], 16384, &q[r][2])); /* C */
    }
    for (int i = 1; i < 3; i++) {
      int s0 = -1;
      ASSERT_OK(fco_mem_find(w.comms[0], q[0][i], 1, &s0, NULL, NULL));
      ASSERT_TRUE(s0 >= 0);
      for (int r = 1; r < n; r++) {
        int sr = -2;
        ASSERT_OK(fco_mem_find(w.comms[r], q[r][i], i == 1 ? 8192 : 16384, &sr, NULL, NULL));
        ASSERT_EQ(sr, s0); /* the same collective call: the same slot on every rank */
      }
    }
    for (int r = 0; r < n; r++) {
      p[r][5] = q[r][2];
      p[r][7] = q[r][1];
    }
  }

  t_context("P=%d: free half, destroy with the rest held", n);
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k += 2)
    for (int r = 0; r < n; r++) ASSERT_OK(fco_mem_free(w.comms[r], p[r][k]));
  /* an operation still runs with buffers held */
  t_ar_bufs_t b;
  uint64_t seed = t_next_seed();
  t_ar_alloc(&w, &b, 100);
  t_ar_prepare(&w, &b, 100, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(&w, &b, FCO_IMPL_AUTO));
  t_sync(&w);
  ASSERT_EQ(t_ar_check(&w, &b, seed), 0);
  t_ar_free(&w, &b);
  t_world_destroy(&w, n % 2);
  /* cpu: the buffers still held (about 1 MiB a rank) went back with the world */
  if (t == FCO_TRANSPORT_CPU && heap0 >= 0) ASSERT_LT(heap_in_use() - heap0, 256 << 10);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  const int max = t_test_max_ranks(t) < 4 ? t_test_max_ranks(t) : 4;
  for (int n = 1; n <= max; n++) {
    world(t, n);
    printf("P=%d: ok\n", n);
  }
  printf("PASS\n");
  return 0;
}
