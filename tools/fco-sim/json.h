/*
 * json.h — a small JSON reader (no dependencies) for fco-sim's calibration files: parses a whole
 * text into a tree of sim_json_t nodes. Errors name the line and column.
 *
 *   char err[256];
 *   sim_json_t* j = sim_json_parse(text, err, sizeof err);   // NULL on error, err says why
 *   const sim_json_t* r = sim_json_get(j, "results");         // object member or NULL
 *   sim_json_free(j);
 */
#ifndef FCO_SIM_JSON_H_
#define FCO_SIM_JSON_H_

#include <stddef.h>

typedef enum { SIM_JSON_NULL, SIM_JSON_BOOL, SIM_JSON_NUMBER, SIM_JSON_STRING, SIM_JSON_ARRAY,
               SIM_JSON_OBJECT } sim_json_type_t;

typedef struct sim_json {
  sim_json_type_t type;
  double number;           /* NUMBER; BOOL: 0 or 1                                   */
  char* string;            /* STRING (unescaped, NUL-terminated)                      */
  char* key;               /* member name when this node is an object member          */
  struct sim_json* child;  /* ARRAY / OBJECT: first element                           */
  struct sim_json* next;   /* next sibling                                            */
  int line;                /* where the value starts (1-based)                        */
} sim_json_t;

/* Parse NUL-terminated text. Returns the root or NULL with "line L, column C: why" in err. */
sim_json_t* sim_json_parse(const char* text, char* err, size_t err_len);
void sim_json_free(sim_json_t* j);

/* Object member by name (first match) or NULL; NULL when j is not an object. */
const sim_json_t* sim_json_get(const sim_json_t* j, const char* key);
/* Number of elements of an array/object (0 otherwise). */
int sim_json_len(const sim_json_t* j);
/* Member `key` as a number: 1 and *out when it is a number, 0 otherwise (missing, null, ...). */
int sim_json_num(const sim_json_t* j, const char* key, double* out);
/* Member `key` as a string, or NULL. */
const char* sim_json_str(const sim_json_t* j, const char* key);

/* Read a whole file into a NUL-terminated heap buffer (*text, free() it; *len bytes without
 * the NUL). Returns 0, 1 when the file cannot be opened, 2 when out of memory. */
int sim_read_file(const char* path, char** text, size_t* len);

#endif /* FCO_SIM_JSON_H_ */
