/*
 * error.c — error messages (per communicator, per thread without one), the last call's plan
 * (fco_last_plan), debug logging to stderr, environment parameters (a malformed integer knob is
 * said on stderr once, debug or not). The library never prints to stdout and never exits.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static _Thread_local char tls_error[FCO_ERRMSG_LEN];

int fco_debug_enabled(fco_comm_t comm) {
  static int env = -1; /* read once; atomically: ranks' threads may race to it */
  int e = __atomic_load_n(&env, __ATOMIC_RELAXED);
  if (e < 0) {
    e = fco_env_flag("FCO_DEBUG", 0);
    __atomic_store_n(&env, e, __ATOMIC_RELAXED);
  }
  return e || (comm && comm->cfg.debug > 0);
}

static void vlog(fco_comm_t comm, const char* fmt, va_list ap) {
  char line[FCO_ERRMSG_LEN + 64];
  int n = comm ? snprintf(line, sizeof line, "fco[%d/%d] ", comm->rank, comm->nranks)
               : snprintf(line, sizeof line, "fco ");
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  fprintf(stderr, "%s\n", line);
}

void fco_log(fco_comm_t comm, const char* fmt, ...) {
  if (!fco_debug_enabled(comm)) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(comm, fmt, ap);
  va_end(ap);
}

fco_result_t fco_set_error(fco_comm_t comm, fco_result_t code, const char* fmt, ...) {
  char* dst = comm ? comm->last_error : tls_error;
  /* A failing call never leaves the plan of an earlier call behind (fco.h: fco_last_plan). */
  if (comm) comm->last_plan[0] = '\0';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, FCO_ERRMSG_LEN, fmt, ap);
  va_end(ap);
  /* Calls without a comm also leave the message for fco_last_error(NULL). */
  if (comm) memcpy(tls_error, dst, FCO_ERRMSG_LEN);
  /* The first message once the communicator holds an asynchronous error is that error's. */
  if (comm && comm->async_error != FCO_OK && !comm->async_msg[0])
    memcpy(comm->async_msg, dst, FCO_ERRMSG_LEN);
  if (fco_debug_enabled(comm)) {
    char tmp[FCO_ERRMSG_LEN];
    memcpy(tmp, dst, sizeof tmp);
    fco_log(comm, "error %d (%s): %s", (int)code, fco_result_string(code), tmp);
  }
  return code;
}

fco_result_t fco_async_refuse(fco_comm_t comm, const char* fn) {
  if (!comm->async_msg[0])
    snprintf(comm->async_msg, FCO_ERRMSG_LEN, "%s", fco_result_string(comm->async_error));
  char first[FCO_ERRMSG_LEN];
  memcpy(first, comm->async_msg, sizeof first);
  return fco_set_error(comm, comm->async_error, "%s: refused: the communicator holds an earlier "
                       "error: %s", fn, first);
}

const char* fco_last_error(fco_comm_t comm) { return comm ? comm->last_error : tls_error; }

const char* fco_last_plan(fco_comm_t comm) {
  /* A sticky asynchronous error fails every later call, some before they reach the core. */
  if (!comm || comm->async_error != FCO_OK) return "";
  return comm->last_plan;
}

void fco_plan_append(char* plan, const char* fmt, ...) {
  if (!plan || !fmt) return;
  size_t n = strnlen(plan, FCO_PLAN_LEN - 1);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(plan + n, FCO_PLAN_LEN - n, fmt, ap);
  va_end(ap);
}

/* A knob whose value cannot be read is ignored (as if unset) and said so on stderr, once per
 * name for the process: FCO_TIMEOUT_MS=5s must not silently become the 30 s default, nor
 * FCO_GA_TILE=tma3 silently run the default tile. `what` completes "NAME="v" ...". */
static void env_bad(const char* name, const char* v, const char* what) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static char said[32][48];
  static int nsaid;
  pthread_mutex_lock(&mu);
  int seen = 0;
  for (int i = 0; i < nsaid && !seen; i++) seen = strncmp(said[i], name, sizeof said[i] - 1) == 0;
  if (!seen && nsaid < 32) snprintf(said[nsaid++], sizeof said[0], "%s", name);
  pthread_mutex_unlock(&mu);
  if (!seen) fprintf(stderr, "fco: %s=\"%s\" %s: ignored, as if unset\n", name, v, what);
}

static void env_not_int(const char* name, const char* v) {
  env_bad(name, v, "is not an integer (an optional k / M / G suffix, B or iB after it)");
}

/* Length of v without its trailing blanks (string and on/off knobs ignore them). */
static size_t trimmed_len(const char* v) {
  size_t n = strlen(v);
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n')) --n;
  return n;
}

int fco_env_choice(const char* name, const char* const* choices, int dflt) {
  const char* v = getenv(name);
  if (!v || !*v || !choices) return dflt;
  const size_t n = trimmed_len(v);
  char list[256] = "";
  size_t used = 0;
  for (int i = 0; choices[i]; i++) {
    if (strlen(choices[i]) == n && strncasecmp(v, choices[i], n) == 0) return i;
    int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", choices[i]);
    if (w > 0) used = used + (size_t)w < sizeof list ? used + (size_t)w : sizeof list - 1;
  }
  char what[320];
  snprintf(what, sizeof what, "is not one of %s", list);
  env_bad(name, v, what);
  return dflt;
}

int fco_env_flag(const char* name, int dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  const size_t n = trimmed_len(v);
  if (n == 1 && (v[0] == '0' || v[0] == '1')) return v[0] - '0';
  env_bad(name, v, "is not 0 (off) or 1 (on)");
  return dflt;
}

long long fco_env_int(const char* name, long long dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  char* end = NULL;
  /* Decimal, or hex after 0x; never octal (strtoll's base 0 read "010" as 8). A value out of
   * long long's range, also after its suffix, is not taken (it once wrapped, or clamped
   * silently). */
  const char* p = v;
  while (*p == ' ' || *p == '\t' || *p == '\n') ++p;
  if (*p == '+' || *p == '-') ++p;
  const int hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
  errno = 0;
  long long x = strtoll(v, &end, hex ? 16 : 10);
  if (end == v || errno == ERANGE) {
    env_not_int(name, v);
    return dflt;
  }
  /* Size suffixes, so FCO_ALLREDUCE_ONESHOT_MAX=4M (or 4MB, 4MiB) works. */
  int shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: break;
  }
  if (shift) {
    if (x > (LLONG_MAX >> shift) || x < LLONG_MIN / (1LL << shift)) { /* -2^33 G: LLONG_MIN */
      env_not_int(name, v);
      return dflt;
    }
    x *= 1LL << shift;
    ++end;
    if (end[0] == 'i' && (end[1] == 'B' || end[1] == 'b')) end += 2;
    else if (*end == 'B' || *end == 'b') ++end;
  }
  while (*end == ' ' || *end == '\t' || *end == '\n') ++end;
  if (*end) {
    env_not_int(name, v);
    return dflt;
  }
  return x;
}
