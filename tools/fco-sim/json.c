/*
 * json.c — recursive-descent JSON reader for fco-sim (see json.h). Accepts RFC 8259 JSON;
 * \u escapes are decoded to UTF-8 (surrogate pairs included). Depth is bounded so a hostile
 * file cannot exhaust the stack.
 */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct {
  const char* s;
  const char* p;
  char* err;
  size_t err_len;
  int failed;
  /* where() resumes from the last place it was asked about, on line mark_line starting at
   * mark_bol: the parser only moves forward, so a parse reads the text once for its line
   * numbers (rescanning from the start for every node took 15 s on a 769 KB file) */
  const char* mark;
  const char* mark_bol;
  int mark_line;
} parser_t;

static void where(parser_t* ps, const char* at, int* line, int* col) {
  if (!ps->mark || at < ps->mark) { /* before the mark (a failed escape steps back): restart */
    ps->mark = ps->mark_bol = ps->s;
    ps->mark_line = 1;
  }
  const char* q = ps->mark;
  for (; q < at && *q; q++)
    if (*q == '\n') {
      ps->mark_line++;
      ps->mark_bol = q + 1;
    }
  ps->mark = q;
  *line = ps->mark_line;
  *col = (int)(q - ps->mark_bol) + 1;
}

static void fail(parser_t* ps, const char* fmt, ...) {
  if (ps->failed) return;
  ps->failed = 1;
  int line, col;
  where(ps, ps->p, &line, &col);
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (ps->err && ps->err_len) snprintf(ps->err, ps->err_len, "line %d, column %d: %s", line, col, msg);
}

static void skip_ws(parser_t* ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r') ps->p++;
}

static sim_json_t* new_node(parser_t* ps, sim_json_type_t t) {
  sim_json_t* n = calloc(1, sizeof *n);
  if (!n) {
    fail(ps, "out of memory");
    return NULL;
  }
  n->type = t;
  int col;
  where(ps, ps->p, &n->line, &col);
  return n;
}

static int hex4(parser_t* ps, unsigned* out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = ps->p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else {
      fail(ps, "bad \\u escape");
      return 0;
    }
  }
  ps->p += 4;
  *out = v;
  return 1;
}

static size_t put_utf8(char* o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* At the opening quote; returns a malloc'd unescaped string (UTF-8 never grows past the
 * escaped length, so the input length bounds the output). */
static char* parse_string_raw(parser_t* ps) {
  ps->p++; /* '"' */
  const char* start = ps->p;
  const char* q = start;
  while (*q && *q != '"') q += (q[0] == '\\' && q[1]) ? 2 : 1;
  char* out = malloc((size_t)(q - start) + 5);
  if (!out) {
    fail(ps, "out of memory");
    return NULL;
  }
  size_t n = 0;
  for (;;) {
    char c = *ps->p;
    if (c == '\0') {
      fail(ps, "unterminated string");
      free(out);
      return NULL;
    }
    if (c == '"') {
      ps->p++;
      break;
    }
    if ((unsigned char)c < 0x20) {
      fail(ps, "control character in string");
      free(out);
      return NULL;
    }
    if (c != '\\') {
      out[n++] = c;
      ps->p++;
      continue;
    }
    ps->p++;
    char e = *ps->p++;
    switch (e) {
      case '"': out[n++] = '"'; break;
      case '\\': out[n++] = '\\'; break;
      case '/': out[n++] = '/'; break;
      case 'b': out[n++] = '\b'; break;
      case 'f': out[n++] = '\f'; break;
      case 'n': out[n++] = '\n'; break;
      case 'r': out[n++] = '\r'; break;
      case 't': out[n++] = '\t'; break;
      case 'u': {
        unsigned cp;
        if (!hex4(ps, &cp)) { free(out); return NULL; }
        if (cp >= 0xD800 && cp < 0xDC00 && ps->p[0] == '\\' && ps->p[1] == 'u') {
          unsigned lo;
          const char* next = ps->p;
          ps->p += 2;
          if (!hex4(ps, &lo)) { free(out); return NULL; }
          if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          else ps->p = next; /* not a pair: the next escape is a character of its own */
        }
        n += put_utf8(out + n, cp);
        break;
      }
      default:
        ps->p--;
        fail(ps, "bad escape '\\%c'", e ? e : '0');
        free(out);
        return NULL;
    }
  }
  out[n] = '\0';
  return out;
}

static sim_json_t* parse_value(parser_t* ps, int depth);

static sim_json_t* parse_container(parser_t* ps, int depth, int is_object) {
  sim_json_t* node = new_node(ps, is_object ? SIM_JSON_OBJECT : SIM_JSON_ARRAY);
  if (!node) return NULL;
  char close = is_object ? '}' : ']';
  ps->p++;
  skip_ws(ps);
  if (*ps->p == close) {
    ps->p++;
    return node;
  }
  sim_json_t** tail = &node->child;
  for (;;) {
    char* key = NULL;
    skip_ws(ps);
    if (is_object) {
      if (*ps->p != '"') {
        fail(ps, "expected a member name in quotes");
        break;
      }
      key = parse_string_raw(ps);
      if (!key) break;
      skip_ws(ps);
      if (*ps->p != ':') {
        fail(ps, "expected ':' after member name \"%s\"", key);
        free(key);
        break;
      }
      ps->p++;
    }
    sim_json_t* v = parse_value(ps, depth + 1);
    if (!v) {
      free(key);
      break;
    }
    v->key = key;
    *tail = v;
    tail = &v->next;
    skip_ws(ps);
    if (*ps->p == ',') {
      ps->p++;
      continue;
    }
    if (*ps->p == close) {
      ps->p++;
      return node;
    }
    fail(ps, "expected ',' or '%c'", close);
    break;
  }
  sim_json_free(node);
  return NULL;
}

