/*
 * calib.h — calibration files: the JSON fco-bench writes with -J (tools/fco-bench/README.md):
 *   {"tool":"fco-bench","commit":…,"machine":…,"gpus":…,"transport":…,"results":[
 *     {"op":…,"shape":{"count":…,"bytes":…},"dtype":…,"impl":…,"impl_id":…,"time_us":…,
 *      "baseline_us":…,"speedup":…,"floor_us":…,"compute_us":…|null,"comm_us":…,"wrong":0}, …]}
 * Rows with wrong != 0 (their time is of a wrong kernel) or time_us null (impl unsupported)
 * are dropped; rows of impl "auto" (impl_id -1) are kept but never used. Allreduce rows need
 * shape.bytes or shape.count; operator rows (embedding_alltoall, gemv_allreduce, ...) carry
 * their dimensions, kept as numbers (sim_calib_shape).
 *
 * Lookups: collectives interpolate linearly in bytes between the measured sizes around the
 * request (outside the range: the nearest two, never below the smallest measured time);
 * compute kernels take the measured row of the nearest shape (sim_calib_compute) and scale
 * its compute_us by the work ratio. Every lookup says where its number came from.
 */
#ifndef FCO_SIM_CALIB_H_
#define FCO_SIM_CALIB_H_

#include <stddef.h>

#define SIM_CALIB_SHAPE_KEYS 12
/* Bounds of a file's integer fields ("path:line: field is X: must be ..." beyond them):
 * "gpus" (one fco-bench run; 0, fco-bench's cpu transport, is refused as such), "impl_id"
 * (-1: auto) and the shape's counts the models read (count, bytes, B, tables_per_gpu, D, L, M,
 * N, K, K_r: positive integers). */
#define SIM_CALIB_MAX_GPUS 1024
#define SIM_CALIB_MAX_IMPL 1000000
#define SIM_CALIB_MAX_DIM 1e15

typedef struct {
  char op[32];
  char dtype[8];
  char impl[24];
  int impl_id;
  double bytes;
  double time_us;
  double compute_us; /* < 0: null */
  double comm_us;    /* < 0: null */
  int line;          /* in the file */
  int num_shape;     /* numeric members of "shape" (B, D, M, N, ...) */
  char shape_key[SIM_CALIB_SHAPE_KEYS][16];
  double shape_val[SIM_CALIB_SHAPE_KEYS];
  char shape_tag[32]; /* its string members, comma-separated ("uniform", "zipf") */
} sim_calib_entry_t;

typedef struct {
  char path[256];
  char commit[48];
  char machine[48];
  char transport[16];
  char date[32];
  int gpus;
  int num;
  int dropped; /* rows with wrong != 0 or no time */
  sim_calib_entry_t* e;
} sim_calib_t;

/* Load a file; 0 ok, else a message "path:line: why" in err (c is left empty). */
int sim_calib_load(const char* path, sim_calib_t* c, char* err, size_t err_len);
/* The same from text already in memory (name used in messages). */
int sim_calib_parse(const char* text, const char* name, sim_calib_t* c, char* err,
                    size_t err_len);
void sim_calib_free(sim_calib_t* c);

/* Numeric member `key` of a row's shape, or `def` when absent. */
double sim_calib_shape(const sim_calib_entry_t* e, const char* key, double def);

/* Element size of a dtype name (f32 4, f16/bf16 2, f64 8, ...), 0 unknown. */
int sim_dtype_bytes(const char* dtype);

/* Measured collective time of `op` (e.g. "allreduce") at `bytes` per rank, for the unfused
 * baseline (fused = 0: impl_id 0) or the fastest fused impl (fused = 1: min over impl_id >= 1
 * per size), dtype of elem_bytes (bf16 preferred among 2-byte types). 1 and *us when the file
 * has such rows, else 0. `note` (may be NULL) says how the number was obtained. */
int sim_calib_collective(const sim_calib_t* c, const char* op, int fused, int elem_bytes,
                         double bytes, double* us, char* note, size_t note_len);

/* The shape of a compute query, where the operator's rows carry one (embedding_alltoall):
 * bytes of one gathered row (D x esize) and rows pooled per bag (L); 0: not known. */
typedef struct {
  double row_bytes, bag;
} sim_calib_shape_t;

/* Measured compute time of `op` for `work_bytes`, in fco-bench's bytes column's terms
 * (embedding_alltoall: bytes gathered per rank; gemv_allreduce: weight bytes per rank): the
 * row with a compute_us nearest to `want` (may be NULL: bytes only), scaled by work_bytes /
 * its work bytes. Nearest, in this order, each deciding only among the rows tied on the
 * ones before: (1) with `want`, a uniform (or untagged) index distribution, as the models'
 * hashed lookups are; (2) the row bytes, D x esize, in log: the access granularity, the
 * first thing a gather's rate depends on (h200-x2: 32-128 B rows at 0.17-0.58 of the 256 B
 * rows' rate); (3) the bag length L, in log: a bag's fixed cost (indices, pooled write) is
 * spread over its rows (D 64: L 1 at 0.31 of L 8's rate); (4) the work bytes, in log:
 * occupancy; then the first row in the file. A row without D or L ranks after every row
 * with them. */
int sim_calib_compute(const sim_calib_t* c, const char* op, int elem_bytes,
                      const sim_calib_shape_t* want, double work_bytes, double* us, char* note,
                      size_t note_len);

#endif /* FCO_SIM_CALIB_H_ */
