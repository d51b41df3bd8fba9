/*
 * main.c — fco-bench: nccl-tests-style A/B benchmark of fco operators.
 *
 *   fco-bench [op] [-b minbytes] [-e maxbytes] [-f factor | -i increment] [-n iters] [-R rounds]
 *             [-w warmup]
 *             [-d f32|f16|bf16|all] [-D impl|all] [-G 0|1] [-g ranks] [-t auto|nccl|local|cpu]
 *             [-J file.json] [-c 0|1] [-L GB/s] [-M machine] [-h]
 *
 * Every shape runs impl 0 (the unfused baseline), the selected fused impls and AUTO side by
 * side; a table per op and dtype goes to stdout, diagnostics to stderr. Exit status: 0 all
 * checks passed, 1 a wrong element or a failed call, 2 a usage error. See README.md.
 * This file: the CLI, communicator set-up, the sweep driver, metadata and output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

/* Median of the rounds' values, or -1 when a round has none (< 0: "-"). */
static double round_median(const double* v, int n) {
  double t[BENCH_MAX_ROUNDS];
  for (int i = 0; i < n; i++) {
    if (v[i] < 0) return -1;
    t[i] = v[i];
  }
  return bench_median(t, n);
}

/* The impl column timed i-th in round `round` of n columns: a balanced Latin square (Williams
 * design) relabelled so that round 0 keeps the listed order. Over n rounds (2n when n is odd)
 * every column is timed right after every other column equally often and sits in every place
 * equally often: a column timed right after a heavy one reads slower on a GPU (AUTO after the
 * gemm tiles / chunks columns 1-3 %, up to 9 %, slower than the same impl timed first; run
 * 2026-12-01_nvidia-h200_4fc5553-autocol), and a plain rotation would keep each column's
 * predecessor. Design row k: (w[i] + k) mod n with w = 0, 1, n-1, 2, n-2, ...; for odd n rows
 * n..2n-1 are the mirrored rows. */
static int column_at(int n, int round, int i) {
  int w[BENCH_MAX_IMPLS], winv[BENCH_MAX_IMPLS];
  for (int j = 0; j < n; j++) {
    w[j] = j == 0 ? 0 : (j % 2 ? (j + 1) / 2 : n - j / 2);
    winv[w[j]] = j;
  }
  const int k = round % (n % 2 ? 2 * n : n);
  const int sym = k < n ? (w[i] + k) % n : (w[n - 1 - i] + k - n) % n;
  return winv[sym];
}

/* The op registry: a new op is one op_<name>.c and one line here. */
static const bench_op_t* const kOps[] = {
    &bench_op_allreduce,
    /* gemv_allreduce */
    &bench_op_gemv_allreduce,
    /* embedding_alltoall */
    &bench_op_embedding_alltoall,
    /* gemm_alltoall */
    &bench_op_gemm_alltoall,
};
#define NUM_OPS ((int)(sizeof kOps / sizeof kOps[0]))

static void usage(FILE* f) {
  fprintf(f,
          "usage: fco-bench [op] [options]\n"
          "  op                  allreduce (default), gemv_allreduce, embedding_alltoall,\n"
          "                      gemm_alltoall\n"
          "  -b minbytes         smallest message per rank (K/M/G suffixes; default 1K)\n"
          "  -e maxbytes         largest message per rank (default 64M on GPUs, 4M on cpu)\n"
          "  -f factor           multiply the size by this each step (default 4)\n"
          "  -i increment        add this to the size each step instead\n"
          "  -n iters            timed iterations (default 50 on GPUs, 10 on cpu)\n"
          "  -R rounds           time every column once per round, R rounds, report the median\n"
          "                      over rounds (default 1; e.g. -R 5 -n 10 for long GPU runs);\n"
          "                      the impl columns' order changes per round: over as many\n"
          "                      rounds as columns (twice as many if odd) each column is\n"
          "                      timed right after every other one equally often\n"
          "  -w warmup           untimed iterations first (default 10 on GPUs, 3 on cpu)\n"
          "  -d f32|f16|bf16|all dtypes, comma list allowed (default all)\n"
          "  -D impl|all         impls by number or name, comma list, 'auto' (default all);\n"
          "                      impl 0, the baseline, always runs\n"
          "  -G 0|1              capture iterations in a CUDA graph and time replays (default 0)\n"
          "  -g ranks            GPUs in this process (nccl), virtual ranks (local), threads (cpu)\n"
          "  -t auto|nccl|local|cpu  transport (default auto: nccl with a GPU, else cpu)\n"
          "  -J file.json        write every result as JSON\n"
          "  -c 0|1              check every result exactly (default 1)\n"
          "  -L GB/s             bandwidth of the floor column (default 364 nccl, HBM measured local)\n"
          "  -M machine          machine name for the records (default env FCO_MACHINE, else "
          "derived)\n"
          "  -h, --help          this help\n");
}

