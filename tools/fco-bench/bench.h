/*
 * bench.h — what the files of fco-bench share: options, the run context (communicators,
 * streams, timing resources, buffer pools), result rows, and the op registry.
 *
 * An op (op_<name>.c) fills a bench_op_t: how to set up one shape, issue one iteration for
 * every rank, check the result, and print its table. main.c lists the ops in kOps[] and drives
 * the sweep (sizes × dtypes × impls); bench_dev.c times iterations (CUDA events, CUDA graphs, or
 * clock_gettime on the cpu transport); bench_util.c parses, prints tables and writes the JSON.
 * Only the public API (fco.h) is used, plus the CUDA runtime under FCO_HAVE_CUDA.
 */
#ifndef FCO_BENCH_H_
#define FCO_BENCH_H_

#include <stddef.h>
#include <stdio.h>

#include "fco.h"

/* libfco's on/off knob parser (src/core/internal.h; exported by libfco, not in fco.h, as
 * tests/common/test.h declares it too): 1 on, 0 off, dflt when unset or empty, anything else
 * said once on stderr ("is not 0 (off) or 1 (on): ignored, as if unset") and dflt. */
int fco_env_flag(const char* name, int dflt);
/* libfco's string knobs (src/core/error.c, exported, not in fco.h): the index of the value among
 * choices (NULL-terminated, case-insensitive), dflt when unset, empty or not among them (said). */
int fco_env_choice(const char* name, const char* const* choices, int dflt);
/* libfco's rule for impl 0's GEMMs (src/ops/gemm_alltoall.h, exported, not in fco.h): the rows m
 * of every expert when impl 0 runs them as one strided batched GEMM, else 0 (also when
 * blas_loop: FCO_GA_BLAS=loop, which the library reads once a call). */
int64_t fco_ga_batched_rows(const int32_t* counts, int E, int P, int64_t n, int blas_loop);

#define BENCH_VERSION "0.1.0"
#define BENCH_MAX_RANKS 64
#define BENCH_MAX_IMPLS 16 /* columns: impls 0..N-1 plus AUTO */
#define BENCH_MAX_SETS 64  /* rotating input sets per shape */
#define BENCH_MAX_ROUNDS 64  /* -R */
#define BENCH_MIN_GRAPH_OPS 8 /* iterations captured in one CUDA graph, at least */

/* Bandwidths for the floor column (GB/s = 1e9 B/s), from DESIGN.md's measurements. The HBM's
 * is measured at start on GPU transports (ctx->hbm_gbps: a device-to-device copy, bytes read and
 * written; the H200's 4300 and the H100's ~3000 differ by 1.4×); BENCH_HBM_GBPS, the H200's,
 * stands in where nothing was measured (cpu transport, a failed measurement). */
#define BENCH_NVLINK_GBPS 364.0 /* SM stores to a peer, per direction, both directions busy */
#define BENCH_HBM_GBPS 4300.0   /* H200 HBM copy */

typedef struct {
  const char* op_name;
  size_t min_bytes, max_bytes; /* 0 = transport default */
  size_t step_factor;          /* multiplicative step (>= 2); 0 = default */
  size_t step_bytes;           /* additive step (-i); 0 = use step_factor */
  int iters, warmup;           /* < 0 = transport default */
  int rounds;                  /* -R: columns timed round after round, median over rounds */
  unsigned dtype_mask;         /* bit (1 << fco_dtype_t); 0 = all */
  int dtype_given;             /* -d was given (an op's own default dtypes apply without it) */
  const char* impl_spec;       /* -D as given: "all", "1", "oneshot", "0,auto" */
  int graph;                   /* -G: capture iterations into a CUDA graph */
  int nranks;                  /* -g; 0 = transport default */
  fco_transport_t transport;   /* -t; AUTO until resolved */
  int check;                   /* -c */
  const char* json_path;       /* -J */
  double link_gbps;            /* -L; <= 0 = default of the transport */
  const char* machine;         /* -M; NULL = env FCO_MACHINE, else derived */
} bench_opts_t;

