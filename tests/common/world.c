/*
 * world.c — the transport-dependent half of the test helpers (see test.h): which transport a
 * run uses, worlds of P ranks, per-rank buffers (host memory on cpu, device memory on GPU
 * transports), and the allreduce issue / check helpers every communication test shares.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "test.h"

#include <stddef.h>

#include "../../src/cuda/dev.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>

#define T_CUDA(call)                                                                      \
  do {                                                                                    \
    cudaError_t t_e_ = (call);                                                            \
    if (t_e_ != cudaSuccess)                                                              \
      t_fail(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(t_e_));              \
  } while (0)

static int gpu_count(void) {
  static int n = -1;
  if (n < 0) {
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      n = 0;
      cudaGetLastError();
    }
  }
  return n;
}
#else
static int gpu_count(void) { return 0; }
#endif

/* ---- transports --------------------------------------------------------------------------- */
fco_transport_t t_transport(void) {
  static int printed;
  const char* v = getenv("FCO_TRANSPORT");
  fco_transport_t t;
  if (!v || !*v) t = FCO_TRANSPORT_CPU;
  else if (!strcasecmp(v, "cpu")) t = FCO_TRANSPORT_CPU;
  else if (!strcasecmp(v, "local")) t = FCO_TRANSPORT_LOCAL;
  else if (!strcasecmp(v, "nccl")) t = FCO_TRANSPORT_NCCL;
  else if (!strcasecmp(v, "auto")) t = gpu_count() > 0 ? FCO_TRANSPORT_NCCL : FCO_TRANSPORT_CPU;
  else t_fail(__FILE__, __LINE__, "FCO_TRANSPORT='%s': the tests run on cpu, local or nccl", v);
  if (!printed++) {
    printf("transport %s%s\n", fco_transport_name(t), v && *v ? "" : " (FCO_TRANSPORT unset)");
    fflush(stdout);
  }
  return t;
}

int t_is_gpu(fco_transport_t t) { return t == FCO_TRANSPORT_LOCAL || t == FCO_TRANSPORT_NCCL; }

/* ---- multi-process nccl tests ------------------------------------------------------------ */
static int count_child(int idx, void* arg) {
  (void)idx;
  (void)arg;
  const int n = gpu_count();
  return n > 100 ? 100 : n;
}

int t_fork_gpu_count(void) {
  int st[1];
  t_fork_run(1, count_child, NULL, 60, st);
  return st[0] < 0 ? 0 : st[0];
}

fco_comm_t t_nccl_join(int rank, int nranks, const int fd[2], int timeout_ms) {
  fco_unique_id_t id;
  if (rank == 0) {
    ASSERT_OK(fco_get_unique_id(&id));
    for (int q = 1; q < nranks; q++)
      ASSERT_EQ(write(fd[1], &id, sizeof id), (long long)sizeof id);
  } else {
    size_t got = 0;
    while (got < sizeof id) {
      ssize_t n = read(fd[0], (char*)&id + got, sizeof id - got);
      ASSERT_GT(n, 0);
      got += (size_t)n;
    }
  }
  fco_config_t cfg;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_NCCL;
  cfg.device = rank;
  cfg.timeout_ms = timeout_ms;
  fco_comm_t c = NULL;
  ASSERT_OK(fco_comm_init(&c, nranks, rank, &id, &cfg));
  return c;
}

int t_max_ranks(fco_transport_t t) {
  switch (t) {
    case FCO_TRANSPORT_CPU: return T_MAX_RANKS;
    case FCO_TRANSPORT_LOCAL: return gpu_count() > 0 ? 8 : 0;
    case FCO_TRANSPORT_NCCL: return gpu_count() < 8 ? gpu_count() : 8;
    default: return 0;
  }
}

/* FCO_TEST_MAX_RANKS: an integer 1..8 (blanks around it allowed), 4 when unset or empty. Any
 * other value ("abc", "0", "9", "3x") is said once on stderr and gives 4 (atoi once read "abc"
 * as 0, run as 1 rank, and "3x" as 3, silently). */
