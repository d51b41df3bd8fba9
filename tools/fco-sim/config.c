/*
 * config.c — the line-based configuration format of fco-sim (see config.h). Table-driven: a
 * key is one row of kKeys (model, name, kind, field, range, required).
 */
#include "config.h"
#include "json.h" /* sim_read_file */

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h" /* sim_dtype_bytes */

const char* sim_model_name(int model) {
  static const char* const kNames[SIM_MODEL_NUM] = {"dlrm", "decode", "moe"};
  return model >= 0 && model < SIM_MODEL_NUM ? kNames[model] : "?";
}

const char* sim_sharding_name(int sharding) {
  static const char* const kNames[SIM_SHARD_NUM] = {"table", "column", "grid"};
  return sharding >= 0 && sharding < SIM_SHARD_NUM ? kNames[sharding] : "?";
}

enum { K_NUM, K_INT, K_LIST, K_DTYPE, K_INTER, K_SHARD, K_NAME };

typedef struct {
  int model;
  const char* key;
  int kind;
  size_t off;       /* double (K_NUM, K_INT, K_DTYPE), int (K_INTER, K_SHARD), char[] (K_NAME) */
  size_t count_off; /* K_LIST: the int count; the list is double[] at off */
  int max_count;
  double min, max;
  int required;
} key_spec_t;

#define F(x) offsetof(sim_config_t, x)
#define BIG 1e15
static const key_spec_t kKeys[] = {
    {SIM_MODEL_DLRM, "name", K_NAME, F(name), 0, 0, 0, 0, 0},
    {SIM_MODEL_DLRM, "embedding_dim", K_INT, F(emb_dim), 0, 0, 1, 65536, 1},
    {SIM_MODEL_DLRM, "rows", K_LIST, F(rows), F(num_tables), SIM_MAX_TABLES, 1, BIG, 1},
    {SIM_MODEL_DLRM, "pooling", K_LIST, F(pooling), 0, SIM_MAX_TABLES, 1e-6, 1e6, 1},
    {SIM_MODEL_DLRM, "batch_per_gpu", K_NUM, F(batch_per_gpu), 0, 0, 1, 1e9, 0},
    {SIM_MODEL_DLRM, "global_batch", K_NUM, F(global_batch), 0, 0, 1, 1e12, 0},
    {SIM_MODEL_DLRM, "dense_features", K_INT, F(dense_features), 0, 0, 0, 1e6, 1},
    {SIM_MODEL_DLRM, "bottom_mlp", K_LIST, F(bottom), F(num_bottom), SIM_MAX_LAYERS, 1, 1e6, 1},
    {SIM_MODEL_DLRM, "top_mlp", K_LIST, F(top), F(num_top), SIM_MAX_LAYERS, 1, 1e6, 1},
    {SIM_MODEL_DLRM, "interaction", K_INTER, F(interaction), 0, 0, 0, 0, 1},
    {SIM_MODEL_DLRM, "dcn_layers", K_INT, F(dcn_layers), 0, 0, 1, 64, 0},
    {SIM_MODEL_DLRM, "dcn_low_rank", K_INT, F(dcn_low_rank), 0, 0, 1, 1e6, 0},
    {SIM_MODEL_DLRM, "dtype", K_DTYPE, F(dtype_bytes), 0, 0, 0, 0, 0},
    {SIM_MODEL_DLRM, "grad_dtype", K_DTYPE, F(grad_bytes), 0, 0, 0, 0, 0},
    {SIM_MODEL_DLRM, "sharding", K_SHARD, F(sharding), 0, 0, 0, 0, 0},
    {SIM_MODEL_DLRM, "min_shard_dim", K_INT, F(min_shard_dim), 0, 0, 1, 65536, 0},

    {SIM_MODEL_DECODE, "name", K_NAME, F(name), 0, 0, 0, 0, 0},
    {SIM_MODEL_DECODE, "hidden", K_INT, F(hidden), 0, 0, 1, 1e6, 1},
    {SIM_MODEL_DECODE, "ffn", K_INT, F(ffn), 0, 0, 1, 1e7, 1},
    {SIM_MODEL_DECODE, "layers", K_INT, F(layers), 0, 0, 1, 1e4, 1},
    {SIM_MODEL_DECODE, "heads", K_INT, F(heads), 0, 0, 1, 1e4, 1},
    {SIM_MODEL_DECODE, "kv_heads", K_INT, F(kv_heads), 0, 0, 1, 1e4, 1},
    {SIM_MODEL_DECODE, "head_dim", K_INT, F(head_dim), 0, 0, 1, 1e5, 0},
    {SIM_MODEL_DECODE, "vocab", K_INT, F(vocab), 0, 0, 0, 1e8, 0},
    {SIM_MODEL_DECODE, "batch", K_INT, F(batch), 0, 0, 1, 1e6, 1},
    {SIM_MODEL_DECODE, "context", K_INT, F(context), 0, 0, 0, 1e9, 1},
    {SIM_MODEL_DECODE, "gated", K_INT, F(gated), 0, 0, 0, 1, 0},
    {SIM_MODEL_DECODE, "dtype", K_DTYPE, F(dtype_bytes), 0, 0, 0, 0, 0},

    {SIM_MODEL_MOE, "name", K_NAME, F(name), 0, 0, 0, 0, 0},
    {SIM_MODEL_MOE, "hidden", K_INT, F(hidden), 0, 0, 1, 1e6, 1},
    {SIM_MODEL_MOE, "expert_ffn", K_INT, F(expert_ffn), 0, 0, 1, 1e7, 1},
    {SIM_MODEL_MOE, "experts", K_INT, F(experts), 0, 0, 1, 1e6, 1},
    {SIM_MODEL_MOE, "top_k", K_INT, F(top_k), 0, 0, 1, 1e3, 1},
    {SIM_MODEL_MOE, "tokens_per_gpu", K_INT, F(tokens_per_gpu), 0, 0, 1, 1e9, 1},
    {SIM_MODEL_MOE, "gated", K_INT, F(gated), 0, 0, 0, 1, 0},
    {SIM_MODEL_MOE, "zipf", K_NUM, F(zipf), 0, 0, 0, 10, 0},
    {SIM_MODEL_MOE, "dtype", K_DTYPE, F(dtype_bytes), 0, 0, 0, 0, 0},
};
#undef F
#define NUM_KEYS ((int)(sizeof kKeys / sizeof kKeys[0]))

