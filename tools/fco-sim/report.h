/*
 * report.h — fco-sim's outputs: the nccl-tests-style table ('#' metadata lines, fixed-width
 * columns with units on a second header line), the -J JSON record, the SVG plot of speedup
 * against scale, and the validation table (model against the calibration's measurements).
 */
#ifndef FCO_SIM_REPORT_H_
#define FCO_SIM_REPORT_H_

#include <stdio.h>

#include "model.h"

#define FCO_SIM_VERSION "0.1.0"

typedef struct {
  int model; /* sim_model_t */
  const sim_config_t* cfg;
  const sim_calib_t* calib; /* NULL: none */
  const sim_params_t* p;
  const sim_sources_t* sources;
  int strong; /* DLRM: global batch fixed (strong scaling) */
  int series; /* rows come world by world, `series` batches (--batch list) each: the SVG draws
               * one line per batch, with a legend; 0 or 1: one line */
} sim_report_t;

void sim_print_header(FILE* f, const sim_report_t* r);
void sim_print_table(FILE* f, const sim_report_t* r, const sim_row_t* rows, int n);
/* 0 ok, -1 with a message in err. */
int sim_write_json(const char* path, const sim_report_t* r, const sim_row_t* rows, int n,
                   char* err, size_t err_len);
/* Speedup against nodes (dlrm) or GPUs, log2 axis; one line per batch (r->series). */
int sim_write_svg(const char* path, const sim_report_t* r, const sim_row_t* rows, int n,
                  char* err, size_t err_len);

/* What a validation row tests (validate.c): the model's constants were fitted on it (fit),
 * a fused row outside the fit set (holdout), or nothing was fitted on rows like it (pred). */
enum { SIM_VAL_PRED = 0, SIM_VAL_FIT = 1, SIM_VAL_HOLDOUT = 2 };
const char* sim_val_kind_name(int kind);

/* One calibration row against the model. */
typedef struct {
  char op[32], impl[24], dtype[8], shape[64];
  double measured_us, model_us, error_pct;
  int fused; /* an fco fused impl (else the NCCL baseline, or NCCL's collective alone) */
  int kind;  /* SIM_VAL_* */
} sim_val_row_t;

typedef struct {
  int num;
  sim_val_row_t* row;
  int skipped;                      /* rows with no model (impl "auto", unknown impls)  */
  int unmodelled_f32;               /* of them: f32 fused GEMV rows                      */
  double max_err_nccl, max_err_fco; /* max |error| in % over baseline / fused rows       */
  double max_err_fit, max_err_holdout; /* the same over fused fit / hold-out rows        */
  char note[160];                   /* why nothing was modelled, if so                  */
} sim_val_t;

/* Model the rows of c at their measured scale (1 node x c->gpus, nccl transport):
 *   allreduce           impl 0: NCCL model; oneshot: sim_fco_oneshot_allreduce
 *   embedding_alltoall  comm_us: NCCL all-to-all model; impl 0: measured lookup (compute_us)
 *                       + model all-to-all + permute; fused impls: sim_fused_time of the
 *                       kernel's tiles on the measured lookup time (interference, signal
 *                       stalls, landing copy)
 *   gemv_allreduce      impl 0: measured GEMM + NCCL model; oneshot (2-byte dtypes):
 *                       sim_fused_time on sim_fused_gemv_us of the measured GEMM time, fp32
 *                       partials to the peer, then the local sum
 * So for the fused operators the communication, overlap and fused-kernel terms are tested, on
 * measured compute. 0 ok, -1 out of memory. */
int sim_validate(const sim_params_t* p, const sim_calib_t* c, sim_val_t* v);
void sim_val_free(sim_val_t* v);
void sim_print_validation(FILE* f, const sim_params_t* p, const sim_calib_t* c,
                          const sim_val_t* v);

/* The grid `fco-sim fit` searches (all three at once). */
#define SIM_FIT_INTERF_STEP 0.05
#define SIM_FIT_INTERF_STEPS 30 /* 0 .. 1.5 */
#define SIM_FIT_SIG_STEP 0.05
#define SIM_FIT_SIG_STEPS 60 /* 0 .. 3 us */
#define SIM_FIT_X_MIN 2000.0
#define SIM_FIT_X_STEP 200.0
#define SIM_FIT_X_STEPS 50 /* 2000 .. 12000 GB/s */

typedef struct {
  double interf, sig_us, x_gbs; /* the best grid point */
  double rms_pct;               /* RMS of the fit rows' % errors there */
  int rows;                     /* fit rows found (0: none) */
} sim_fit_t;

/* Choose fused_interf, fco_sig_us and gemv_x_gbs on the fit-set rows of the calibrations
 * (validate.c: in_fit_set) by a grid search minimising the RMS of their % errors, every other
 * parameter as in p. 0 ok, -1 out of memory. */
int sim_fit_fused(const sim_params_t* p, const sim_calib_t* const* c, int nc, sim_fit_t* out);
void sim_print_fit(FILE* f, const sim_params_t* p, const sim_calib_t* const* c, int nc,
                   const sim_fit_t* fit);

#endif /* FCO_SIM_REPORT_H_ */
