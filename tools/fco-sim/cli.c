/*
 * cli.c — argument parsing and the sweep of fco-sim (see main.c, README.md). No getopt: the
 * function is re-entrant so tests can call it repeatedly in one process.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define MAX_LIST 64
/* The largest world: every GPU is a rank with its own clock and its own fused pipeline (up to
 * SIM_MAX_CHUNKS waves), so time grows with GPUs x waves; at 2^17 GPUs the shipped
 * configurations take well under a second, the largest tile counts tens of seconds. */
#define MAX_GPUS 131072

static void usage(FILE* f) {
  fprintf(f,
          "usage: fco-sim <command> [options]\n"
          "commands:\n"
          "  dlrm      one DLRM training iteration (fused embedding + All-to-All)\n"
          "  decode    one tensor-parallel decode step (fused GEMV + AllReduce)\n"
          "  moe       one MoE layer forward (fused GEMM + All-to-All combine)\n"
          "  validate  the models against the calibration's measured rows (fit / hold-out)\n"
          "  fit       choose the fused-operator constants on the fit set of --calib F1,F2,...\n"
          "  params    every model parameter: flag, value (default unless set), unit, meaning\n"
          "options (validate and fit take only --calib and --<param>, params only --<param>):\n"
          "  --config F          model configuration (tools/fco-sim/configs/*.cfg)\n"
          "  --calib F           fco-bench -J output (calib/*.json); optional for models\n"
          "  --nodes LIST        node counts: 1,2,4 or a range 1-128 (A, 2A, 4A, ..., B;\n"
          "                      A and B powers of two; default dlrm 1-128, moe 1-32);\n"
          "                      at most 64 values and 131072 GPUs\n"
          "  --gpus-per-node G   GPUs per node (default 8)\n"
          "  --gpus LIST         total GPUs instead of --nodes (default for decode: 1-8)\n"
          "  --batch LIST        dlrm: samples per GPU; decode: tokens; moe: tokens per GPU\n"
          "                      (default: the configuration's)\n"
          "  --global-batch N    dlrm: fix the global batch instead (strong scaling), <= 1e12\n"
          "  -J F                write every result as JSON\n"
          "  --svg F             plot speedup against scale (SVG), a line per --batch value\n"
          "  --<param> V         any model parameter (fco-sim params lists them)\n"
          "  -h                  this help\n");
}

#define USAGE(...)                                     \
  do {                                                 \
    fprintf(err, "fco-sim: " __VA_ARGS__);             \
    fprintf(err, "\n(fco-sim -h for help)\n");         \
    rc = 2;                                            \
    goto out;                                          \
  } while (0)

static int is_pow2(double x) {
  return x >= 1 && x <= 1e9 && x == floor(x) && !((long long)x & ((long long)x - 1));
}

#define RANGE_NOT_POW2                                                                     \
  "%s '%s': a range A-B is A, 2A, 4A, ..., B, so both ends must be powers of two (e.g. " \
  "1-128); give other values as a list (3,6,12,24)"

/* "1,2,4" or "1-128" (A, 2A, 4A, ..., B: both ends powers of two); 0 ok, -1 bad, -2 a range
 * with an end not a power of two (3-24 gave 3, 6, 12, 24 and 1-100 stopped at 64, silently),
 * -3 more than MAX_LIST values. */
static int parse_list(const char* s, double* out, int* n) {
  *n = 0;
  char* end;
  errno = 0;
  double a = strtod(s, &end);
  if (end != s && *end == '-' && end[1]) {
    double b = strtod(end + 1, &end);
    if (*end || !(a >= 1) || b < a || a != floor(a) || b != floor(b) || b > 1e9) return -1;
    if (!is_pow2(a) || !is_pow2(b)) return -2;
    for (double x = a; x <= b && *n < MAX_LIST; x *= 2) out[(*n)++] = x;
    return 0;
  }
  const char* p = s;
  for (;;) {
    double v = strtod(p, &end);
    if (end == p || !(v >= 1) || v != floor(v) || v > 1e9) return -1;
    if (*n >= MAX_LIST) return -3;
    out[(*n)++] = v;
    if (*end == '\0') return 0;
    if (*end != ',') return -1;
    p = end + 1;
  }
}

static int parse_num(const char* s, double* v) {
  char* end;
  errno = 0;
  *v = strtod(s, &end);
  return end == s || *end || errno || !isfinite(*v) ? -1 : 0;
}