typedef struct bench_ctx bench_ctx_t;
typedef struct bench_op bench_op_t;

/* One row of a table: one shape and dtype, every selected impl. Times < 0 mean "-". */
typedef struct {
  const bench_op_t* op;
  fco_dtype_t dtype;
  size_t bytes;              /* message bytes per rank (size column) */
  size_t count;              /* elements per rank (count column) */
  char shape_json[160];      /* the op's "shape" object for the JSON, e.g. {"count":4,"bytes":8} */
  double time_us[BENCH_MAX_IMPLS]; /* indexed like ctx->impls */
  long long wrong[BENCH_MAX_IMPLS]; /* < 0: not checked */
  char plan[BENCH_MAX_IMPLS][256]; /* fco_last_plan of rank 0 after the impl's timed calls (the
                                    * library keeps up to 256 bytes: FCO_PLAN_LEN) */
  double floor_us;           /* < 0: none */
  double peak_tflops;        /* < 0: none; the GEMM rate the floor assumes (gemm_alltoall) */
  double compute_us;         /* < 0: the op has no separate compute part (null) */
  double comm_us;            /* < 0: null */
  double both_us;            /* < 0: null; compute and comm alone issued at once on two streams
                              * (no dependency between them: what perfect overlap could reach) */
} bench_row_t;

/* Issue iteration `iter` of the thing being timed, for every rank (one fco group). */
typedef fco_result_t (*bench_issue_fn)(bench_ctx_t* ctx, void* arg, int iter);

struct bench_op {
  const char* name;
  int num_impls;  /* impls 0..num_impls-1; the driver adds FCO_IMPL_AUTO */
  const char* (*impl_name)(bench_ctx_t* ctx, int impl);
  /* Prepare the shape for `bytes` per rank: buffers, inputs of every rotation set; fill the
   * row's bytes/count/shape_json. *state is the op's; FCO_ERR_UNSUPPORTED skips the row. */
  fco_result_t (*setup)(bench_ctx_t* ctx, size_t bytes, fco_dtype_t dtype, bench_row_t* row,
                        void** state);
  /* Time impl: reserve its workspace, then bench_time(...) → *us. */
  fco_result_t (*time)(bench_ctx_t* ctx, void* state, int impl, double* us);
  /* One run on freshly poisoned outputs, then compare: *wrong = wrong elements, all ranks. */
  fco_result_t (*check)(bench_ctx_t* ctx, void* state, int impl, long long* wrong);
  /* After every impl: floor, compute_us / comm_us (may time extra parts). */
  fco_result_t (*finish_row)(bench_ctx_t* ctx, void* state, bench_row_t* row);
  void (*teardown)(bench_ctx_t* ctx, void* state);
  /* Print the table of one dtype (most ops use bench_print_table). */
  void (*print_table)(FILE* f, bench_ctx_t* ctx, const bench_row_t* rows, int nrows);
  /* Optional: the op's own list of shapes instead of the -b/-e/-f byte sweep. Returns their
   * number and a malloc'd array of ids (*ids), each passed to setup() as `bytes`; 0 when
   * shapes_env selected none (a usage error), -1 out of host memory, -2 an env value out of
   * range (said on stderr: a usage error). */
  int (*shapes)(bench_ctx_t* ctx, size_t** ids);
  /* The env variable that picks or replaces shapes()'s list (named when it selects none, and
   * when -b/-e/-f/-i are given to an op that has one). */
  const char* shapes_env;
};

extern const bench_op_t bench_op_allreduce;
extern const bench_op_t bench_op_gemv_allreduce; /* op_gemv_allreduce.c */
extern const bench_op_t bench_op_embedding_alltoall; /* op_embedding_alltoall.c */
extern const bench_op_t bench_op_gemm_alltoall; /* op_gemm_alltoall.c */

