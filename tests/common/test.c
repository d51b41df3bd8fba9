/*
 * test.c — the transport-independent half of the test helpers (see test.h): failing and
 * skipping, seeds and input values, f16/bf16 conversion, forking ranks, time.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

static char g_context[512];
static uint64_t g_seed, g_seed_state;
static int g_seed_set;

void t_fail(const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(stdout);
  fprintf(stderr, "FAIL %s:%d: %s\n", file, line, msg);
  if (g_context[0]) fprintf(stderr, "  while: %s\n", g_context);
  if (g_seed_set)
    fprintf(stderr, "  reproduce with FCO_TEST_SEED=0x%016llx\n", (unsigned long long)g_seed);
  fflush(stderr);
  exit(1);
}

void t_skip(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  printf("SKIP: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  exit(T_SKIP);
}

void t_context(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_context, sizeof g_context, fmt, ap);
  va_end(ap);
  static int trace = -1; /* FCO_TEST_TRACE=1: every context as it is set (where a hang is) */
  if (trace < 0) trace = fco_env_flag("FCO_TEST_TRACE", 0); /* 0 / 1, else said and off */
  if (trace) {
    fprintf(stderr, "> %s\n", g_context);
    fflush(stderr);
  }
}

/* Killed by the runner's timeout (SIGTERM): say what the test was doing (async-signal-safe). */
static void on_term(int sig) {
  static const char k[] = "killed (a hang?) while: ";
  if (write(2, k, sizeof k - 1) < 0 || write(2, g_context, strnlen(g_context, sizeof g_context)) < 0 ||
      write(2, "\n", 1) < 0) {
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

int t_contains(const char* h, const char* n) {
  size_t ln = strlen(n);
  for (; *h; h++) {
    size_t i = 0;
    while (i < ln && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)n[i])) i++;
    if (i == ln) return 1;
  }
  return ln == 0;
}

static int word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

int t_contains_word(const char* h, const char* n) {
  size_t ln = strlen(n);
  if (ln == 0) return 1;
  for (const char* p = h; *p; p++) {
    if (strncasecmp(p, n, ln)) continue;
    int left = p == h || !word_char(p[-1]) || !word_char(n[0]);
    int right = !p[ln] || !word_char(p[ln]) || !word_char(n[ln - 1]);
    if (left && right) return 1;
  }
  return 0;
}

/* ---- tuning knobs ----------------------------------------------------------------------- */
static struct {
  char* name;
  char* caller; /* the caller's value, NULL when it had none */
} g_knobs[64];
static int g_nknobs;

/* The knob's entry, recording the caller's value at the first touch. */
static int knob_entry(const char* name) {
  for (int i = 0; i < g_nknobs; i++)
    if (!strcmp(g_knobs[i].name, name)) return i;
  if (g_nknobs == (int)(sizeof g_knobs / sizeof g_knobs[0]))
    t_fail(__FILE__, __LINE__, "t_knob: more than %d knobs (raise g_knobs)", g_nknobs);
  const char* v = getenv(name);
  g_knobs[g_nknobs].name = strdup(name);
  g_knobs[g_nknobs].caller = v ? strdup(v) : NULL;
  if (!g_knobs[g_nknobs].name || (v && !g_knobs[g_nknobs].caller))
    t_fail(__FILE__, __LINE__, "t_knob: out of memory");
  return g_nknobs++;
}

static void knob_put(const char* name, const char* value) {
  if (value ? setenv(name, value, 1) : unsetenv(name))
    t_fail(__FILE__, __LINE__, "t_knob: cannot set %s: %s", name, strerror(errno));
}

void t_knob_set(const char* name, const char* value) {
  knob_entry(name);
  knob_put(name, value);
}

void t_knob_reset(const char* name) { knob_put(name, g_knobs[knob_entry(name)].caller); }

/* ---- seeds ---------------------------------------------------------------------------- */
uint64_t t_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t t_seed_init(void) {
  if (g_seed_set) return g_seed;
  const char* env = getenv("FCO_TEST_SEED");
  if (env && *env) {
    char* end = NULL;
    errno = 0;
    g_seed = strtoull(env, &end, 0);
    if (end == env || *end || errno) {
      fprintf(stderr, "FAIL: FCO_TEST_SEED='%s' is not a number\n", env);
      exit(1);
    }
  } else {
    uint64_t x = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
      if (read(fd, &x, sizeof x) != (ssize_t)sizeof x) x = 0;
      close(fd);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g_seed = t_mix(x ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)getpid());
  }
  g_seed_set = 1;
  g_seed_state = g_seed;
  signal(SIGTERM, on_term);
  printf("seed 0x%016llx (FCO_TEST_SEED=0x%016llx reproduces this run)\n",
         (unsigned long long)g_seed, (unsigned long long)g_seed);
  fflush(stdout);
  return g_seed;
}

