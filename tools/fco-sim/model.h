/*
 * model.h — what the three models (model_dlrm.c, model_decode.c, model_moe.c) share: kernel
 * cost (calibration or roofline), per-rank jitter, the baseline collectives (measured when the
 * calibration was taken at the simulated scale), fused producer ops over all ranks, and the
 * result row.
 *
 * Time is simulated per rank: each rank has a clock; a compute kernel advances it (times the
 * rank's jitter draw for that kernel); a collective starts when the last rank arrives, so
 * stragglers cost everyone. The iteration time is the latest clock. The compute-only reference
 * is the baseline run again with every communication free (params.comm_off); the share of
 * exposed communication of a schedule is (its time - that reference) / its time.
 */
#ifndef FCO_SIM_MODEL_H_
#define FCO_SIM_MODEL_H_

#include "calib.h"
#include "config.h"
#include "net.h"
#include "overlap.h"
#include "params.h"

#define SIM_MAX_SOURCES 32
typedef struct {
  char kernel[40];
  char source[200];
} sim_source_t;
/* Where each kernel's time came from ("roofline, not measured", "measured (...)"). */
typedef struct {
  int num;
  sim_source_t s[SIM_MAX_SOURCES];
} sim_sources_t;
void sim_sources_add(sim_sources_t* s, const char* kernel, const char* source);

#define SIM_MAX_PARTS 12
typedef struct {
  const char* name;
  double base_us, fused_us; /* longest instance over ranks of that phase */
} sim_part_t;

typedef struct {
  int nodes, gpn, ranks;
  double batch; /* samples per GPU (dlrm), tokens in the step (decode), tokens per GPU (moe) */
  double base_us, fused_us, compute_us;
  double speedup, saved_pct, exp_base_pct, exp_fused_pct;
  int num_parts;
  sim_part_t part[SIM_MAX_PARTS];
  char algo[96]; /* collectives the baseline used, e.g. "A2A a2a-hier/Simple, AR tree/LL128" */
  char note[200];
  int skipped; /* the row does not apply (note says why) */
} sim_row_t;

typedef struct {
  sim_params_t p;
  const sim_calib_t* calib; /* NULL: roofline only */
  sim_sources_t* sources;   /* NULL: not recorded */
} sim_env_t;

/* max(flops / peak, bytes / HBM) in us (no fixed cost). */
double sim_roofline_us(const sim_params_t* p, double flops, double bytes);
/* A GEMM [M x K] x [K x N] in eb-byte elements: roofline + kernel_us. Records its source. */
double sim_gemm_us(const sim_env_t* env, double M, double N, double K, double eb);
/* A bandwidth-bound kernel moving `bytes` through HBM (efficiencies already applied by the
 * caller, described by `how` in the source note): the calibration row of `calib_op` nearest
 * to shape `want` (may be NULL) and `calib_bytes` (fco-bench's bytes column; see
 * sim_calib_compute), its compute_us scaled, when the file has one; else bytes / HBM. No
 * kernel_us. */
double sim_mem_kernel_us(const sim_env_t* env, const char* kernel, const char* calib_op,
                         const sim_calib_shape_t* want, double calib_bytes, double bytes,
                         double eb, const char* how);

/* Per-rank multiplier of kernel `phase` on `rank`: 1 + jitter * N(0, 1), at least 0.5;
 * deterministic in (seed, phase, rank), so baseline and fused runs see the same draws. */
double sim_jitter(const sim_params_t* p, int phase, int rank);

/* The baseline allreduce: measured (calibration, interpolated by bytes) when it was taken on
 * one node of exactly this many GPUs, else the NCCL model. */
sim_coll_t sim_baseline_allreduce(const sim_env_t* env, sim_topo_t t, double bytes, double eb);

/* Fused producer op on every rank (rank-1 traffic u, v) of kernel `kind` (SIM_FUSED_*,
 * overlap.h): rank r starts at start[r] and computes compute[r] us in tiles[r] tiles. kend[r]
 * (may be NULL): when rank r's kernel ends. Returns when every byte has arrived everywhere
 * (also bounded below by each receiver's incoming bytes over its links, then landed: after
 * them, or alongside them for a kernel that lands as units arrive). *longest: the longest
 * single-rank kernel (may be NULL). */
double sim_fused_all(const sim_params_t* p, int kind, sim_topo_t t, const double* u,
                     const double* v, const double* start, const double* compute,
                     const double* tiles, double* kend, double* longest);

/* The tile of fco's fused embedding kernel (src/cuda/embedding_alltoall.cuh, since ed0108a) on
 * a rank holding `tables` tables of rows of `dim` elements of eb bytes: C = 8 warps x 32/G x 4
 * bags, G = lanes per bag = the power of two >= the row's 16-byte vectors, at most 32; a tile
 * covers nt = min(tables, 32/G) tables x ns = floor(C / nt) samples (D = 128 bf16, 8 tables:
 * 2 tables x 32 samples). tile_rows when set: 1 table x tile_rows samples. */
void sim_ea_tile(const sim_params_t* p, double dim, double eb, double tables, double* nt,
                 double* ns);
/* Tiles of that kernel for one destination of `samples` samples:
 * ceil(tables / nt) x ceil(samples / ns); 0 without tables or samples. */
double sim_ea_tiles(const sim_params_t* p, double dim, double eb, double tables, double samples);

/* Compute time of fco's fused GEMV tile loop (y [M x N] = x [M x K] W^T, K this rank's): the
 * weights stream as fast as a GEMV alone (`gemv_us`, without kernel_us), but every tile of
 * gemv_tile_cols columns re-reads all of x from L2: ceil(N / cols) x M x K x eb bytes at
 * gemv_x_gbs, which bounds it at large M. The larger of the two. */
double sim_fused_gemv_us(const sim_params_t* p, double gemv_us, double M, double N, double K,
                         double eb);

/* Latest of n clocks. */
double sim_max(const double* x, int n);

/* Fill speedup, saved and exposed shares from base/fused/compute times. */
void sim_row_finish(sim_row_t* row);
void sim_row_part(sim_row_t* row, const char* name, double base_us, double fused_us);
/* Append "what algo/proto" to row->algo (nothing for SIM_ALGO_NONE). */
void sim_row_algo(sim_row_t* row, const char* what, sim_coll_t c);

/* The models. Each fills `row` for one world (t) and per-GPU batch / tokens `batch` (<= 0:
 * the configuration's). Return 0, or -1 with a message in err (bad combination). */
int sim_run_dlrm(const sim_env_t* env, const sim_config_t* c, sim_topo_t t, double batch,
                 sim_row_t* row, char* err, size_t err_len);
int sim_run_decode(const sim_env_t* env, const sim_config_t* c, sim_topo_t t, double batch,
                   sim_row_t* row, char* err, size_t err_len);
int sim_run_moe(const sim_env_t* env, const sim_config_t* c, sim_topo_t t, double batch,
                sim_row_t* row, char* err, size_t err_len);

#endif /* FCO_SIM_MODEL_H_ */