#define USAGE_ERROR(...)                            \
  do {                                              \
    fprintf(stderr, "fco-bench: " __VA_ARGS__);     \
    fprintf(stderr, "\n(fco-bench -h for help)\n"); \
    exit(2);                                        \
  } while (0)

static int parse_int(const char* s, long lo, long hi, int* out) {
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static int parse_transport(const char* s, fco_transport_t* t) {
  for (int i = 0; i < FCO_NUM_TRANSPORTS; i++)
    if (!strcasecmp(s, fco_transport_name((fco_transport_t)i))) {
      *t = (fco_transport_t)i;
      return 0;
    }
  return -1;
}

static unsigned parse_dtypes(const char* spec) {
  unsigned mask = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (!strcasecmp(tok, "all")) {
      mask |= (1u << FCO_NUM_DTYPES) - 1;
      continue;
    }
    int found = 0;
    for (int d = 0; d < FCO_NUM_DTYPES; d++)
      if (!strcasecmp(tok, fco_dtype_name((fco_dtype_t)d))) {
        mask |= 1u << d;
        found = 1;
      }
    if (!found) return 0;
  }
  return mask;
}

/* -D → ctx->impls: impl 0 first (the A/B baseline), fused impls ascending, AUTO last. */
static int resolve_impls(bench_ctx_t* ctx, const bench_op_t* op, const char* spec) {
  int want[BENCH_MAX_IMPLS] = {0}, want_auto = 0, ntok = 0;
  int n = op->num_impls < BENCH_MAX_IMPLS - 1 ? op->num_impls : BENCH_MAX_IMPLS - 1;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int v;
    ntok++;
    if (!strcasecmp(tok, "all")) {
      for (int i = 0; i < n; i++) want[i] = 1;
      want_auto = 1;
    } else if (!strcasecmp(tok, "auto") || !strcmp(tok, "-1")) {
      want_auto = 1;
    } else if (parse_int(tok, 0, n - 1, &v) == 0) {
      want[v] = 1;
    } else {
      int found = 0;
      for (int i = 0; i < n && !found; i++) {
        const char* name = op->impl_name(ctx, i);
        if (name && !strcasecmp(tok, name)) want[i] = found = 1;
      }
      if (!found) return -1;
    }
  }
  if (!ntok) return -1; /* -D "" or -D ",": names nothing (ran impl 0 alone, silently) */
  want[0] = 1;
  ctx->nimpls = 0;
  for (int i = 0; i < n; i++)
    if (want[i]) ctx->impls[ctx->nimpls++] = i;
  if (want_auto) ctx->impls[ctx->nimpls++] = FCO_IMPL_AUTO;
  return 0;
}