struct bench_ctx {
  bench_opts_t opt;
  fco_transport_t transport; /* resolved: nccl, local or cpu */
  int nranks;
  fco_comm_t comms[BENCH_MAX_RANKS];
  int devs[BENCH_MAX_RANKS];
  int gpus_visible;          /* CUDA devices this process sees */
  int on_gpu;                /* nccl or local */
  int nstreams;              /* nccl: one per rank; local: one shared by the virtual ranks */
  void* streams[BENCH_MAX_RANKS];
  void** events[BENCH_MAX_RANKS]; /* per stream: iters + 1 timing events */
  void* fork_event;
  void* join_events[BENCH_MAX_RANKS];
  /* bench_time_both: a second stream per stream, forked and joined around each iteration;
   * while on_side, bench_stream() hands out the second streams. */
  void* side[BENCH_MAX_RANKS];
  void* side_fork[BENCH_MAX_RANKS];
  void* side_join[BENCH_MAX_RANKS];
  int on_side;
  size_t cache_bytes;        /* L2 (GPU) or last-level cache (CPU) that inputs must exceed */
  double hbm_gbps;           /* HBM rate of the floors and hbm% (bench_dev_init: measured on
                              * device devs[0], or FCO_BENCH_HBM_GBPS; BENCH_HBM_GBPS on cpu) */
  int hbm_measured;          /* 1 measured, 2 FCO_BENCH_HBM_GBPS, 0 the default */
  void* pool[BENCH_MAX_RANKS]; /* per rank: rotating buffers of the current shape */
  size_t pool_bytes;
  int impls[BENCH_MAX_IMPLS]; /* columns, in order; impls[0] == FCO_IMPL_BASELINE */
  int nimpls;
  /* Who explains the last failure: a rank (fco_last_error of its comm) or err_msg. */
  int err_rank;
  char err_msg[512];
};

/* ---- bench_dev.c: devices, buffers, timing --------------------------------------------- */
int bench_gpu_count(void);
void bench_gpu_name(int dev, char* buf, size_t n); /* "" when unknown */
fco_result_t bench_dev_init(bench_ctx_t* ctx);
void bench_dev_fini(bench_ctx_t* ctx);
void* bench_stream(bench_ctx_t* ctx, int rank);
/* Rotation: how many sets of `set_bytes` (per rank) make the footprint exceed 2× the cache. */
int bench_num_sets(const bench_ctx_t* ctx, size_t set_bytes);
/* Make ctx->pool[r] hold at least `bytes` on every rank (device memory on GPU transports). */
fco_result_t bench_pool_reserve(bench_ctx_t* ctx, size_t bytes);
fco_result_t bench_upload(bench_ctx_t* ctx, int rank, void* dst, const void* src, size_t bytes);
fco_result_t bench_download(bench_ctx_t* ctx, int rank, void* dst, const void* src, size_t bytes);
/* Copy within rank's memory (device-to-device on GPU transports), ordered on the rank's stream
 * and finished on return. */
fco_result_t bench_copy(bench_ctx_t* ctx, int rank, void* dst, const void* src, size_t bytes);
/* Fill with 0xff bytes: NaN in f32, f16 and bf16. Ordered before later work on the stream. */
fco_result_t bench_poison(bench_ctx_t* ctx, int rank, void* dst, size_t bytes);
fco_result_t bench_sync(bench_ctx_t* ctx);
/* Reserve workspace on every rank (before timing: a CUDA graph capture cannot grow it). */
fco_result_t bench_reserve(bench_ctx_t* ctx, size_t bytes);
/* Any asynchronous error on any rank? Sets err_rank. */
fco_result_t bench_poll(bench_ctx_t* ctx);
/* Median time of one iteration in µs: warm-up, then opt.iters timed iterations (CUDA events
 * per iteration; max over ranks' streams), or opt.iters replays of a CUDA graph holding
 * max(nsets, BENCH_MIN_GRAPH_OPS) iterations (time / iterations), or clock_gettime on cpu. */
