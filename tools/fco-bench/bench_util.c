/*
 * bench_util.c — fco-bench's host-side helpers: size parsing, median, clocks, metadata
 * (commit, date, machine), error reporting, the nccl-tests-style table and the JSON record.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "bench.h"

int bench_parse_size(const char* s, size_t* out) {
  if (!s || !*s) return -1;
  char* end = NULL;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0) || !isfinite(v)) return -1; /* also "nan", "inf" (strtod takes them) */
  double mul = 1;
  switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end) return -1;
  v *= mul;
  if (v > 1e15) return -1;
  *out = (size_t)v;
  return 0;
}

int bench_parse_dec(const char* s, const char** end, unsigned long long max,
                    unsigned long long* v) {
  const char* p = s;
  unsigned long long x = 0;
  int over = 0;
  for (; *p >= '0' && *p <= '9'; p++) { /* every digit read, also past max: not clamped */
    const unsigned d = (unsigned)(*p - '0');
    if (over || d > max || x > (max - d) / 10) over = 1;
    else x = x * 10 + d;
  }
  if (end) *end = p;
  if (p == s) return -1;
  if (v) *v = x;
  return over;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

double bench_median(double* v, int n) {
  if (n <= 0) return -1;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bench_date_iso(char* buf, size_t n) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char* bench_commit(void) {
  const char* c = getenv("FCO_COMMIT");
  if (c && *c) return c;
#ifdef FCO_GIT_COMMIT
#define BENCH_STR2_(x) #x
#define BENCH_STR_(x) BENCH_STR2_(x)
  return BENCH_STR_(FCO_GIT_COMMIT);
#else
  return "unknown";
#endif
}

void bench_utf8_trim(char* s) {
  size_t n = strlen(s), i = n;
  while (i > 0 && n - i < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
  if (i == 0) return;
  const unsigned char lead = (unsigned char)s[i - 1];
  const size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  if (want > 1 && n - (i - 1) < want) s[i - 1] = 0;
}

void bench_machine(const bench_ctx_t* ctx, char* buf, size_t n) {
  const char* env = getenv("FCO_MACHINE");
  if (ctx->opt.machine && *ctx->opt.machine) {
    snprintf(buf, n, "%s", ctx->opt.machine);
    bench_utf8_trim(buf); /* cut at n - 1 bytes: not inside a character (the JSON's UTF-8) */
  } else if (env && *env) {
    snprintf(buf, n, "%s", env);
    bench_utf8_trim(buf);
  } else if (ctx->gpus_visible == 0) {
    snprintf(buf, n, "cpu");
  } else {
    /* "NVIDIA H200" → "nvidia-h200", with "-x<N>" when the machine has N > 1 GPUs. */
    char name[256], model[64] = "gpu";
    bench_gpu_name(0, name, sizeof name);
    const char* p = name;
    while (*p == ' ') p++;
    if (!strncasecmp(p, "nvidia", 6)) p += 6;
    while (*p == ' ' || *p == '-') p++;
    size_t k = 0;
    while (p[k] && p[k] != ' ' && k + 1 < sizeof model) {
      model[k] = (char)tolower((unsigned char)p[k]);
      k++;
    }
    if (k) model[k] = 0;
    if (ctx->gpus_visible > 1) snprintf(buf, n, "nvidia-%s-x%d", model, ctx->gpus_visible);
    else snprintf(buf, n, "nvidia-%s", model);
  }
}

int bench_gpus_used(const bench_ctx_t* ctx) {
  switch (ctx->transport) {
    case FCO_TRANSPORT_NCCL: return ctx->nranks;
    case FCO_TRANSPORT_LOCAL: return 1;
    default: return 0;
  }
}

const char* bench_impl_label(bench_ctx_t* ctx, const bench_op_t* op, int idx) {
  static char buf[BENCH_MAX_IMPLS][16];
  int impl = ctx->impls[idx];
  if (impl == FCO_IMPL_AUTO) return "auto";
  const char* n = op->impl_name ? op->impl_name(ctx, impl) : NULL;
  if (n && *n) return n;
  snprintf(buf[idx], sizeof buf[idx], "impl%d", impl);
  return buf[idx];
}

void bench_print_knobs(FILE* f, const char* const* names, size_t n) {
  fprintf(f, "# knobs:");
  for (size_t k = 0; k < n; k++) {
    const char* v = getenv(names[k]);
    fprintf(f, " %s=%s", names[k], v && *v ? v : "default");
  }
  fprintf(f, "\n");
}

fco_result_t bench_fail(bench_ctx_t* ctx, fco_result_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err_msg, sizeof ctx->err_msg, fmt, ap);
  va_end(ap);
  ctx->err_rank = -1;
  return code;
}

const char* bench_error_msg(bench_ctx_t* ctx) {
  const char* msg = ctx->err_rank >= 0 && ctx->err_rank < ctx->nranks
                        ? fco_last_error(ctx->comms[ctx->err_rank])
                        : ctx->err_msg;
  if (!msg || !*msg) msg = fco_last_error(NULL);
  return msg ? msg : "";
}

void bench_report(bench_ctx_t* ctx, fco_result_t r, const char* what) {
  fprintf(stderr, "fco-bench: %s: %s: %s\n", what, fco_result_string(r), bench_error_msg(ctx));
}

/* ---- table -------------------------------------------------------------------------------- */

/* Column index of the fastest fused impl (impl >= 1) with a time, or -1. */
static int best_fused(const bench_ctx_t* ctx, const bench_row_t* row) {
  int best = -1;
  for (int j = 0; j < ctx->nimpls; j++)
    if (ctx->impls[j] >= 1 && row->time_us[j] > 0 &&
        (best < 0 || row->time_us[j] < row->time_us[best]))
      best = j;
  return best;
}

static int auto_col(const bench_ctx_t* ctx) {
  for (int j = 0; j < ctx->nimpls; j++)
    if (ctx->impls[j] == FCO_IMPL_AUTO) return j;
  return -1;
}

static void put_num(FILE* f, int w, double v, const char* fmt) {
  if (v < 0 || !isfinite(v)) fprintf(f, " %*s", w, "-");
  else fprintf(f, fmt, w, v);
}

void bench_print_table(FILE* f, bench_ctx_t* ctx, const bench_row_t* rows, int nrows) {
  if (nrows <= 0) return;
  const bench_op_t* op = rows[0].op;
  int wt[BENCH_MAX_IMPLS], wbest = 4;
  for (int j = 0; j < ctx->nimpls; j++) {
    int l = (int)strlen(bench_impl_label(ctx, op, j));
    wt[j] = l + 1 > 9 ? l + 1 : 9;
    if (ctx->impls[j] >= 1 && l > wbest) wbest = l;
  }
  int ac = auto_col(ctx);
  int has_compute = 0;
  for (int i = 0; i < nrows; i++) has_compute |= rows[i].compute_us >= 0;

  fprintf(f, "#%11s %12s %6s", "size", "count", "dtype");
  for (int j = 0; j < ctx->nimpls; j++) fprintf(f, " %*s", wt[j], bench_impl_label(ctx, op, j));
  if (has_compute) fprintf(f, " %9s", "compute");
  fprintf(f, " %*s %8s", wbest, "best", "speedup");
  if (ac >= 0) fprintf(f, " %7s", "auto_x");
  fprintf(f, " %9s %7s\n", "floor", "#wrong");
  fprintf(f, "#%11s %12s %6s", "(B)", "(elts)", "");
  for (int j = 0; j < ctx->nimpls; j++) fprintf(f, " %*s", wt[j], "(us)");
  if (has_compute) fprintf(f, " %9s", "(us)");
  fprintf(f, " %*s %8s", wbest, "", "(x)");
  if (ac >= 0) fprintf(f, " %7s", "(x)");
  fprintf(f, " %9s %7s\n", "(us)", "");

  for (int i = 0; i < nrows; i++) {
    const bench_row_t* r = &rows[i];
    fprintf(f, "%12zu %12zu %6s", r->bytes, r->count, fco_dtype_name(r->dtype));
    for (int j = 0; j < ctx->nimpls; j++) put_num(f, wt[j], r->time_us[j], " %*.2f");
    if (has_compute) put_num(f, 9, r->compute_us, " %*.2f");
    int b = best_fused(ctx, r);
    double t0 = r->time_us[0];
    fprintf(f, " %*s", wbest, b >= 0 ? bench_impl_label(ctx, op, b) : "-");
    put_num(f, 8, b >= 0 && t0 > 0 ? t0 / r->time_us[b] : -1, " %*.2f");
    if (ac >= 0) put_num(f, 7, t0 > 0 && r->time_us[ac] > 0 ? t0 / r->time_us[ac] : -1, " %*.2f");
    put_num(f, 9, r->floor_us, " %*.2f");
    bench_print_wrong(f, ctx, r);
  }
}

/* ---- JSON --------------------------------------------------------------------------------- */

/* Bytes of the well-formed UTF-8 character at s (RFC 3629: no overlong form, no surrogate,
 * at most U+10FFFF), 0 when s does not start one. */
static int utf8_len(const unsigned char* s) {
  const unsigned char c = s[0];
  int n;
  unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s[1] < lo || s[1] > hi) return 0;
  for (int i = 2; i < n; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return n;
}

void bench_header_text(char* s) {
  for (unsigned char* p = (unsigned char*)s; *p;) {
    const int n = utf8_len(p);
    if (n == 0 || *p < 0x20 || *p == 0x7f) *p = '?';
    p += n > 0 ? n : 1;
  }
}

/* A JSON string: quotes, backslashes and control characters escaped; a byte that does not
 * start a well-formed UTF-8 character becomes U+FFFD (a JSON text is UTF-8). */
static void json_str(FILE* f, const char* s) {
  fputc('"', f);
  for (const unsigned char* p = (const unsigned char*)s; p && *p;) {
    const unsigned char c = *p;
    const int n = utf8_len(p);
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else if (n == 0) fputs("\\ufffd", f);
    else fwrite(p, 1, (size_t)n, f);
    p += n > 0 ? n : 1;
  }
  fputc('"', f);
}

static void json_num(FILE* f, double v) {
  if (v < 0 || !isfinite(v)) fputs("null", f);
  else fprintf(f, "%.3f", v);
}

int bench_write_json(FILE* f, bench_ctx_t* ctx, const bench_row_t* rows, int nrows) {
  char date[64], machine[128];
  bench_date_iso(date, sizeof date);
  bench_machine(ctx, machine, sizeof machine);
  fputs("{\"tool\":\"fco-bench\",\"commit\":", f);
  json_str(f, bench_commit());
  fputs(",\"date\":", f);
  json_str(f, date);
  fputs(",\"machine\":", f);
  json_str(f, machine);
  fprintf(f, ",\"gpus\":%d,\"transport\":", bench_gpus_used(ctx));
  json_str(f, fco_transport_name(ctx->transport));
  /* the floors' HBM rate (measured on GPU transports: hbm_measured 1; 2 given; 0 the default) */
  if (ctx->on_gpu)
    fprintf(f, ",\"hbm_gbps\":%.1f,\"hbm_measured\":%d", ctx->hbm_gbps, ctx->hbm_measured);
  fputs(",\"results\":[", f);
  int first = 1;
  for (int i = 0; i < nrows; i++) {
    const bench_row_t* r = &rows[i];
    double t0 = r->time_us[0];
    for (int j = 0; j < ctx->nimpls; j++) {
      double t = r->time_us[j];
      fputs(first ? "\n  " : ",\n  ", f);
      first = 0;
      fputs("{\"op\":", f);
      json_str(f, r->op->name);
      fprintf(f, ",\"shape\":%s,\"dtype\":", r->shape_json);
      json_str(f, fco_dtype_name(r->dtype));
      fputs(",\"impl\":", f);
      json_str(f, bench_impl_label(ctx, r->op, j));
      fprintf(f, ",\"impl_id\":%d,\"time_us\":", ctx->impls[j]);
      json_num(f, t);
      fputs(",\"baseline_us\":", f);
      json_num(f, t0);
      fputs(",\"speedup\":", f);
      if (t0 > 0 && t > 0) fprintf(f, "%.4f", t0 / t);
      else fputs("null", f);
      fputs(",\"floor_us\":", f);
      json_num(f, r->floor_us);
      if (r->peak_tflops > 0) fprintf(f, ",\"peak_tflops\":%.1f", r->peak_tflops);
      fputs(",\"compute_us\":", f);
      json_num(f, r->compute_us);
      fputs(",\"comm_us\":", f);
      json_num(f, r->comm_us);
      if (r->both_us >= 0) {
        fputs(",\"both_us\":", f);
        json_num(f, r->both_us);
      }
      if (r->plan[j][0]) {
        fputs(",\"plan\":", f);
        json_str(f, r->plan[j]);
      }
      if (r->wrong[j] >= 0) fprintf(f, ",\"wrong\":%lld}", r->wrong[j]);
      else fputs(",\"wrong\":null}", f);
    }
  }
  fputs("\n]}\n", f);
  return fflush(f) != 0 || ferror(f) ? -1 : 0;
}

/* ---- element conversions ------------------------------------------------------------------ */

static unsigned f2u(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}

static float u2f(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float bench_bf16_to_float(unsigned short b) { return u2f((unsigned)b << 16); }

unsigned short bench_float_to_bf16(float f) {
  unsigned u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; /* NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                    /* round to nearest even */
  return (unsigned short)(u >> 16);
}

float bench_half_to_float(unsigned short h) {
  unsigned s = (unsigned)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return u2f(s | 0x7f800000u | (m << 13));
  if (e == 0) { /* subnormal or zero */
    float v = ldexpf((float)m, -24);
    return s ? -v : v;
  }
  return u2f(s | ((e + 112) << 23) | (m << 13));
}

unsigned short bench_float_to_half(float f) {
  unsigned u = f2u(f), s = (u >> 16) & 0x8000u;
  float a = fabsf(f);
  if (a != a) return 0x7e00;
  if (a >= 65520.0f) return (unsigned short)(s | 0x7c00);
  if (a < 6.103515625e-05f) { /* subnormal: multiples of 2^-24 */
    return (unsigned short)(s | (unsigned)lrintf(a * 16777216.0f));
  }
  unsigned v = f2u(a);
  unsigned e = (v >> 23) - 112, m = v & 0x7fffffu;
  unsigned h = (e << 10) | (m >> 13);
  unsigned rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* carry into e is fine */
  return (unsigned short)(s | h);
}

void bench_print_wrong(FILE* f, const bench_ctx_t* ctx, const bench_row_t* r) {
  long long wrong = -1; /* "-" when no impl of the row was checked */
  for (int j = 0; j < ctx->nimpls; j++)
    if (r->wrong[j] >= 0) wrong = (wrong < 0 ? 0 : wrong) + r->wrong[j];
  if (wrong < 0) fprintf(f, " %7s\n", "-");
  else fprintf(f, " %7lld\n", wrong);
}

fco_result_t bench_group_end(bench_ctx_t* ctx, fco_result_t first) {
  fco_result_t e = fco_group_end(); /* always close the group, even after a failed call */
  if (first == FCO_OK && e != FCO_OK) {
    first = e;
    ctx->err_rank = 0;
  }
  return first;
}