uint64_t t_next_seed(void) {
  if (!g_seed_set) t_seed_init();
  g_seed_state += 0x632BE59BD9B4E019ull;
  return t_mix(g_seed_state);
}

static int amplitude(int nranks) {
  int a = 128 / (nranks > 0 ? nranks : 1);
  return a > 16 ? 16 : a < 1 ? 1 : a;
}

int t_val(uint64_t seed, int rank, size_t i, int nranks) {
  int a = amplitude(nranks);
  uint64_t h = t_mix(seed ^ ((uint64_t)(unsigned)rank << 48) ^ (uint64_t)i);
  return (int)(h % (uint64_t)(2 * a + 1)) - a;
}

int t_sum(uint64_t seed, size_t i, int nranks) {
  int s = 0;
  for (int r = 0; r < nranks; r++) s += t_val(seed, r, i, nranks);
  return s;
}

/* ---- dtypes ----------------------------------------------------------------------------- */
static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float t_half_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  if (exp == 31) return u2f(sign | 0x7f800000u | (man << 13));
  return u2f(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t t_f32_to_half(float f) {
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) { /* subnormal half (or zero) */
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* carry into the exponent is right */
  return (uint16_t)(sign | h);
}

float t_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t t_f32_to_bf16(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float t_get_elem(fco_dtype_t dtype, const void* buf, size_t i) {
  switch (dtype) {
    case FCO_F32: return ((const float*)buf)[i];
    case FCO_F16: return t_half_to_f32(((const uint16_t*)buf)[i]);
    case FCO_BF16: return t_bf16_to_f32(((const uint16_t*)buf)[i]);
    default: t_fail(__FILE__, __LINE__, "t_get_elem: dtype %d", (int)dtype);
  }
}

void t_set_elem(fco_dtype_t dtype, void* buf, size_t i, float v) {
  switch (dtype) {
    case FCO_F32: ((float*)buf)[i] = v; break;
    case FCO_F16: ((uint16_t*)buf)[i] = t_f32_to_half(v); break;
    case FCO_BF16: ((uint16_t*)buf)[i] = t_f32_to_bf16(v); break;
    default: t_fail(__FILE__, __LINE__, "t_set_elem: dtype %d", (int)dtype);
  }
}

void t_fill_input(fco_dtype_t dtype, void* buf, size_t count, uint64_t seed, int rank,
                  int nranks) {
  for (size_t i = 0; i < count; i++)
    t_set_elem(dtype, buf, i, (float)t_val(seed, rank, i, nranks));
}

/* ---- processes and time ------------------------------------------------------------------- */
double t_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void t_fork_run(int n, int (*fn)(int idx, void* arg), void* arg, int timeout_s, int* status) {
  pid_t pids[T_MAX_RANKS];
  if (n > T_MAX_RANKS) t_fail(__FILE__, __LINE__, "t_fork_run: %d children", n);
  fflush(NULL); /* or buffered output would be printed by every child too */
  for (int i = 0; i < n; i++) {
    status[i] = -1;
    pids[i] = fork();
    if (pids[i] < 0) t_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (pids[i] == 0) {
      alarm((unsigned)timeout_s + 5); /* backstop if the parent dies */
      int rc = fn(i, arg);
      fflush(NULL);
      _exit(rc);
    }
  }
  double deadline = t_now_ms() + 1e3 * timeout_s;
  int left = n;
  while (left > 0) {
    for (int i = 0; i < n; i++) {
      if (pids[i] <= 0) continue;
      int st;
      pid_t p = waitpid(pids[i], &st, WNOHANG);
      if (p == pids[i]) {
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (!WIFEXITED(st))
          fprintf(stderr, "child %d (pid %d) died by signal %d\n", i, (int)pids[i],
                  WIFSIGNALED(st) ? WTERMSIG(st) : -1);
        pids[i] = 0;
        left--;
      }
    }
    if (left == 0) break;
    if (t_now_ms() > deadline) {
      for (int i = 0; i < n; i++) {
        if (pids[i] <= 0) continue;
        fprintf(stderr, "child %d (pid %d) still running after %d s: killing it\n", i,
                (int)pids[i], timeout_s);
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
        pids[i] = 0;
      }
      break;
    }
    usleep(2000);
  }
}

int t_quick(void) { return fco_env_flag("FCO_TEST_QUICK", 0); }