/* The parameter table; `value`: the default, or what this command line set (then marked). */
static void print_params(FILE* f, const sim_params_t* p) {
  fprintf(f, "# fco-sim %s parameters (every one a flag: --name value)\n", FCO_SIM_VERSION);
  fprintf(f, "# %-20s %10s %-8s %s\n", "flag", "value", "unit", "meaning");
  for (int i = 0; i < sim_num_params; i++) {
    char flag[40];
    double v = sim_param_get(p, i), def = sim_param_info[i].def;
    fprintf(f, "  --%-18s %10g %-8s %s", sim_param_flag(i, flag, sizeof flag), v,
            sim_param_info[i].unit, sim_param_info[i].help);
    if (v != def) fprintf(f, " [set; default %g]", def);
    fputc('\n', f);
  }
}

/* The options other than the model parameters; a command takes some of them (sim_cli: takes). */
enum {
  OPT_CONFIG = 1 << 0,
  OPT_CALIB = 1 << 1,
  OPT_JSON = 1 << 2,
  OPT_SVG = 1 << 3,
  OPT_NODES = 1 << 4,
  OPT_GPUS = 1 << 5,
  OPT_BATCH = 1 << 6,
  OPT_GPN = 1 << 7,
  OPT_GLOBAL = 1 << 8,
  OPT_PARAM = 1 << 9, /* --<param> */
  OPT_ALL = (1 << 10) - 1
};

static const struct {
  const char *name, *alias;
  int opt;
} kOpts[] = {{"--config", "-c", OPT_CONFIG},         {"--calib", NULL, OPT_CALIB},
             {"-J", "--json", OPT_JSON},             {"--svg", NULL, OPT_SVG},
             {"--nodes", NULL, OPT_NODES},           {"--gpus", NULL, OPT_GPUS},
             {"--batch", NULL, OPT_BATCH},           {"--gpus-per-node", "-g", OPT_GPN},
             {"--global-batch", NULL, OPT_GLOBAL}};

static int option_of(const char* a) {
  for (size_t i = 0; i < sizeof kOpts / sizeof kOpts[0]; i++)
    if (!strcmp(a, kOpts[i].name) || (kOpts[i].alias && !strcmp(a, kOpts[i].alias)))
      return kOpts[i].opt;
  return 0;
}

#define MAX_FIT_CALIB 8

/* fco-sim fit --calib F1,F2,...: load every file, fit, print. Exit status as sim_cli. */
static int run_fit(const sim_params_t* p, const char* list, FILE* out, FILE* err) {
  sim_calib_t calib[MAX_FIT_CALIB];
  const sim_calib_t* cp[MAX_FIT_CALIB];
  char path[1024], msg[512];
  int n = 0, rc = 0;
  /* every name of the list must be there: ',' or 'a,,b' named no file (',' fitted nothing) */
  for (const char* f = list;; f++) {
    size_t len = strcspn(f, ",");
    if (len == 0 || len >= sizeof path) {
      fprintf(err, "fco-sim: fit --calib '%s': %s\n(fco-sim -h for help)\n", list,
              len ? "a file name longer than 1023 characters"
                  : "an empty file name (want F1,F2,... : one or more files)");
      return 2;
    }
    f += len;
    if (!*f) break;
  }
  for (const char* f = list; *f; f += *f == ',') {
    size_t len = strcspn(f, ",");
    memcpy(path, f, len);
    path[len] = '\0';
    f += len;
    if (n == MAX_FIT_CALIB) {
      fprintf(err, "fco-sim: fit takes at most %d calibration files\n", MAX_FIT_CALIB);
      rc = 2;
      break;
    }
    if (sim_calib_load(path, &calib[n], msg, sizeof msg)) {
      fprintf(err, "fco-sim: %s\n", msg);
      rc = 1;
      break;
    }
    cp[n] = &calib[n];
    n++;
  }
  if (!rc) {
    sim_fit_t fit;
    if (sim_fit_fused(p, cp, n, &fit)) {
      fprintf(err, "fco-sim: out of memory\n");
      rc = 1;
    } else {
      sim_print_fit(out, p, cp, n, &fit);
    }
  }
  for (int i = 0; i < n; i++) sim_calib_free(&calib[i]);
  return rc;
}