fco_result_t bench_time(bench_ctx_t* ctx, bench_issue_fn fn, void* arg, int nsets, double* us);
/* bench_time of `first` and `second` issued at once on two streams per rank, nothing ordering
 * one after the other (`second` sees bench_stream() give the second streams): the "both"
 * column — what a perfect overlap of the two parts reaches on the GPU as it is (power cap and
 * SM sharing included). GPU only (on cpu: *us = −1). */
fco_result_t bench_time_both(bench_ctx_t* ctx, bench_issue_fn first, bench_issue_fn second,
                             void* arg, int nsets, double* us);

/* ---- bench_util.c: parsing, metadata, output -------------------------------------------- */
int bench_parse_size(const char* s, size_t* out);  /* "64M" → 67108864; 0 on success */
/* The decimal digits at s (no sign, no blank) → *v, *end just past them. 0: a value <= max;
 * 1: more than max (every digit still read: "99999999999999999999" is not clamped to a limit);
 * -1: no digit at s. */
int bench_parse_dec(const char* s, const char** end, unsigned long long max,
                    unsigned long long* v);
/* Drop an incomplete UTF-8 sequence at the end of s (a name cut at a buffer's size). */
void bench_utf8_trim(char* s);
/* Text for a '#' line, in place: control characters and bytes that are no UTF-8 as '?' (a
 * newline in -M started a line without the '#', which readers of the tables took for a row).
 * The JSON keeps them, escaped (U+FFFD for a byte that is no UTF-8). */
void bench_header_text(char* s);
double bench_median(double* v, int n);             /* sorts v */
double bench_now_s(void);                          /* CLOCK_MONOTONIC seconds */
void bench_date_iso(char* buf, size_t n);          /* UTC, 2025-01-31T12:00:00Z */
const char* bench_commit(void);
void bench_machine(const bench_ctx_t* ctx, char* buf, size_t n);
int bench_gpus_used(const bench_ctx_t* ctx);
const char* bench_impl_label(bench_ctx_t* ctx, const bench_op_t* op, int impl_idx);
/* Record a bench-side failure message (CUDA, memory): err_rank = -1. Returns code. */
fco_result_t bench_fail(bench_ctx_t* ctx, fco_result_t code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The last failure's message (the failing rank's fco_last_error, or the op's bench_fail text). */
const char* bench_error_msg(bench_ctx_t* ctx);
/* Print the last failure to stderr: "fco-bench: <what>: <result>: <message>". */
void bench_report(bench_ctx_t* ctx, fco_result_t r, const char* what);
/* Close the group the per-rank calls were issued in; the first failure wins (the group's own
 * failure is attributed to rank 0). */
fco_result_t bench_group_end(bench_ctx_t* ctx, fco_result_t first);
/* "# knobs: NAME=value ..." (value "default" when unset): the env knobs a table depends on. */
void bench_print_knobs(FILE* f, const char* const* names, size_t n);
/* The #wrong column and the end of a table row: the sum over the checked impls, "-" if none. */
void bench_print_wrong(FILE* f, const bench_ctx_t* ctx, const bench_row_t* r);
void bench_print_table(FILE* f, bench_ctx_t* ctx, const bench_row_t* rows, int nrows);
/* The JSON record to f (opened before the run: main.c), flushed; 0 on success. */
int bench_write_json(FILE* f, bench_ctx_t* ctx, const bench_row_t* rows, int nrows);

/* Host-side element conversions (exact for the small integers the checks use). */
float bench_half_to_float(unsigned short h);
unsigned short bench_float_to_half(float f);
float bench_bf16_to_float(unsigned short b);
unsigned short bench_float_to_bf16(float f);

#endif /* FCO_BENCH_H_ */
