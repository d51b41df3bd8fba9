/*
 * test.h — shared helpers of the fco test suite (liburing/libuv style).
 *
 * Every tests/test_*.c is one program testing one behaviour: exit 0 = pass, 1 = fail,
 * 77 = skip (the reason is printed). Build and run them all with `make test`; one alone with
 * `make BUILD=build build/tests/test_allreduce && build/tests/test_allreduce`.
 *
 * Transport-generic: the transport comes from FCO_TRANSPORT (nccl | local | cpu), cpu when unset,
 * so the same programs run in CI (cpu) and on the GPU machine (tests/gpu/run.sh sets it).
 * Communication checks use inputs that are a function of (seed, rank, index): small integers,
 * exact in bf16 and in any summation order, so results are compared bit for bit. The seed is
 * fresh per run and printed; FCO_TEST_SEED=<seed> reproduces a run.
 */
#ifndef FCO_TEST_H_
#define FCO_TEST_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fco.h"

/* The library's knob parsers (src/core/internal.h; exported by libfco, not in fco.h), so the
 * tests read a knob exactly as the library does: fco_env_int (integers, k / M / G suffixes),
 * fco_env_choice (one of a list), fco_env_flag (0 / 1); another value is said once on stderr
 * and the default returned. */
long long fco_env_int(const char* name, long long dflt);
int fco_env_choice(const char* name, const char* const* choices, int dflt);
int fco_env_flag(const char* name, int dflt);

#define T_SKIP 77
#define T_MAX_RANKS 64
#define T_GUARD 256 /* guard bytes after every buffer: nothing may be written there        */
#define T_POISON 0xFF /* output elements before the call: NaN in f32, f16 and bf16           */
/* Guard patterns: finite in every dtype and different from each other, so a result written
 * past the output's end (even one computed from bytes read past the input's end, or from NaN
 * poison) changes the guard. */
#define T_GUARD_BYTE 0xA5    /* after outputs (and after in-place buffers) */
#define T_IN_GUARD_BYTE 0x5A /* after out-of-place inputs                 */