static void parse_args(int argc, char** argv, bench_opts_t* o, int* graph_set) {
  int c, v;
  const char* dspec = "all";
  static const struct option longs[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:R:w:d:D:G:g:t:J:c:L:M:h", longs, NULL)) != -1) {
    switch (c) {
      case 'b':
        if (bench_parse_size(optarg, &o->min_bytes) || !o->min_bytes)
          USAGE_ERROR("-b %s: want a size >= 1 (K/M/G suffixes)", optarg);
        break;
      case 'e':
        if (bench_parse_size(optarg, &o->max_bytes) || !o->max_bytes)
          USAGE_ERROR("-e %s: want a size >= 1 (K/M/G suffixes)", optarg);
        break;
      case 'f':
        if (parse_int(optarg, 2, 1 << 20, &v)) USAGE_ERROR("-f %s: want an integer >= 2", optarg);
        o->step_factor = (size_t)v;
        break;
      case 'i':
        if (bench_parse_size(optarg, &o->step_bytes) || !o->step_bytes)
          USAGE_ERROR("-i %s: want a size >= 1", optarg);
        break;
      case 'n':
        if (parse_int(optarg, 1, 1000000, &o->iters)) USAGE_ERROR("-n %s: want 1..1000000", optarg);
        break;
      case 'R':
        if (parse_int(optarg, 1, BENCH_MAX_ROUNDS, &o->rounds))
          USAGE_ERROR("-R %s: want 1..%d", optarg, BENCH_MAX_ROUNDS);
        break;
      case 'w':
        if (parse_int(optarg, 0, 1000000, &o->warmup)) USAGE_ERROR("-w %s: want 0..1000000", optarg);
        break;
      case 'd':
        dspec = optarg;
        o->dtype_given = 1;
        break;
      case 'D':
        o->impl_spec = optarg;
        break;
      case 'G':
        if (parse_int(optarg, 0, 1, &o->graph)) USAGE_ERROR("-G %s: want 0 or 1", optarg);
        *graph_set = 1;
        break;
      case 'g':
        if (parse_int(optarg, 1, BENCH_MAX_RANKS, &o->nranks))
          USAGE_ERROR("-g %s: want 1..%d", optarg, BENCH_MAX_RANKS);
        break;
      case 't':
        if (parse_transport(optarg, &o->transport))
          USAGE_ERROR("-t %s: want auto, nccl, local or cpu", optarg);
        break;
      case 'J':
        o->json_path = optarg;
        break;
      case 'c':
        if (parse_int(optarg, 0, 1, &o->check)) USAGE_ERROR("-c %s: want 0 or 1", optarg);
        break;
      case 'L': {
        char* end = NULL;
        o->link_gbps = strtod(optarg, &end);
        if (end == optarg || *end || !(o->link_gbps > 0)) USAGE_ERROR("-L %s: want GB/s > 0", optarg);
        break;
      }
      case 'M':
        o->machine = optarg;
        break;
      case 'h':
        usage(stdout);
        exit(0);
      default: /* getopt has named the option on stderr */
        USAGE_ERROR("unknown option or missing value");
    }
  }
  if (optind < argc) o->op_name = argv[optind++];
  if (optind < argc) USAGE_ERROR("unexpected argument '%s'", argv[optind]);
  if (o->step_factor && o->step_bytes) USAGE_ERROR("give -f or -i, not both");
  if (!(o->dtype_mask = parse_dtypes(dspec)))
    USAGE_ERROR("-d %s: want f32, f16, bf16 or all (comma list allowed)", dspec);
}

/* Transport, ranks, devices and the defaults that depend on them. */
static void resolve_setup(bench_ctx_t* ctx, int graph_set) {
  bench_opts_t* o = &ctx->opt;
  ctx->gpus_visible = bench_gpu_count();
  fco_transport_t t = o->transport;
  const char* env = getenv("FCO_TRANSPORT");
  if (t == FCO_TRANSPORT_AUTO && env && *env && parse_transport(env, &t))
    USAGE_ERROR("FCO_TRANSPORT=%s: want auto, nccl, local or cpu", env);
  if (t == FCO_TRANSPORT_AUTO) t = ctx->gpus_visible > 0 ? FCO_TRANSPORT_NCCL : FCO_TRANSPORT_CPU;
  if (t != FCO_TRANSPORT_CPU && ctx->gpus_visible == 0) {
#ifdef FCO_HAVE_CUDA
    USAGE_ERROR("-t %s needs a GPU, and none is visible (use -t cpu)", fco_transport_name(t));
#else
    USAGE_ERROR("-t %s needs a GPU, and fco-bench was built without CUDA (use -t cpu)",
                fco_transport_name(t));
#endif
  }
  ctx->transport = t;
  ctx->on_gpu = t != FCO_TRANSPORT_CPU;
  int n = o->nranks;
  if (t == FCO_TRANSPORT_NCCL) {
    if (!n) n = ctx->gpus_visible < 8 ? ctx->gpus_visible : 8;
    if (n > ctx->gpus_visible)
      USAGE_ERROR("-g %d: the nccl transport needs one GPU per rank, and %d are visible (-t local "
                  "runs virtual ranks on one GPU)", n, ctx->gpus_visible);
  } else if (!n) {
    n = 2;
  }
  if (ctx->on_gpu && n > 8) USAGE_ERROR("-g %d: GPU transports take at most 8 ranks", n);
  ctx->nranks = n;
  for (int r = 0; r < n; r++) ctx->devs[r] = t == FCO_TRANSPORT_NCCL ? r : t == FCO_TRANSPORT_LOCAL ? 0 : -1;

  if (!o->min_bytes) o->min_bytes = 1024;
  if (!o->max_bytes) o->max_bytes = ctx->on_gpu ? (size_t)64 << 20 : (size_t)4 << 20;
  if (o->max_bytes < o->min_bytes) o->max_bytes = o->min_bytes;
  if (!o->step_factor && !o->step_bytes) o->step_factor = 4;
  if (o->iters < 0) o->iters = ctx->on_gpu ? 50 : 10;
  if (o->warmup < 0) o->warmup = ctx->on_gpu ? 10 : 3;
  if (!ctx->on_gpu && o->graph) {
    if (graph_set) fprintf(stderr, "fco-bench: -G 1 ignored: the cpu transport has no CUDA graphs\n");
    o->graph = 0;
  }
}