static sim_json_t* parse_value(parser_t* ps, int depth) {
  if (depth > JSON_MAX_DEPTH) {
    fail(ps, "nested deeper than %d levels", JSON_MAX_DEPTH);
    return NULL;
  }
  skip_ws(ps);
  char c = *ps->p;
  if (c == '{' || c == '[') return parse_container(ps, depth, c == '{');
  if (c == '"') {
    sim_json_t* n = new_node(ps, SIM_JSON_STRING);
    if (!n) return NULL;
    n->string = parse_string_raw(ps);
    if (!n->string) {
      free(n);
      return NULL;
    }
    return n;
  }
  static const struct { const char* word; sim_json_type_t t; double v; } kWords[] = {
      {"true", SIM_JSON_BOOL, 1}, {"false", SIM_JSON_BOOL, 0}, {"null", SIM_JSON_NULL, 0}};
  for (size_t i = 0; i < sizeof kWords / sizeof kWords[0]; i++) {
    size_t len = strlen(kWords[i].word);
    if (!strncmp(ps->p, kWords[i].word, len)) {
      sim_json_t* n = new_node(ps, kWords[i].t);
      if (!n) return NULL;
      n->number = kWords[i].v;
      ps->p += len;
      return n;
    }
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    /* JSON's grammar is stricter than strtod's (no hex, inf, leading '+' or '.'). */
    const char* q = ps->p;
    if (*q == '-') q++;
    int ok = *q >= '0' && *q <= '9';
    if (ok && *q++ != '0')
      while (*q >= '0' && *q <= '9') q++;
    if (ok && *q == '.') {
      ok = q[1] >= '0' && q[1] <= '9';
      for (q++; *q >= '0' && *q <= '9';) q++;
    }
    if (ok && (*q == 'e' || *q == 'E')) {
      q += q[1] == '+' || q[1] == '-' ? 2 : 1;
      ok = *q >= '0' && *q <= '9';
      while (*q >= '0' && *q <= '9') q++;
    }
    char* end;
    double v = ok ? strtod(ps->p, &end) : 0;
    if (!ok || end != q) { /* strtod read more: "0x10", "01" */
      fail(ps, "bad number");
      return NULL;
    }
    sim_json_t* n = new_node(ps, SIM_JSON_NUMBER);
    if (!n) return NULL;
    n->number = v;
    ps->p = end;
    return n;
  }
  if (c == '\0') fail(ps, "unexpected end of input");
  else fail(ps, "unexpected character '%c'", c);
  return NULL;
}

sim_json_t* sim_json_parse(const char* text, char* err, size_t err_len) {
  parser_t ps = {text, text, err, err_len, 0, NULL, NULL, 0};
  if (err && err_len) err[0] = '\0';
  sim_json_t* root = parse_value(&ps, 0);
  if (!root) return NULL;
  skip_ws(&ps);
  if (*ps.p) {
    fail(&ps, "trailing characters after the JSON value");
    sim_json_free(root);
    return NULL;
  }
  return root;
}

void sim_json_free(sim_json_t* j) {
  while (j) {
    sim_json_t* next = j->next;
    sim_json_free(j->child);
    free(j->string);
    free(j->key);
    free(j);
    j = next;
  }
}

const sim_json_t* sim_json_get(const sim_json_t* j, const char* key) {
  if (!j || j->type != SIM_JSON_OBJECT) return NULL;
  for (const sim_json_t* c = j->child; c; c = c->next)
    if (c->key && !strcmp(c->key, key)) return c;
  return NULL;
}

int sim_json_len(const sim_json_t* j) {
  int n = 0;
  if (j && (j->type == SIM_JSON_ARRAY || j->type == SIM_JSON_OBJECT))
    for (const sim_json_t* c = j->child; c; c = c->next) n++;
  return n;
}

int sim_json_num(const sim_json_t* j, const char* key, double* out) {
  const sim_json_t* v = sim_json_get(j, key);
  if (!v || v->type != SIM_JSON_NUMBER) return 0;
  *out = v->number;
  return 1;
}

const char* sim_json_str(const sim_json_t* j, const char* key) {
  const sim_json_t* v = sim_json_get(j, key);
  return v && v->type == SIM_JSON_STRING ? v->string : NULL;
}

int sim_read_file(const char* path, char** text_out, size_t* len_out) {
  FILE* f = fopen(path, "rb");
  if (!f) return 1;
  char* text = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char* t = realloc(text, cap);
      if (!t) {
        free(text);
        fclose(f);
        return 2;
      }
      text = t;
    }
    size_t got = fread(text + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0) break;
  }
  fclose(f);
  text[len] = '\0';
  *text_out = text;
  *len_out = len;
  return 0;
}