/* ---- failing, skipping, context ------------------------------------------------------- */
/* Print "FAIL file:line: message" (plus the context and the seed) and exit(1). */
void t_fail(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
/* Print "SKIP: reason" and exit(77). */
void t_skip(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* What the test is doing now (printed with a failure), e.g. "P=3 count=7 bf16 impl=1". */
void t_context(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* Case-insensitive substring test; _word: only where `needle` stands as a whole word
 * (neighbours are not letters, digits or '_'). */
int t_contains(const char* haystack, const char* needle);
int t_contains_word(const char* haystack, const char* needle);

#define ASSERT_TRUE(x)                                                             \
  do {                                                                             \
    if (!(x)) t_fail(__FILE__, __LINE__, "ASSERT_TRUE(%s)", #x);                   \
  } while (0)

#define T_ASSERT_CMP_(a, op, b)                                                    \
  do {                                                                             \
    long long t_a_ = (long long)(a), t_b_ = (long long)(b);                        \
    if (!(t_a_ op t_b_))                                                           \
      t_fail(__FILE__, __LINE__, "ASSERT(%s %s %s): %lld vs %lld", #a, #op, #b,    \
             t_a_, t_b_);                                                          \
  } while (0)
#define ASSERT_EQ(a, b) T_ASSERT_CMP_(a, ==, b)
#define ASSERT_NE(a, b) T_ASSERT_CMP_(a, !=, b)
#define ASSERT_LT(a, b) T_ASSERT_CMP_(a, <, b)
#define ASSERT_LE(a, b) T_ASSERT_CMP_(a, <=, b)
#define ASSERT_GE(a, b) T_ASSERT_CMP_(a, >=, b)
#define ASSERT_GT(a, b) T_ASSERT_CMP_(a, >, b)

#define ASSERT_NULL(p)                                                             \
  do {                                                                             \
    const void* t_p_ = (const void*)(p);                                           \
    if (t_p_) t_fail(__FILE__, __LINE__, "ASSERT_NULL(%s): %p", #p, t_p_);          \
  } while (0)
#define ASSERT_NOT_NULL(p)                                                         \
  do {                                                                             \
    if (!(p)) t_fail(__FILE__, __LINE__, "ASSERT_NOT_NULL(%s)", #p);               \
  } while (0)

#define ASSERT_STR_EQ(a, b)                                                        \
  do {                                                                             \
    const char *t_a_ = (a), *t_b_ = (b);                                           \
    if (!t_a_ || !t_b_ || strcmp(t_a_, t_b_))                                      \
      t_fail(__FILE__, __LINE__, "ASSERT_STR_EQ(%s, %s): \"%s\" vs \"%s\"", #a, #b, \
             t_a_ ? t_a_ : "(null)", t_b_ ? t_b_ : "(null)");                      \
  } while (0)

/* The string contains `sub` (case-insensitive). */
#define ASSERT_STR_HAS(s, sub)                                                     \
  do {                                                                             \
    const char* t_s_ = (s);                                                        \
    if (!t_s_ || !t_contains(t_s_, (sub)))                                         \
      t_fail(__FILE__, __LINE__, "ASSERT_STR_HAS(%s, \"%s\"): \"%s\"", #s, (sub),   \
             t_s_ ? t_s_ : "(null)");                                              \
  } while (0)

/* An fco call succeeds; on failure print its code, name and fco_last_error. */
#define ASSERT_OK(call)                                                            \
  do {                                                                             \
    fco_result_t t_r_ = (call);                                                    \
    if (t_r_ != FCO_OK)                                                            \
      t_fail(__FILE__, __LINE__, "%s -> %d (%s): %s", #call, (int)t_r_,            \
             fco_result_string(t_r_), fco_last_error(NULL));                       \
  } while (0)

/* An fco call returns exactly `code`. */
#define ASSERT_RES(call, code)                                                     \
  do {                                                                             \
    fco_result_t t_r_ = (call), t_w_ = (code);                                     \
    if (t_r_ != t_w_)                                                              \
      t_fail(__FILE__, __LINE__, "%s -> %d (%s), want %d (%s); last error: %s",    \
             #call, (int)t_r_, fco_result_string(t_r_), (int)t_w_,                 \
             fco_result_string(t_w_), fco_last_error(NULL));                       \
  } while (0)

/* The last error message of `comm` (NULL: this thread's) names `word` (a whole word, e.g.
 * the argument: "count" matches "count is 0", not "accounting"). */
#define ASSERT_MSG(comm, word)                                                     \
  do {                                                                             \
    const char* t_m_ = fco_last_error(comm);                                       \
    if (!t_m_ || !t_contains_word(t_m_, (word)))                                   \
      t_fail(__FILE__, __LINE__, "fco_last_error(%s) does not name \"%s\": \"%s\"", \
             #comm, (word), t_m_ ? t_m_ : "(null)");                              \
  } while (0)

/* ---- seeds and input values ------------------------------------------------------------ */
/* The run's seed: FCO_TEST_SEED or fresh random; printed once. Call first in main(). */
uint64_t t_seed_init(void);
/* A new seed from the run's sequence (reproducible from the run's seed). */
uint64_t t_next_seed(void);
uint64_t t_mix(uint64_t x); /* splitmix64 finaliser */
/* Input element i of `rank`: an integer in [-A, A] with A = min(16, 128 / nranks), so every
 * partial sum of up to 128 / A ranks is an integer of magnitude <= 128: exact in bf16. */
int t_val(uint64_t seed, int rank, size_t i, int nranks);
/* Σ_r t_val(seed, r, i, nranks). */
int t_sum(uint64_t seed, size_t i, int nranks);

/* ---- dtypes ---------------------------------------------------------------------------- */
float t_half_to_f32(uint16_t h);
uint16_t t_f32_to_half(float f);
float t_bf16_to_f32(uint16_t h);
uint16_t t_f32_to_bf16(float f);
float t_get_elem(fco_dtype_t dtype, const void* buf, size_t i);
void t_set_elem(fco_dtype_t dtype, void* buf, size_t i, float v);
/* Fill host buf with t_val(seed, rank, ., nranks) converted to dtype. */
void t_fill_input(fco_dtype_t dtype, void* buf, size_t count, uint64_t seed, int rank, int nranks);

/* ---- transports and worlds ------------------------------------------------------------- */
/* FCO_TRANSPORT (nccl | local | cpu), cpu when unset; exits 1 on a bad value. */
fco_transport_t t_transport(void);
/* Ranks a world of `t` can have here: cpu 64; local 8 with a GPU; nccl min(GPUs, 8);
 * 0 when the build or machine cannot run it. */
int t_max_ranks(fco_transport_t t);
/* The largest world a test's rank loop runs: t_max_ranks(t), at most FCO_TEST_MAX_RANKS (default
 * 4, 1..8; 8 for the scale-up runs of 4 and 8 GPUs). */
int t_test_max_ranks(fco_transport_t t);
int t_test_rank_cap(void); /* FCO_TEST_MAX_RANKS as used above (default 4) */
int t_quick(void);          /* FCO_TEST_QUICK: 1 shorter runs, 0 / unset full; else said, full */
/* The end of a test's main: says which worlds max + 1..cap (cap: usually t_test_rank_cap())
 * the transport could not run, prints PASS; returns 0 (the exit code). */
int t_pass(fco_transport_t t, int max, int cap);
/* Skip (77) when a world of `n` ranks of transport t cannot run here. */
void t_require_ranks(fco_transport_t t, int n);
int t_is_gpu(fco_transport_t t);

typedef struct {
  int n;
  fco_transport_t transport;
  fco_comm_t comms[T_MAX_RANKS];
} t_world_t;

/* fco_comm_init_all for n ranks on transport t (devs NULL). cfg may be NULL; its transport
 * field is overridden with t. Returns the library's result (comms zeroed on failure). */
fco_result_t t_world_init(t_world_t* w, fco_transport_t t, int n, const fco_config_t* cfg);
/* Destroy every rank (order: forward, or reverse when `reverse`), checking each returns OK. */
void t_world_destroy(t_world_t* w, int reverse);
/* CUDA device of `rank` in a world made by t_world_init (-1 on cpu). */
int t_rank_device(fco_transport_t t, int rank);

/* Memory where rank's operations can read it: host malloc on cpu, cudaMalloc on `device`
 * for GPU transports. Every helper exits(1) on failure. */
void* t_alloc(fco_transport_t t, int device, size_t bytes);
void t_free(fco_transport_t t, int device, void* p);
void t_put(fco_transport_t t, int device, void* dst, const void* host_src, size_t bytes);
void t_get(fco_transport_t t, int device, void* host_dst, const void* src, size_t bytes);
void t_memset(fco_transport_t t, int device, void* dst, int byte, size_t bytes);
/* Wait for all work on every device the world uses (no-op on cpu). */
void t_sync(const t_world_t* w);
/* cudaDeviceSynchronize(device) (no-op on cpu). */
void t_sync_device(fco_transport_t t, int device);
/* Rank r's device state (fco_comm_device_state; GPU transports): read / write `bytes` at byte
 * `offset` of its fco_dev_rank_t (src/cuda/dev.h), for the tests that put a world at an epoch
 * or corrupt its table. */
void t_dev_state_get(const t_world_t* w, int r, size_t offset, void* dst, size_t bytes);
void t_dev_state_put(const t_world_t* w, int r, size_t offset, const void* src, size_t bytes);
/* Every rank's device epoch (calls run) set to e. */
void t_world_set_epoch(const t_world_t* w, uint64_t e);

/* ---- allreduce helpers ----------------------------------------------------------------- */
/* Per-rank buffers of one allreduce: count elements (+ T_GUARD guard bytes) per buffer. */
typedef struct {
  size_t count;
  fco_dtype_t dtype;
  int inplace;
  void* in[T_MAX_RANKS];
  void* out[T_MAX_RANKS]; /* == in when inplace */
  void* a_in[T_MAX_RANKS];  /* the allocations */
  void* a_out[T_MAX_RANKS];
  size_t max_bytes;         /* of each allocation */
} t_ar_bufs_t;

/* Allocate (room for max_count elements of 4 bytes + guard per rank). */
void t_ar_alloc(const t_world_t* w, t_ar_bufs_t* b, size_t max_count);
void t_ar_free(const t_world_t* w, t_ar_bufs_t* b);
/* Prepare one call: inputs from seed, outputs poisoned (T_POISON), guards set. */
void t_ar_prepare(const t_world_t* w, t_ar_bufs_t* b, size_t count, fco_dtype_t dtype,
                  int inplace, uint64_t seed);
/* Issue the allreduce for every rank in one fco_group_start/end; the first failure. */
fco_result_t t_ar_run(const t_world_t* w, const t_ar_bufs_t* b, int impl);
/* The same on per-rank streams (streams[r]; NULL: the default stream). */
fco_result_t t_ar_run_on(const t_world_t* w, const t_ar_bufs_t* b, int impl,
                         void* const* streams);
/* Rank r's call alone (outside a group: a thread per rank). */
fco_result_t t_ar_run_rank(const t_world_t* w, const t_ar_bufs_t* b, int r, int impl,
                           void* stream);
/* After t_sync: every element of every rank's output equals Σ_r t_val, the outputs are
 * bit-identical across ranks, guards untouched, inputs unchanged (out of place). Prints the
 * first mismatches; returns the number of wrong elements (0 = correct). */
size_t t_ar_check(const t_world_t* w, const t_ar_bufs_t* b, uint64_t seed);
/* The same with every expected element multiplied by `scale` (chains of in-place calls). */
size_t t_ar_check_scaled(const t_world_t* w, const t_ar_bufs_t* b, uint64_t seed, double scale);
/* Every rank's output is still poison and its guard intact; returns the bytes that changed. */
size_t t_ar_check_untouched(const t_world_t* w, const t_ar_bufs_t* b);

/* ---- tuning knobs (FCO_* environment variables) ------------------------------------------ */
/* A test part that needs a knob: t_knob_set(name, value) (value NULL: unset it), then
 * t_knob_reset(name) when the part ends, which puts back what the caller's environment held
 * when the test first touched that knob (unset if nothing). So a knob set for a whole run
 * (`FCO_GEMV_PDL=0 tests/run.sh`) holds again after every part that changed it. Main thread
 * only; at most 64 knobs a program. */
void t_knob_set(const char* name, const char* value);
void t_knob_reset(const char* name);

/* ---- processes and time ------------------------------------------------------------------ */
/* Fork n children; child i runs fn(i, arg) and exits with its return value (or 1 when it
 * fails an ASSERT). The parent waits at most timeout_s, kills the children still running
 * (SIGKILL, by pid) and stores each exit status in status[i] (-1 killed or crashed). */
void t_fork_run(int n, int (*fn)(int idx, void* arg), void* arg, int timeout_s, int* status);
double t_now_ms(void);
/* GPUs this process could use, counted in a forked child (a process must not initialise CUDA
 * before it forks ranks that use it); 0 without CUDA or driver. */
int t_fork_gpu_count(void);
/* In a forked rank of a multi-process nccl test: rank `rank` of an nranks-rank nccl
 * communicator on device `rank` with cfg.timeout_ms = timeout_ms; rank 0 makes the unique id
 * and writes it to fd[1] once per other rank, which read it from fd[0] (a pipe made before the
 * fork). */
fco_comm_t t_nccl_join(int rank, int nranks, const int fd[2], int timeout_ms);

/* Issue an allreduce (count elements, f32, `impl`) on rank 0 of a 2-rank world whose rank 1
 * never takes part: cpu and nccl: rank 0's op alone, outside a group; local: both ops in a group
 * with the test hook FCO_FAULT_SKIP_RANK=1 (the local transport leaves rank 1 out of the
 * launch). Waits for the result (GPU: stream sync, then fco_comm_get_async_error) and returns it;
 * *ms = time from the call to the result. */
fco_result_t t_lone_rank0_allreduce(t_world_t* w, int impl, size_t count, double* ms);

#endif /* FCO_TEST_H_ */
