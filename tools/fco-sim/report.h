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
} sim_report_t;

void sim_print_header(FILE* f, const sim_report_t* r);
void sim_print_table(FILE* f, const sim_report_t* r, const sim_row_t* rows, int n);
/* 0 ok, -1 with a message in err. */
int sim_write_json(const char* path, const sim_report_t* r, const sim_row_t* rows, int n,
                   char* err, size_t err_len);
int sim_write_svg(const char* path, const sim_report_t* r, const sim_row_t* rows, int n,
                  char* err, size_t err_len);

/* One calibration row against the model. */
typedef struct {
  char op[32], impl[24], dtype[8], shape[64];
  double measured_us, model_us, error_pct;
  int fused;  /* an fco fused impl (else the NCCL baseline, or NCCL's collective alone) */
  int fitted; /* the model's constants were fitted to rows of this kind */
} sim_val_row_t;

typedef struct {
  int num;
  sim_val_row_t* row;
  int skipped;                      /* rows with no model (impl "auto", unknown impls)  */
  double max_err_nccl, max_err_fco; /* max |error| in % over baseline / fused rows       */
  char note[160];                   /* why nothing was modelled, if so                  */
} sim_val_t;

/* Model the rows of c at their measured scale (1 node x c->gpus, nccl transport):
 *   allreduce           impl 0: NCCL model; oneshot: sim_fco_oneshot_allreduce
 *   embedding_alltoall  comm_us: NCCL all-to-all model; impl 0: measured lookup (compute_us)
 *                       + model all-to-all + permute; fused impls: the tile pipeline on the
 *                       measured lookup time
 *   gemv_allreduce      impl 0: measured GEMM + NCCL model; oneshot: the tile pipeline
 * So for the fused operators it is the communication and overlap model that is tested, on
 * measured compute. 0 ok, -1 out of memory. */
int sim_validate(const sim_params_t* p, const sim_calib_t* c, sim_val_t* v);
void sim_val_free(sim_val_t* v);
void sim_print_validation(FILE* f, const sim_params_t* p, const sim_calib_t* c,
                          const sim_val_t* v);

#endif /* FCO_SIM_REPORT_H_ */