static int errf(char* err, size_t len, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

static double* dfield(sim_config_t* c, size_t off) { return (double*)(void*)((char*)c + off); }
static int* ifield(sim_config_t* c, size_t off) { return (int*)(void*)((char*)c + off); }

static char* trim(char* s) {
  while (isspace((unsigned char)*s)) s++;
  char* e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
  return s;
}

/* One number: decimal or scientific, nothing else on the token. */
static int parse_number(const char* tok, double* out) {
  char* end;
  if (!*tok) return -1;
  double v = strtod(tok, &end);
  if (*trim(end) || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int check_range(const key_spec_t* k, double v, const char* name, int line, char* err,
                       size_t len, const char* what) {
  if (k->kind == K_INT || (k->kind == K_LIST && strcmp(k->key, "pooling"))) {
    if (v != floor(v))
      return errf(err, len, "%s:%d: %s%s is %g: must be a whole number", name, line, k->key, what,
                  v);
  }
  if (v < k->min || v > k->max)
    return errf(err, len, "%s:%d: %s%s is %g: must be in [%g, %g]", name, line, k->key, what, v,
                k->min, k->max);
  return 0;
}

static int set_value(sim_config_t* c, const key_spec_t* k, char* val, const char* name, int line,
                     char* err, size_t len) {
  double v;
  switch (k->kind) {
    case K_NAME:
      if (strlen(val) >= sizeof c->name)
        return errf(err, len, "%s:%d: name is longer than %zu characters", name, line,
                    sizeof c->name - 1);
      snprintf(c->name, sizeof c->name, "%s", val);
      return 0;
    case K_NUM:
    case K_INT:
      if (parse_number(val, &v))
        return errf(err, len, "%s:%d: %s = '%s': not a number", name, line, k->key, val);
      if (check_range(k, v, name, line, err, len, "")) return -1;
      *dfield(c, k->off) = v;
      return 0;
    case K_DTYPE: {
      int b = sim_dtype_bytes(val);
      if (!b)
        return errf(err, len, "%s:%d: %s = '%s': want bf16, fp16, fp32 or fp8", name, line,
                    k->key, val);
      *dfield(c, k->off) = b;
      return 0;
    }
    case K_INTER:
      if (!strcmp(val, "dot")) *ifield(c, k->off) = SIM_INTER_DOT;
      else if (!strcmp(val, "dcn")) *ifield(c, k->off) = SIM_INTER_DCN;
      else return errf(err, len, "%s:%d: interaction = '%s': want dot or dcn", name, line, val);
      return 0;
    case K_SHARD:
      for (int m = 0; m < SIM_SHARD_NUM; m++)
        if (!strcmp(val, sim_sharding_name(m))) {
          *ifield(c, k->off) = m;
          return 0;
        }
      return errf(err, len, "%s:%d: sharding = '%s': want table, column or grid", name, line, val);
    case K_LIST: {
      double* arr = dfield(c, k->off);
      int n = 0;
      char* p = val;
      /* empty items ("1,,2", trailing ",") are errors: a silent skip would shift tables */
      for (;;) {
        char* comma = strchr(p, ',');
        if (comma) *comma = '\0';
        char* tok = trim(p);
        if (n >= k->max_count)
          return errf(err, len, "%s:%d: %s has more than %d values", name, line, k->key,
                      k->max_count);
        if (!*tok)
          return errf(err, len, "%s:%d: %s: value %d is empty", name, line, k->key, n + 1);
        if (parse_number(tok, &v))
          return errf(err, len, "%s:%d: %s: value %d '%s' is not a number", name, line, k->key,
                      n + 1, tok);
        char what[32];
        snprintf(what, sizeof what, " value %d", n + 1);
        if (check_range(k, v, name, line, err, len, what)) return -1;
        arr[n++] = v;
        if (!comma) break;
        p = comma + 1;
      }
      if (k->count_off) *ifield(c, k->count_off) = n; /* pooling's count is checked later */
      return n;
    }
  }
  return 0;
}

static void set_defaults(sim_config_t* c) {
  memset(c, 0, sizeof *c);
  c->model = -1;
  c->interaction = -1;
  c->dtype_bytes = 2;
  c->grad_bytes = 4;
  c->sharding = SIM_SHARD_TABLE;
  c->min_shard_dim = 16;
  c->gated = 1;
}

static int find_key(int model, const char* key) {
  for (int i = 0; i < NUM_KEYS; i++)
    if (kKeys[i].model == model && !strcmp(kKeys[i].key, key)) return i;
  return -1;
}

int sim_config_parse(const char* text, const char* name, sim_config_t* c, char* err,
                     size_t err_len) {
  set_defaults(c);
  snprintf(c->path, sizeof c->path, "%s", name);
  int key_line[NUM_KEYS] = {0};
  int section_line = 0, num_pooling = 0;
  const char* p = text;
  for (int line = 1; *p; line++) {
    const char* eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    char buf[16384];
    if (n >= sizeof buf)
      return errf(err, err_len, "%s:%d: line longer than %zu characters", name, line,
                  sizeof buf - 1);
    memcpy(buf, p, n);
    buf[n] = '\0';
    p = eol ? eol + 1 : p + n;
    char* hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char* s = trim(buf);
    if (!*s) continue;
    if (*s == '[') {
      char* close = strchr(s, ']');
      if (!close || *trim(close + 1))
        return errf(err, err_len, "%s:%d: bad section header '%s': want [dlrm], [decode] or [moe]",
                    name, line, s);
      *close = '\0';
      char* sec = trim(s + 1);
      int model = -1;
      for (int m = 0; m < SIM_MODEL_NUM; m++)
        if (!strcmp(sec, sim_model_name(m))) model = m;
      if (model < 0)
        return errf(err, err_len, "%s:%d: unknown section [%s]: want [dlrm], [decode] or [moe]",
                    name, line, sec);
      if (c->model >= 0)
        return errf(err, err_len,
                    "%s:%d: a configuration holds one model: [%s] follows [%s] (line %d)", name,
                    line, sec, sim_model_name(c->model), section_line);
      c->model = model;
      section_line = line;
      continue;
    }
    char* eq = strchr(s, '=');
    if (!eq) return errf(err, err_len, "%s:%d: expected 'key = value', got '%s'", name, line, s);
    *eq = '\0';
    char* key = trim(s);
    char* val = trim(eq + 1);
    if (c->model < 0)
      return errf(err, err_len, "%s:%d: '%s' before any section: start with [dlrm], [decode] or [moe]",
                  name, line, key);
    int k = find_key(c->model, key);
    if (k < 0)
      return errf(err, err_len, "%s:%d: unknown key '%s' in [%s] (keys: tools/fco-sim/README.md)",
                  name, line, key, sim_model_name(c->model));
    if (key_line[k])
      return errf(err, err_len, "%s:%d: '%s' is set twice (first on line %d)", name, line, key,
                  key_line[k]);
    if (!*val) return errf(err, err_len, "%s:%d: '%s' has no value", name, line, key);
    key_line[k] = line;
    int r = set_value(c, &kKeys[k], val, name, line, err, err_len);
    if (r < 0) return -1;
    if (!strcmp(key, "pooling")) num_pooling = r;
  }
  if (c->model < 0)
    return errf(err, err_len, "%s:1: no model section: want [dlrm], [decode] or [moe]", name);
  for (int i = 0; i < NUM_KEYS; i++)
    if (kKeys[i].model == c->model && kKeys[i].required && !key_line[i])
      return errf(err, err_len, "%s:%d: [%s] lacks the required key '%s'", name, section_line,
                  sim_model_name(c->model), kKeys[i].key);
#define LINE(k) key_line[find_key(c->model, k)]
  if (c->model == SIM_MODEL_DLRM) {
    if (num_pooling != c->num_tables)
      return errf(err, err_len, "%s:%d: 'pooling' has %d values but 'rows' (line %d) has %d", name,
                  LINE("pooling"), num_pooling, LINE("rows"), c->num_tables);
    int has_b = LINE("batch_per_gpu") != 0, has_g = LINE("global_batch") != 0;
    if (has_b == has_g)
      return errf(err, err_len,
                  has_b ? "%s:%d: set batch_per_gpu (weak scaling) or global_batch (strong "
                          "scaling), not both"
                        : "%s:%d: [dlrm] needs batch_per_gpu (weak scaling) or global_batch "
                          "(strong scaling)",
                  name, has_b ? LINE("global_batch") : section_line);
    if (c->bottom[c->num_bottom - 1] != c->emb_dim)
      return errf(err, err_len,
                  "%s:%d: bottom_mlp ends in %g but embedding_dim (line %d) is %g: the bottom "
                  "MLP's output meets the embeddings in the interaction",
                  name, LINE("bottom_mlp"), c->bottom[c->num_bottom - 1], LINE("embedding_dim"),
                  c->emb_dim);
    if (c->interaction == SIM_INTER_DCN && (!LINE("dcn_layers") || !LINE("dcn_low_rank")))
      return errf(err, err_len, "%s:%d: interaction = dcn needs dcn_layers and dcn_low_rank", name,
                  LINE("interaction"));
    if (c->interaction == SIM_INTER_DOT && (LINE("dcn_layers") || LINE("dcn_low_rank")))
      return errf(err, err_len, "%s:%d: dcn_* keys are set but interaction (line %d) is dot", name,
                  LINE("dcn_layers") ? LINE("dcn_layers") : LINE("dcn_low_rank"),
                  LINE("interaction"));
    if (c->min_shard_dim > c->emb_dim)
      return errf(err, err_len, "%s:%d: min_shard_dim %g exceeds embedding_dim %g", name,
                  LINE("min_shard_dim"), c->min_shard_dim, c->emb_dim);
  } else if (c->model == SIM_MODEL_DECODE) {
    if (!LINE("head_dim")) {
      if (fmod(c->hidden, c->heads) != 0)
        return errf(err, err_len, "%s:%d: hidden %g is not a multiple of heads %g: set head_dim",
                    name, LINE("heads"), c->hidden, c->heads);
      c->head_dim = c->hidden / c->heads;
    }
    if (c->kv_heads > c->heads || fmod(c->heads, c->kv_heads) != 0)
      return errf(err, err_len, "%s:%d: kv_heads %g must divide heads %g (line %d)", name,
                  LINE("kv_heads"), c->kv_heads, c->heads, LINE("heads"));
  } else if (c->model == SIM_MODEL_MOE) {
    if (c->top_k > c->experts)
      return errf(err, err_len, "%s:%d: top_k %g exceeds experts %g (line %d)", name,
                  LINE("top_k"), c->top_k, c->experts, LINE("experts"));
  }
#undef LINE
  if (!c->name[0]) {
    const char* base = strrchr(name, '/');
    snprintf(c->name, sizeof c->name, "%s", base ? base + 1 : name);
  }
  return 0;
}

int sim_config_load(const char* path, sim_config_t* c, char* err, size_t err_len) {
  char* text = NULL;
  size_t len = 0;
  int rd = sim_read_file(path, &text, &len);
  if (rd != 0) {
    set_defaults(c);
    return errf(err, err_len, rd == 1 ? "%s: cannot open configuration file" : "%s: out of memory",
                path);
  }
  if (memchr(text, '\0', len)) {
    free(text);
    set_defaults(c);
    return errf(err, err_len, "%s: binary file (NUL byte), not a configuration", path);
  }
  int rc = sim_config_parse(text, path, c, err, err_len);
  free(text);
  return rc;
}