static int make_sizes(const bench_opts_t* o, size_t** out) {
  int n = 0, cap = 16;
  size_t* v = (size_t*)malloc((size_t)cap * sizeof *v);
  for (size_t s = o->min_bytes; v && s <= o->max_bytes;) {
    if (n == cap) {
      size_t* nv = (size_t*)realloc(v, (size_t)(cap *= 2) * sizeof *v);
      if (!nv) break;
      v = nv;
    }
    v[n++] = s;
    if (o->step_bytes ? s > SIZE_MAX - o->step_bytes : s > SIZE_MAX / o->step_factor)
      break; /* the next size would wrap (a wrapped product can land above s) */
    s = o->step_bytes ? s + o->step_bytes : s * o->step_factor;
  }
  *out = v;
  return v ? n : -1;
}

static void print_metadata(FILE* f, bench_ctx_t* ctx, const bench_op_t* op) {
  const bench_opts_t* o = &ctx->opt;
  char date[64], machine[128], gpu[256] = "", commit[256];
  bench_date_iso(date, sizeof date);
  bench_machine(ctx, machine, sizeof machine);
  bench_header_text(machine);
  snprintf(commit, sizeof commit, "%s", bench_commit());
  bench_utf8_trim(commit);
  bench_header_text(commit);
  if (ctx->on_gpu) bench_gpu_name(ctx->devs[0], gpu, sizeof gpu);
  bench_header_text(gpu);
  size_t ws = 0;
  fco_comm_workspace_bytes(ctx->comms[0], &ws);
  int lib_version = 0; /* the loaded libfco's, which a stale LD_LIBRARY_PATH could change */
  (void)fco_get_version(&lib_version);
  fprintf(f, "# fco-bench %s  fco %d.%d.%d  commit %s\n", BENCH_VERSION, lib_version / 10000,
          lib_version / 100 % 100, lib_version % 100, commit);
  fprintf(f, "# date %s  machine %s\n", date, machine);
  if (ctx->transport == FCO_TRANSPORT_CPU)
    fprintf(f, ctx->gpus_visible == 0
                   ? "# no GPU: running on the cpu transport; times are CPU times, not GPU results\n"
                   : "# cpu transport: times are CPU times, not GPU results\n");
  fprintf(f, "# transport %s  ranks %d  ", fco_transport_name(ctx->transport), ctx->nranks);
  if (ctx->transport == FCO_TRANSPORT_NCCL) {
    fprintf(f, "devices");
    for (int r = 0; r < ctx->nranks; r++) fprintf(f, "%s%d", r ? "," : " ", ctx->devs[r]);
    fprintf(f, " (%s)\n", gpu);
    if (ctx->nranks == 1)
      fprintf(f, "# one rank: nothing to communicate, so the fused impls race impl 0's compute "
                 "alone; the A/B of communication needs -g 2 on two GPUs (%d visible) or -t local "
                 "-g 2 (virtual ranks on one GPU)\n", ctx->gpus_visible);
  } else if (ctx->transport == FCO_TRANSPORT_LOCAL) {
    fprintf(f, "virtual ranks on device %d (%s)\n", ctx->devs[0], gpu);
  } else {
    fprintf(f, "threads of one process\n");
  }
  fprintf(f, "# op %s  iters %d  rounds %d  warmup %d  graph %d  check %d  time: median of %s\n",
          op->name, o->iters, o->rounds, o->warmup, o->graph, o->check,
          !ctx->on_gpu ? "clock_gettime around each group"
          : o->graph   ? "CUDA graph replays / iterations per graph"
                       : "CUDA events per iteration (slowest rank)");
  fprintf(f, "# inputs rotate over up to %d buffer sets so a size's footprint exceeds 2 x %zu MiB "
          "of %s cache\n", BENCH_MAX_SETS, ctx->cache_bytes >> 20, ctx->on_gpu ? "L2" : "CPU");
  if (ctx->transport == FCO_TRANSPORT_NCCL)
    fprintf(f, "# floor: 2(P-1)/P x size bytes per rank over %.0f GB/s per direction\n",
            o->link_gbps > 0 ? o->link_gbps : BENCH_NVLINK_GBPS);
  else if (ctx->transport == FCO_TRANSPORT_LOCAL)
    fprintf(f, "# floor: 2 x P x size bytes over %.0f GB/s of HBM shared by the virtual ranks\n",
            o->link_gbps > 0 ? o->link_gbps : ctx->hbm_gbps);
  else
    fprintf(f, "# floor: none on the cpu transport\n");
  if (ctx->on_gpu)
    fprintf(f, "# HBM %.0f GB/s for the floors' HBM terms and hbm%% (%s)\n", ctx->hbm_gbps,
            ctx->hbm_measured == 1   ? "a device-to-device copy on device 0, bytes read and "
                                       "written, measured now"
            : ctx->hbm_measured == 2 ? "FCO_BENCH_HBM_GBPS"
                                     : "the H200's: the measurement failed");
  fprintf(f, "# speedup: %s / fastest fused impl (best); auto_x: %s / auto\n",
          bench_impl_label(ctx, op, 0), bench_impl_label(ctx, op, 0));
  fprintf(f, "# workspace %zu bytes per rank (after the run)\n", ws);
}