int t_test_rank_cap(void) {
  static int said;
  const char* e = getenv("FCO_TEST_MAX_RANKS");
  if (!e || !*e) return 4;
  char* end = NULL;
  errno = 0;
  const long v = strtol(e, &end, 10);
  const int read = end != e && errno == 0;
  while (*end == ' ' || *end == '\t' || *end == '\n') ++end;
  if (read && !*end && v >= 1 && v <= 8) return (int)v;
  if (!said++)
    fprintf(stderr, "FCO_TEST_MAX_RANKS=\"%s\" is not an integer 1..8: ignored, 4 ranks at most\n",
            e);
  return 4;
}

int t_pass(fco_transport_t t, int max, int cap) {
  if (max < cap)
    printf("ranks %d..%d not run: transport %s has %d here\n", max + 1, cap,
           fco_transport_name(t), max);
  printf("PASS\n");
  return 0;
}

int t_test_max_ranks(fco_transport_t t) {
  const int m = t_max_ranks(t), cap = t_test_rank_cap();
  return m < cap ? m : cap;
}

void t_require_ranks(fco_transport_t t, int n) {
  int m = t_max_ranks(t);
  if (m >= n) return;
#ifndef FCO_HAVE_CUDA
  if (t_is_gpu(t)) t_skip("transport %s needs a CUDA build of libfco", fco_transport_name(t));
#endif
  if (t == FCO_TRANSPORT_NCCL)
    t_skip("transport nccl: %d ranks need %d GPUs, %d visible", n, n, gpu_count());
  if (t == FCO_TRANSPORT_LOCAL) t_skip("transport local needs a GPU, none visible");
  t_skip("transport %s cannot run %d ranks here", fco_transport_name(t), n);
}

int t_rank_device(fco_transport_t t, int rank) {
  return t == FCO_TRANSPORT_NCCL ? rank : t == FCO_TRANSPORT_LOCAL ? 0 : -1;
}

fco_result_t t_world_init(t_world_t* w, fco_transport_t t, int n, const fco_config_t* cfg) {
  fco_config_t c;
  if (cfg) c = *cfg;
  else fco_config_init(&c);
  c.transport = t;
  memset(w, 0, sizeof *w);
  w->n = n;
  w->transport = t;
  if (n > T_MAX_RANKS) t_fail(__FILE__, __LINE__, "t_world_init: %d ranks", n);
  return fco_comm_init_all(w->comms, n, NULL, &c);
}

void t_world_destroy(t_world_t* w, int reverse) {
  for (int k = 0; k < w->n; k++) {
    int r = reverse ? w->n - 1 - k : k;
    ASSERT_OK(fco_comm_destroy(w->comms[r]));
    w->comms[r] = NULL;
  }
}

/* ---- memory ------------------------------------------------------------------------------- */
void* t_alloc(fco_transport_t t, int device, size_t bytes) {
  void* p = NULL;
  if (t_is_gpu(t)) {
#ifdef FCO_HAVE_CUDA
    T_CUDA(cudaSetDevice(device));
    T_CUDA(cudaMalloc(&p, bytes));
#else
    t_fail(__FILE__, __LINE__, "t_alloc: transport %s in a build without CUDA",
           fco_transport_name(t));
#endif
  } else {
    p = aligned_alloc(256, (bytes + 255) / 256 * 256); /* as cudaMalloc: 256-byte aligned */
    if (!p) t_fail(__FILE__, __LINE__, "t_alloc: %zu bytes", bytes);
  }
  return p;
}

void t_free(fco_transport_t t, int device, void* p) {
  if (!p) return;
  if (t_is_gpu(t)) {
#ifdef FCO_HAVE_CUDA
    T_CUDA(cudaSetDevice(device));
    T_CUDA(cudaFree(p));
#endif
  } else {
    free(p);
  }
}