int sim_cli(int argc, char** argv, FILE* out, FILE* err) {
  int rc = 0;
  sim_params_t p;
  sim_params_default(&p);
  sim_config_t* cfg = calloc(1, sizeof *cfg);
  sim_calib_t calib;
  memset(&calib, 0, sizeof calib);
  sim_row_t* rows = NULL;
  int have_calib = 0;
  char msg[512];
  if (!cfg) {
    fprintf(err, "fco-sim: out of memory\n");
    return 1;
  }
  if (argc < 2) {
    usage(err);
    rc = 2;
    goto out;
  }
  const char* cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
    usage(out);
    goto out;
  }
  int model = !strcmp(cmd, "dlrm") ? SIM_MODEL_DLRM
              : !strcmp(cmd, "decode") ? SIM_MODEL_DECODE
              : !strcmp(cmd, "moe") ? SIM_MODEL_MOE
                                     : -1;
  int is_validate = !strcmp(cmd, "validate"), is_params = !strcmp(cmd, "params");
  int is_fit = !strcmp(cmd, "fit");
  if (model < 0 && !is_validate && !is_params && !is_fit) USAGE("unknown command '%s'", cmd);
  /* what each command takes: an option it would ignore is refused (validate -J wrote nothing) */
  int takes = model >= 0 ? OPT_ALL : is_params ? OPT_PARAM : OPT_CALIB | OPT_PARAM;
  const char* takes_what = is_params ? "only model parameters (--<param> V: it shows their values)"
                           : is_fit  ? "only --calib F1,F2,... and model parameters"
                                     : "only --calib F and model parameters";

  const char *config_path = NULL, *calib_path = NULL, *json_path = NULL, *svg_path = NULL;
  double nodes[MAX_LIST], gpus[MAX_LIST], batches[MAX_LIST], gpn = 8, global_batch = 0;
  int num_nodes = 0, num_gpus = 0, num_batches = 0, e;
  for (int i = 2; i < argc; i++) {
    const char* a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(out);
      goto out;
    }
    if (a[0] != '-') USAGE("unexpected argument '%s'", a);
    int opt = option_of(a), k = -1;
    if (!opt) {
      k = a[1] == '-' ? sim_param_find(a) : -1;
      if (k < 0) USAGE("unknown option '%s'", a);
      opt = OPT_PARAM;
    }
    if (!(opt & takes)) USAGE("%s does not take %s: it takes %s", cmd, a, takes_what);
    if (i + 1 >= argc) USAGE("%s needs a value", a);
    const char* v = argv[++i];
    if (opt == OPT_CONFIG) config_path = v;
    else if (opt == OPT_CALIB) calib_path = v;
    else if (opt == OPT_JSON) json_path = v;
    else if (opt == OPT_SVG) svg_path = v;
    else if (opt == OPT_NODES || opt == OPT_GPUS || opt == OPT_BATCH) {
      double* list = opt == OPT_NODES ? nodes : opt == OPT_GPUS ? gpus : batches;
      int* num = opt == OPT_NODES ? &num_nodes : opt == OPT_GPUS ? &num_gpus : &num_batches;
      if ((e = parse_list(v, list, num)) == -2) USAGE(RANGE_NOT_POW2, a, v);
      if (e == -3) USAGE("%s '%s': at most %d values", a, v, MAX_LIST);
      if (e)
        USAGE("%s '%s': want %s", a, v,
              opt == OPT_NODES  ? "1,2,4 or 1-128"
              : opt == OPT_GPUS ? "1,2,4,8 or 1-8"
                                : "a list of integers");
    } else if (opt == OPT_GPN) {
      if (parse_num(v, &gpn) || gpn < 1 || gpn != floor(gpn) || gpn > 1024)
        USAGE("--gpus-per-node '%s': want an integer in [1, 1024]", v);
    } else if (opt == OPT_GLOBAL) {
      /* the configuration's global_batch range: 1e308 gave -inf times and exit 0 */
      if (parse_num(v, &global_batch) || global_batch < 1 || global_batch > 1e12)
        USAGE("--global-batch '%s': want a positive number, at most 1e12", v);
    } else if (parse_num(v, sim_param_ptr(&p, k))) {
      USAGE("%s '%s': not a number", a, v);
    }
  }
  if (sim_params_check(&p, msg, sizeof msg)) USAGE("%s", msg);
  if (is_params) {
    print_params(out, &p);
    goto out;
  }
  if (is_fit) {
    if (!calib_path) USAGE("fit needs --calib FILE[,FILE...]");
    rc = run_fit(&p, calib_path, out, err);
    goto out;
  }
  if (calib_path) {
    if (sim_calib_load(calib_path, &calib, msg, sizeof msg)) {
      fprintf(err, "fco-sim: %s\n", msg);
      rc = 1;
      goto out;
    }
    have_calib = 1;
  }
  if (is_validate) {
    if (!have_calib) USAGE("validate needs --calib FILE");
    sim_val_t val;
    if (sim_validate(&p, &calib, &val)) {
      fprintf(err, "fco-sim: out of memory\n");
      rc = 1;
      goto out;
    }
    sim_print_validation(out, &p, &calib, &val);
    sim_val_free(&val);
    goto out;
  }
  if (!config_path) USAGE("%s needs --config FILE", cmd);
  if (sim_config_load(config_path, cfg, msg, sizeof msg)) {
    fprintf(err, "fco-sim: %s\n", msg);
    rc = 1;
    goto out;
  }
  if (cfg->model != model)
    USAGE("%s holds a [%s] model, not %s", config_path, sim_model_name(cfg->model), cmd);
  if (global_batch > 0) {
    if (model != SIM_MODEL_DLRM) USAGE("--global-batch applies to dlrm only");
    cfg->global_batch = global_batch;
    cfg->batch_per_gpu = 0;
  }
  if (num_batches && global_batch > 0) USAGE("--batch and --global-batch exclude each other");
  if (num_nodes && num_gpus) USAGE("give --nodes or --gpus, not both");

  /* the worlds: (nodes, GPUs per node) */
  sim_topo_t topo[MAX_LIST];
  int num_topo = 0;
  if (num_gpus) {
    for (int i = 0; i < num_gpus; i++) {
      if (gpus[i] <= gpn) topo[num_topo++] = (sim_topo_t){1, (int)gpus[i]};
      else if (fmod(gpus[i], gpn) == 0) topo[num_topo++] = (sim_topo_t){(int)(gpus[i] / gpn), (int)gpn};
      else USAGE("--gpus %g is neither <= --gpus-per-node %g nor a multiple of it", gpus[i], gpn);
    }
  } else {
    if (!num_nodes) {
      if (model == SIM_MODEL_DECODE) {
        for (int g = 1; g <= gpn; g *= 2) topo[num_topo++] = (sim_topo_t){1, g};
      } else {
        int last = model == SIM_MODEL_DLRM ? 128 : 32;
        for (int n = 1; n <= last; n *= 2) nodes[num_nodes++] = n;
      }
    }
    for (int i = 0; i < num_nodes; i++) topo[num_topo++] = (sim_topo_t){(int)nodes[i], (int)gpn};
  }
  for (int i = 0; i < num_topo; i++)
    if ((double)topo[i].nodes * topo[i].gpn > MAX_GPUS)
      USAGE("%d nodes x %d GPUs: at most %d GPUs (2^17) are simulated (the time grows with "
            "the GPUs)", topo[i].nodes, topo[i].gpn, MAX_GPUS);
  if (!num_batches) batches[num_batches++] = 0; /* the configuration's */

  rows = calloc((size_t)(num_topo * num_batches), sizeof *rows);
  sim_sources_t* sources = calloc(1, sizeof *sources);
  if (!rows || !sources) {
    free(sources);
    fprintf(err, "fco-sim: out of memory\n");
    rc = 1;
    goto out;
  }
  sim_env_t env = {p, have_calib ? &calib : NULL, sources};
  int n = 0;
  for (int i = 0; i < num_topo; i++)
    for (int b = 0; b < num_batches; b++) {
      int (*run)(const sim_env_t*, const sim_config_t*, sim_topo_t, double, sim_row_t*, char*,
                 size_t) = model == SIM_MODEL_DLRM     ? sim_run_dlrm
                           : model == SIM_MODEL_DECODE ? sim_run_decode
                                                       : sim_run_moe;
      if (run(&env, cfg, topo[i], batches[b], &rows[n], msg, sizeof msg)) {
        fprintf(err, "fco-sim: %s\n", msg);
        free(sources);
        rc = 1;
        goto out;
      }
      n++;
    }
  sim_report_t rep = {model, cfg, have_calib ? &calib : NULL, &p, sources,
                      model == SIM_MODEL_DLRM && cfg->batch_per_gpu <= 0 && num_batches == 1 &&
                          batches[0] == 0,
                      num_batches};
  sim_print_header(out, &rep);
  sim_print_table(out, &rep, rows, n);
  if (json_path && sim_write_json(json_path, &rep, rows, n, msg, sizeof msg)) {
    fprintf(err, "fco-sim: %s\n", msg);
    rc = 1;
  }
  if (svg_path && sim_write_svg(svg_path, &rep, rows, n, msg, sizeof msg)) {
    fprintf(err, "fco-sim: %s\n", msg);
    rc = 1;
  }
  free(sources);
out:
  free(rows);
  free(cfg);
  if (have_calib) sim_calib_free(&calib);
  return rc;
}