/* "# auto ran, per row: 1 1 3 ..." — the impl each row's AUTO column resolved to (its
 * fco_last_plan; "-" where it did not run); the JSON's "plan" names the kernels too. */
static void print_auto_ran(FILE* f, const bench_ctx_t* ctx, const bench_row_t* rows, int n) {
  int ac = -1;
  for (int j = 0; j < ctx->nimpls; j++)
    if (ctx->impls[j] == FCO_IMPL_AUTO) ac = j;
  if (ac < 0 || n < 1) return;
  fprintf(f, "# auto ran, per row:");
  for (int i = 0; i < n; i++) {
    const char* p = strstr(rows[i].plan[ac], " impl ");
    if (p) fprintf(f, " %d", atoi(p + 6));
    else fputs(" -", f);
  }
  fputs(" (impl numbers; the JSON's \"plan\" names the kernels)\n", f);
}

/* -J: opened before the run (an unwritable path was found only after it), kept open and
 * written at the end; json_discard closes it unwritten, and removes the file if it was made
 * now (no empty .json left by a usage error or a failed set-up). */
static FILE* g_json;
static int g_json_created;

static void json_discard(const char* path) {
  if (!g_json) return;
  fclose(g_json);
  g_json = NULL;
  if (g_json_created) remove(path);
}

/* The record to the -J file opened at start: emptied (a regular file), then written. */
static int json_write(bench_ctx_t* ctx, const bench_row_t* rows, int nrows) {
  struct stat sb;
  const int fd = fileno(g_json);
  int bad = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && ftruncate(fd, 0) != 0;
  if (!bad) bad = bench_write_json(g_json, ctx, rows, nrows) != 0; /* "a": writes at the end */
  if (fclose(g_json) != 0) bad = 1;
  g_json = NULL;
  return bad ? -1 : 0;
}