void t_put(fco_transport_t t, int device, void* dst, const void* src, size_t bytes) {
  if (t_is_gpu(t)) {
#ifdef FCO_HAVE_CUDA
    T_CUDA(cudaSetDevice(device));
    T_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
#endif
  } else {
    memcpy(dst, src, bytes);
  }
}

void t_get(fco_transport_t t, int device, void* dst, const void* src, size_t bytes) {
  if (t_is_gpu(t)) {
#ifdef FCO_HAVE_CUDA
    T_CUDA(cudaSetDevice(device));
    T_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
#endif
  } else {
    memcpy(dst, src, bytes);
  }
}

void t_memset(fco_transport_t t, int device, void* dst, int byte, size_t bytes) {
  if (t_is_gpu(t)) {
#ifdef FCO_HAVE_CUDA
    T_CUDA(cudaSetDevice(device));
    T_CUDA(cudaMemset(dst, byte, bytes));
    T_CUDA(cudaDeviceSynchronize());
#endif
  } else {
    memset(dst, byte, bytes);
  }
}

void t_sync_device(fco_transport_t t, int device) {
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(t)) {
    T_CUDA(cudaSetDevice(device));
    T_CUDA(cudaDeviceSynchronize());
  }
#endif
}

void t_sync(const t_world_t* w) {
  if (!t_is_gpu(w->transport)) return;
  int n = w->transport == FCO_TRANSPORT_LOCAL ? 1 : w->n;
  for (int r = 0; r < n; r++) t_sync_device(w->transport, t_rank_device(w->transport, r));
}

/* ---- allreduce ---------------------------------------------------------------------------- */
void t_ar_alloc(const t_world_t* w, t_ar_bufs_t* b, size_t max_count) {
  memset(b, 0, sizeof *b);
  b->max_bytes = max_count * 4 + T_GUARD;
  for (int r = 0; r < w->n; r++) {
    int d = t_rank_device(w->transport, r);
    b->a_in[r] = t_alloc(w->transport, d, b->max_bytes);
    b->a_out[r] = t_alloc(w->transport, d, b->max_bytes);
    b->in[r] = b->a_in[r];
    b->out[r] = b->a_out[r];
  }
}

void t_ar_free(const t_world_t* w, t_ar_bufs_t* b) {
  for (int r = 0; r < w->n; r++) {
    int d = t_rank_device(w->transport, r);
    t_free(w->transport, d, b->a_in[r]);
    t_free(w->transport, d, b->a_out[r]);
  }
  memset(b, 0, sizeof *b);
}

void t_ar_prepare(const t_world_t* w, t_ar_bufs_t* b, size_t count, fco_dtype_t dtype,
                  int inplace, uint64_t seed) {
  size_t bytes = count * fco_dtype_size(dtype);
  if (bytes + T_GUARD > b->max_bytes)
    t_fail(__FILE__, __LINE__, "t_ar_prepare: %zu elements over the allocation", count);
  b->count = count;
  b->dtype = dtype;
  b->inplace = inplace;
  char* host = (char*)malloc(bytes + T_GUARD);
  ASSERT_NOT_NULL(host);
  for (int r = 0; r < w->n; r++) {
    int d = t_rank_device(w->transport, r);
    t_fill_input(dtype, host, count, seed, r, w->n);
    memset(host + bytes, inplace ? T_GUARD_BYTE : T_IN_GUARD_BYTE, T_GUARD);
    t_put(w->transport, d, b->a_in[r], host, bytes + T_GUARD);
    b->in[r] = b->a_in[r];
    b->out[r] = inplace ? b->a_in[r] : b->a_out[r];
    if (!inplace) {
      memset(host, T_POISON, bytes);
      memset(host + bytes, T_GUARD_BYTE, T_GUARD);
      t_put(w->transport, d, b->a_out[r], host, bytes + T_GUARD);
    }
  }
  free(host);
}