int main(int argc, char** argv) {
  static bench_ctx_t ctx_storage;
  bench_ctx_t* ctx = &ctx_storage;
  bench_opts_t* o = &ctx->opt;
  o->iters = o->warmup = -1;
  o->rounds = 1;
  o->check = 1;
  o->impl_spec = "all";
  o->transport = FCO_TRANSPORT_AUTO;
  int graph_set = 0;
  parse_args(argc, argv, o, &graph_set);

  const bench_op_t* op = NULL;
  for (int i = 0; i < NUM_OPS; i++)
    if (!o->op_name || !strcmp(o->op_name, kOps[i]->name)) {
      op = kOps[i];
      break;
    }
  if (!op) {
    fprintf(stderr, "fco-bench: unknown op '%s'; known:", o->op_name);
    for (int i = 0; i < NUM_OPS; i++) fprintf(stderr, " %s", kOps[i]->name);
    fprintf(stderr, "\n(fco-bench -h for help)\n");
    return 2;
  }
  /* -b/-e/-f/-i are allreduce's size sweep: an op with a workload list of its own does not
   * read them (was silent; a warning, not an error, so one command line can run every op) */
  if (op->shapes && (o->min_bytes || o->max_bytes || o->step_factor || o->step_bytes))
    fprintf(stderr, "fco-bench:%s%s%s%s ignored: the size sweep is allreduce's; %s runs its "
            "workload list (%s)\n", o->min_bytes ? " -b" : "", o->max_bytes ? " -e" : "",
            o->step_factor ? " -f" : "", o->step_bytes ? " -i" : "", op->name,
            op->shapes_env ? op->shapes_env : "README \"Workloads\"");
  resolve_setup(ctx, graph_set);
  if (o->json_path) {
    struct stat sb;
    g_json_created = stat(o->json_path, &sb) != 0;
    if (!(g_json = fopen(o->json_path, "a"))) /* "a": an old file stays until the record */
      USAGE_ERROR("-J %s: cannot open it for writing: %s", o->json_path, strerror(errno));
  }

  fco_config_t cfg;
  fco_config_init(&cfg);
  cfg.transport = ctx->transport;
  fco_result_t r = fco_comm_init_all(ctx->comms, ctx->nranks, ctx->on_gpu ? ctx->devs : NULL, &cfg);
  if (r != FCO_OK) {
    fprintf(stderr, "fco-bench: fco_comm_init_all(%d ranks, transport %s): %s: %s\n", ctx->nranks,
            fco_transport_name(ctx->transport), fco_result_string(r), fco_last_error(NULL));
    json_discard(o->json_path);
    return 1;
  }
  int status = 0;
  if (resolve_impls(ctx, op, o->impl_spec)) {
    fprintf(stderr, "fco-bench: -D %s: want impl numbers 0..%d, names, auto or all\n"
            "(fco-bench -h for help)\n", o->impl_spec, op->num_impls - 1);
    status = 2;
    goto done;
  }
  if ((r = bench_dev_init(ctx)) != FCO_OK) {
    bench_report(ctx, r, "device set-up");
    status = 1;
    goto done;
  }

  size_t* sizes = NULL;
  int nsizes = op->shapes ? op->shapes(ctx, &sizes) : make_sizes(o, &sizes);
  if (nsizes == -2) { /* an env value out of range, said by the op */
    fprintf(stderr, "(fco-bench -h for help)\n");
    status = 2;
    goto done;
  }
  if (nsizes == 0) { /* the op's env list selected nothing (was reported as out of memory) */
    fprintf(stderr, "fco-bench: %s: no workload selected for %s (each entry dropped is "
            "reported above)\n(fco-bench -h for help)\n",
            op->shapes_env ? op->shapes_env : "the workload list", op->name);
    free(sizes);
    status = 2;
    goto done;
  }
  int ndtypes = 0;
  for (int d = 0; d < FCO_NUM_DTYPES; d++) ndtypes += (o->dtype_mask >> d) & 1;
  bench_row_t* rows =
      nsizes > 0 ? (bench_row_t*)calloc((size_t)(nsizes * ndtypes + 1), sizeof *rows) : NULL;
  int nrows = 0, failed = 0;
  char skipped[2048] = "";
  size_t skipped_len = 0;
  long long total_wrong = 0;
  if (!rows) { /* of the shapes' list (nsizes < 0) or of the rows */
    fprintf(stderr, "fco-bench: out of host memory\n");
    failed = 1;
  }
  /* An impl the op refuses as unsupported on a row (the LL one-shot on the cpu transport or
   * above M 16) is "-" there, not a failure; the first refusal's reason per impl is listed under
   * the metadata with the skipped rows (was one stderr line per impl and dtype). */
  int told_unsupported[BENCH_MAX_IMPLS] = {0};
  for (int d = 0; d < FCO_NUM_DTYPES && !failed; d++) {
    if (!((o->dtype_mask >> d) & 1)) continue;
    fco_dtype_t dt = (fco_dtype_t)d;
    for (int si = 0; si < nsizes && !failed; si++) {
      /* The byte sweep is rounded down to whole elements of the dtype (README): sizes that
       * round alike gave the same row twice (-b 4 -e 20 -i 3 in f32: 4 B and 16 B twice). The
       * sweep ascends, so such sizes are neighbours: the first of them runs (or, below one
       * element, is the one skipped row that says why). */
      if (!op->shapes && si > 0 &&
          sizes[si] / fco_dtype_size(dt) == sizes[si - 1] / fco_dtype_size(dt))
        continue;
      bench_row_t* row = &rows[nrows];
      memset(row, 0, sizeof *row);
      row->op = op;
      row->dtype = dt;
      row->floor_us = row->peak_tflops = row->compute_us = row->comm_us = row->both_us = -1;
      for (int j = 0; j < BENCH_MAX_IMPLS; j++) {
        row->time_us[j] = -1;
        row->wrong[j] = -1;
      }
      void* st = NULL;
      ctx->err_rank = -1;
      ctx->err_msg[0] = 0;
      /* FCO_BENCH_PROGRESS=1: one stderr line per step, so a stalled step can be located (the
       * tables print only at the end). 0 / unset: none; another value is said once, and off. */
      const int progress = fco_env_flag("FCO_BENCH_PROGRESS", 0);
      if (progress) fprintf(stderr, "# progress: setup %s %s size/shape %zu\n", op->name, fco_dtype_name(dt), sizes[si]);
      r = op->setup(ctx, sizes[si], dt, row, &st);
      if (r == FCO_ERR_UNSUPPORTED) { /* shape does not exist for this dtype */
        /* listed under the metadata where the op said why (gemm_alltoall's experts not
         * splitting over P ranks: a run at P = 3 once printed an empty table, no reason) */
        if (ctx->err_msg[0] && skipped_len < sizeof skipped) {
          const int n = snprintf(skipped + skipped_len, sizeof skipped - skipped_len,
                                 "# skipped (%s): %s\n", fco_dtype_name(dt), ctx->err_msg);
          if (n > 0) skipped_len += (size_t)n;
        }
        if (st) op->teardown(ctx, st);
        continue;
      }
      char what[128];
      snprintf(what, sizeof what, "%s %s %zu B", op->name, fco_dtype_name(dt), sizes[si]);
      if (r != FCO_OK) {
        bench_report(ctx, r, what);
        failed = 1;
      }
      /* -R rounds: every column (impls, then the op's parts alone) is timed once per round,
       * round after round, and reported as the median over rounds, so slow drift of the GPU's
       * clock (power, temperature) under long runs lands on every column alike. The impl
       * columns' order changes from round to round (column_at: each follows every other
       * equally often); round 0 keeps the listed order and carries the checks. */
      int measured = 0, nr = 0;
      double samp[BENCH_MAX_IMPLS][BENCH_MAX_ROUNDS], comp[BENCH_MAX_ROUNDS],
          comm[BENCH_MAX_ROUNDS], both[BENCH_MAX_ROUNDS];
      for (int round = 0; round < o->rounds && !failed; round++, nr++) {
        for (int jj = 0; jj < ctx->nimpls && !failed; jj++) {
          const int j = column_at(ctx->nimpls, round, jj);
          samp[j][round] = -1;
          const char* label = bench_impl_label(ctx, op, j);
          snprintf(what, sizeof what, "%s %s %zu B impl %s", op->name, fco_dtype_name(dt),
                   row->bytes, label);
          ctx->err_rank = -1;
          ctx->err_msg[0] = 0;
          double us = -1;
          if (progress) fprintf(stderr, "# progress: time %s\n", what);
          r = op->time(ctx, st, ctx->impls[j], &us);
          if (r == FCO_ERR_UNSUPPORTED) { /* "-" in the table, not a failure */
            if (!told_unsupported[j]++ && skipped_len < sizeof skipped) {
              const int n = snprintf(skipped + skipped_len, sizeof skipped - skipped_len,
                                     "# %s: \"-\" where unsupported (first in %s): %s\n",
                                     label, fco_dtype_name(dt), bench_error_msg(ctx));
              if (n > 0) skipped_len += (size_t)n;
            }
            continue;
          }
          if (r != FCO_OK) {
            bench_report(ctx, r, what);
            failed = 1;
            break;
          }
          row->time_us[j] = samp[j][round] = us;
          snprintf(row->plan[j], sizeof row->plan[j], "%s", fco_last_plan(ctx->comms[0]));
          measured = 1;
          if (!o->check || round > 0) continue;
          long long wrong = 0;
          if (progress) fprintf(stderr, "# progress: check %s (%.2f us)\n", what, us);
          if ((r = op->check(ctx, st, ctx->impls[j], &wrong)) != FCO_OK) {
            bench_report(ctx, r, what);
            failed = 1;
            break;
          }
          row->wrong[j] = wrong;
          total_wrong += wrong;
        }
        if (progress && !failed)
          fprintf(stderr, "# progress: finish row (parts alone: compute, comm)\n");
        if (!failed && (r = op->finish_row(ctx, st, row)) != FCO_OK) {
          bench_report(ctx, r, what);
          failed = 1;
        }
        comp[round] = row->compute_us;
        comm[round] = row->comm_us;
        both[round] = row->both_us;
      }
      if (!failed && nr > 1) {
        for (int j = 0; j < ctx->nimpls; j++) row->time_us[j] = round_median(samp[j], nr);
        row->compute_us = round_median(comp, nr);
        row->comm_us = round_median(comm, nr);
        row->both_us = round_median(both, nr);
      }
      if (st) op->teardown(ctx, st);
      if (measured) nrows++;
    }
  }

  print_metadata(stdout, ctx, op);
  if (skipped_len) fputs(skipped, stdout); /* truncated at its size, if ever that many */
  for (int i = 0; i < nrows;) {
    int k = i;
    while (k < nrows && rows[k].dtype == rows[i].dtype) k++;
    fprintf(stdout, "#\n# %s %s\n", op->name, fco_dtype_name(rows[i].dtype));
    op->print_table(stdout, ctx, rows + i, k - i);
    print_auto_ran(stdout, ctx, rows + i, k - i);
    i = k;
  }
  if (failed) fprintf(stdout, "# stopped early: a call failed (see stderr)\n");
  fprintf(stdout, "# wrong elements: %lld%s\n", total_wrong, o->check ? "" : " (checks off)");
  fflush(stdout);
  if (g_json && json_write(ctx, rows, nrows)) {
    fprintf(stderr, "fco-bench: cannot write %s\n", o->json_path);
    failed = 1;
  }
  status = failed || total_wrong > 0 ? 1 : 0;
  free(rows);
  free(sizes);
  bench_sync(ctx);
done:
  for (int i = 0; i < ctx->nranks; i++) {
    fco_result_t e = fco_comm_destroy(ctx->comms[i]);
    if (e != FCO_OK) {
      fprintf(stderr, "fco-bench: fco_comm_destroy(rank %d): %s: %s\n", i, fco_result_string(e),
              fco_last_error(NULL));
      if (!status) status = 1;
    }
  }
  bench_dev_fini(ctx); /* buffers and streams after the comms: they waited for their work */
  json_discard(o->json_path); /* not written: a usage error or a failed set-up */
  return status;
}