fco_result_t t_ar_run(const t_world_t* w, const t_ar_bufs_t* b, int impl) {
  return t_ar_run_on(w, b, impl, NULL);
}

fco_result_t t_ar_run_rank(const t_world_t* w, const t_ar_bufs_t* b, int r, int impl,
                           void* stream) {
  return fco_allreduce(w->comms[r], b->in[r], b->out[r], b->count, b->dtype, impl, stream);
}

fco_result_t t_ar_run_on(const t_world_t* w, const t_ar_bufs_t* b, int impl,
                         void* const* streams) {
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++) {
    fco_result_t res = t_ar_run_rank(w, b, r, impl, streams ? streams[r] : NULL);
    if (res != FCO_OK && first == FCO_OK) first = res;
  }
  fco_result_t res = fco_group_end();
  return first != FCO_OK ? first : res;
}

static void print_elem(const char* what, int r, size_t i, fco_dtype_t dtype, const void* buf,
                       float want) {
  size_t es = fco_dtype_size(dtype);
  unsigned bits = 0;
  memcpy(&bits, (const char*)buf + i * es, es);
  fprintf(stderr, "  %s rank %d [%zu] = %g (0x%0*x), want %g\n", what, r, i,
          (double)t_get_elem(dtype, buf, i), (int)(2 * es), bits, (double)want);
}

size_t t_ar_check(const t_world_t* w, const t_ar_bufs_t* b, uint64_t seed) {
  return t_ar_check_scaled(w, b, seed, 1.0);
}

size_t t_ar_check_scaled(const t_world_t* w, const t_ar_bufs_t* b, uint64_t seed, double scale) {
  size_t count = b->count, bytes = count * fco_dtype_size(b->dtype), wrong = 0;
  char* host = (char*)malloc(bytes + T_GUARD);
  char* ref = (char*)malloc(bytes + T_GUARD);
  float* want = (float*)malloc(count * sizeof(float));
  ASSERT_TRUE(host && ref && want);
  for (size_t i = 0; i < count; i++) want[i] = (float)(scale * t_sum(seed, i, w->n));
  for (int r = 0; r < w->n; r++) {
    int d = t_rank_device(w->transport, r);
    char* buf = r == 0 ? ref : host;
    t_get(w->transport, d, buf, b->out[r], bytes + T_GUARD);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
      if (t_get_elem(b->dtype, buf, i) == want[i]) continue; /* NaN poison never equals */
      if (bad++ < 5) print_elem("out", r, i, b->dtype, buf, want[i]);
    }
    for (size_t i = bytes; i < bytes + T_GUARD; i++) {
      if ((unsigned char)buf[i] == T_GUARD_BYTE) continue;
      if (bad++ < 5)
        fprintf(stderr, "  rank %d wrote 0x%02x %zu bytes past the output's end\n", r,
                (unsigned char)buf[i], i - bytes);
    }
    if (r > 0 && memcmp(buf, ref, bytes)) {
      fprintf(stderr, "  rank %d output is not bit-identical to rank 0's\n", r);
      bad++;
    }
    if (!b->inplace) { /* the input must be left as it was */
      char* got = (char*)malloc(bytes + 1);
      char* orig = (char*)malloc(bytes + 1);
      ASSERT_TRUE(got && orig);
      t_get(w->transport, d, got, b->in[r], bytes);
      t_fill_input(b->dtype, orig, count, seed, r, w->n);
      if (memcmp(got, orig, bytes)) {
        fprintf(stderr, "  rank %d input was modified by an out-of-place allreduce\n", r);
        bad++;
      }
      free(got);
      free(orig);
    }
    if (bad) fprintf(stderr, "  rank %d: %zu wrong\n", r, bad);
    wrong += bad;
  }
  free(host);
  free(ref);
  free(want);
  return wrong;
}

size_t t_ar_check_untouched(const t_world_t* w, const t_ar_bufs_t* b) {
  size_t n = b->count * fco_dtype_size(b->dtype) + T_GUARD, wrong = 0;
  unsigned char* host = (unsigned char*)malloc(n);
  ASSERT_NOT_NULL(host);
  for (int r = 0; r < w->n; r++) {
    t_get(w->transport, t_rank_device(w->transport, r), host, b->out[r], n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += host[i] != (i < n - T_GUARD ? T_POISON : T_GUARD_BYTE);
    if (bad) fprintf(stderr, "  rank %d: %zu bytes of the output were written\n", r, bad);
    wrong += bad;
  }
  free(host);
  return wrong;
}

/* ---- a rank that never calls ---------------------------------------------------------------- */
fco_result_t t_lone_rank0_allreduce(t_world_t* w, int impl, size_t count, double* ms) {
  fco_transport_t t = w->transport;
  size_t bytes = count * 4;
  void *in[2], *out[2];
  for (int r = 0; r < 2; r++) {
    int d = t_rank_device(t, r);
    in[r] = t_alloc(t, d, bytes);
    out[r] = t_alloc(t, d, bytes);
    t_memset(t, d, in[r], 0, bytes);
    t_memset(t, d, out[r], T_POISON, bytes);
  }
  fco_result_t res;
  double t0 = t_now_ms();
  if (t == FCO_TRANSPORT_LOCAL) {
    /* One grid covers every virtual rank, so rank 1 is left out by the transport's test hook. */
    setenv("FCO_FAULT_SKIP_RANK", "1", 1);
    ASSERT_OK(fco_group_start());
    res = fco_allreduce(w->comms[0], in[0], out[0], count, FCO_F32, impl, NULL);
    fco_result_t r1 = fco_allreduce(w->comms[1], in[1], out[1], count, FCO_F32, impl, NULL);
    fco_result_t re = fco_group_end();
    if (res == FCO_OK) res = r1 != FCO_OK ? r1 : re;
  } else {
    res = fco_allreduce(w->comms[0], in[0], out[0], count, FCO_F32, impl, NULL);
  }
  if (t_is_gpu(t)) {
    /* The failure is found on the device: it must end the kernel, then show as async error. */
    t_sync_device(t, t_rank_device(t, 0));
    if (res == FCO_OK || res == FCO_ERR_TIMEOUT) res = fco_comm_get_async_error(w->comms[0]);
  }
  *ms = t_now_ms() - t0;
  if (t == FCO_TRANSPORT_LOCAL) unsetenv("FCO_FAULT_SKIP_RANK");
  t_sync(w);
  for (int r = 0; r < 2; r++) {
    int d = t_rank_device(t, r);
    t_free(t, d, in[r]);
    t_free(t, d, out[r]);
  }
  return res;
}

static void* dev_state_at(const t_world_t* w, int r, size_t offset, size_t bytes) {
  void* dev = NULL;
  size_t have = 0;
  uint32_t version = 0;
  ASSERT_OK(fco_comm_device_state(w->comms[r], &dev, &have, &version));
  ASSERT_GE(have, offset + bytes);
  return (char*)dev + offset;
}

void t_dev_state_get(const t_world_t* w, int r, size_t offset, void* dst, size_t bytes) {
  t_get(w->transport, t_rank_device(w->transport, r), dst, dev_state_at(w, r, offset, bytes),
        bytes);
}

void t_dev_state_put(const t_world_t* w, int r, size_t offset, const void* src, size_t bytes) {
  t_put(w->transport, t_rank_device(w->transport, r), dev_state_at(w, r, offset, bytes), src,
        bytes);
}

void t_world_set_epoch(const t_world_t* w, uint64_t e) {
  for (int r = 0; r < w->n; r++)
    t_dev_state_put(w, r, offsetof(fco_dev_rank_t, epoch), &e, sizeof e);
}
