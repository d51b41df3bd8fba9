/*
 * test_sim_calib.c — fco-sim's JSON reader and calibration files: valid JSON parses (escapes,
 * nesting, numbers, lone surrogates), invalid JSON (numbers strtod takes but JSON does not
 * included) fails naming line and column; the shipped calibration loads;
 * collective lookups interpolate by bytes exactly on a hand-made file, pick the fastest fused
 * impl, drop rows with wrong elements, never extrapolate below the smallest measured time;
 * compute lookups take the row of the query's shape (row bytes, bag length) and scale by
 * bytes; bad calibration files fail naming the file, line and field;
 * `validate` models rows of the fused operators (measured compute + modelled communication)
 * exactly as computed by hand.
 *   make test   or   build/tests/test_sim_calib
 */
#include "calib.h"
#include "json.h"
#include "report.h"
#include "test_sim_util.h"

static void json(void) {
  char err[256];
  t_context("json good");
  const char* text =
      "{\"a\": [1, -2.5e3, true, false, null],\n"
      " \"s\": \"x\\\"y\\\\z\\n\\u00e9\\ud83d\\ude00\",\n"
      " \"o\": {\"k\": {}}, \"e\": []}";
  sim_json_t* j = sim_json_parse(text, err, sizeof err);
  if (!j) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_EQ(j->type, SIM_JSON_OBJECT);
  ASSERT_EQ(sim_json_len(j), 4);
  const sim_json_t* a = sim_json_get(j, "a");
  ASSERT_EQ(sim_json_len(a), 5);
  ASSERT_NEAR(a->child->next->number, -2500, 0);
  ASSERT_EQ(a->child->next->next->type, SIM_JSON_BOOL);
  ASSERT_EQ(a->child->next->next->next->next->type, SIM_JSON_NULL);
  ASSERT_STR_EQ(sim_json_str(j, "s"), "x\"y\\z\n\xc3\xa9\xf0\x9f\x98\x80");
  ASSERT_EQ(sim_json_get(j, "s")->line, 2);
  ASSERT_EQ(sim_json_len(sim_json_get(sim_json_get(j, "o"), "k")), 0);
  ASSERT_NULL(sim_json_get(j, "missing"));
  double v;
  ASSERT_EQ(sim_json_num(j, "s", &v), 0); /* not a number */
  sim_json_free(j);

  static const struct { const char* text; const char* where; } kBad[] = {
      {"", "line 1, column 1"},
      {"{\"a\": 1,}", "line 1, column 9"},
      {"{\"a\" 1}", "expected ':'"},
      {"[1, 2\n, 3", "line 2, column 4"},
      {"{\"a\": tru}", "unexpected character"},
      {"\"abc", "unterminated string"},
      {"[1] [2]", "trailing characters"},
      {"{\n\n  \"x\": .5}", "line 3, column 8"},
      {"\"bad \\q escape\"", "bad escape"},
      {"{\"k\": \"a\nb\"}", "control character"},
      {"[-x]", "line 1, column 2: bad number"},
      /* JSON's number grammar, not strtod's: no hex, no leading zeros, digits after '.' */
      {"[0x10]", "line 1, column 2: bad number"},
      {"[01]", "line 1, column 2: bad number"},
      {"[1.]", "line 1, column 2: bad number"},
      {"[1e+]", "line 1, column 2: bad number"},
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    t_context("json bad %zu: %s", i, kBad[i].text);
    ASSERT_NULL(sim_json_parse(kBad[i].text, err, sizeof err));
    ASSERT_STR_HAS(err, kBad[i].where);
  }
  /* deep nesting is refused, not a stack overflow */
  char deep[400];
  memset(deep, '[', sizeof deep - 1);
  deep[sizeof deep - 1] = '\0';
  ASSERT_NULL(sim_json_parse(deep, err, sizeof err));
  ASSERT_STR_HAS(err, "nested deeper");
  /* the root is level 0: 65 nested arrays are the deepest accepted */
  memset(deep, 0, sizeof deep);
  memset(deep, '[', 65);
  memset(deep + 65, ']', 65);
  j = sim_json_parse(deep, err, sizeof err);
  if (!j) t_fail(__FILE__, __LINE__, "%s", err);
  sim_json_free(j);
  memset(deep, '[', 66);
  memset(deep + 66, ']', 66);
  ASSERT_NULL(sim_json_parse(deep, err, sizeof err));
  ASSERT_STR_HAS(err, "nested deeper than 64 levels");
  t_context("json: every escape, CRLF line ends, numbers");
  j = sim_json_parse("{\"s\": \"\\/\\b\\f\\r\\t\\u00E9\",\r\n \"n\": [-0.5e-1, 0, 1E2]}\r\n", err,
                     sizeof err);
  if (!j) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_STR_EQ(sim_json_str(j, "s"), "/\b\f\r\t\xc3\xa9");
  const sim_json_t* n = sim_json_get(j, "n");
  ASSERT_EQ(n->line, 2);
  ASSERT_NEAR(n->child->number, -0.05, 0);
  ASSERT_NEAR(n->child->next->next->number, 100, 0);
  sim_json_free(j);
  /* a lone high surrogate is kept as it is; the escape after it is not lost */
  j = sim_json_parse("[\"\\ud83d\\u0041\", \"\\ud83d\\ue000\"]", err, sizeof err);
  if (!j) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_STR_EQ(j->child->string, "\xed\xa0\xbd" "A");
  ASSERT_STR_EQ(j->child->next->string, "\xed\xa0\xbd\xee\x80\x80");
  sim_json_free(j);
}

static void shipped(void) {
  char path[1024], err[512];
  sim_calib_t c;
  t_context("calib/h200-x2-allreduce.json");
  int rc = sim_calib_load(sim_src_path(path, sizeof path, "calib/h200-x2-allreduce.json"), &c,
                          err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_EQ(c.gpus, 2);
  ASSERT_EQ(c.num, 81); /* 3 dtypes x 9 sizes x (nccl, oneshot, auto) */
  ASSERT_EQ(c.dropped, 0);
  ASSERT_STR_EQ(c.commit, "fe93fe66a60f");
  ASSERT_STR_EQ(c.machine, "nvidia-h200-x2");
  /* measured points come back exactly; between them, linear in bytes */
  double us;
  char note[200];
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 1048576, &us, note, sizeof note), 1);
  ASSERT_NEAR(us, 15.654, 1e-9); /* nccl bf16 at 1 MB */
  ASSERT_STR_HAS(note, "bf16");
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 1, 4, 4194304, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 19.821, 1e-9); /* oneshot f32 at 4 MB */
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, (1048576 + 4194304) / 2.0, &us, note,
                                 sizeof note), 1);
  ASSERT_NEAR(us, (15.654 + 34.493) / 2, 1e-9);
  ASSERT_STR_HAS(note, "interpolated between 1 MB and 4 MB");
  ASSERT_EQ(sim_calib_collective(&c, "alltoall", 0, 2, 1024, &us, NULL, 0), 0); /* not measured */
  ASSERT_EQ(sim_calib_compute(&c, "embedding_alltoall", 2, NULL, 1e6, &us, NULL, 0), 0);
  sim_calib_free(&c);
}

static void lookups(void) {
  char err[512];
  sim_calib_t c;
  t_context("hand-made calibration");
  const char* text =
      "{\"tool\":\"fco-bench\",\"commit\":\"abc\",\"machine\":\"m\",\"gpus\":4,\"transport\":\"nccl\","
      "\"results\":[\n"
      "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"bf16\",\"impl\":\"nccl\","
      "\"impl_id\":0,\"time_us\":10,\"compute_us\":null,\"wrong\":0},\n"
      "{\"op\":\"allreduce\",\"shape\":{\"bytes\":3000},\"dtype\":\"bf16\",\"impl\":\"nccl\","
      "\"impl_id\":0,\"time_us\":20,\"wrong\":0},\n"
      "{\"op\":\"allreduce\",\"shape\":{\"count\":500},\"dtype\":\"bf16\",\"impl\":\"oneshot\","
      "\"impl_id\":1,\"time_us\":8,\"wrong\":0},\n"
      "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"bf16\",\"impl\":\"twoshot\","
      "\"impl_id\":2,\"time_us\":6,\"wrong\":0},\n"
      "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"bf16\",\"impl\":\"bad\","
      "\"impl_id\":3,\"time_us\":1,\"wrong\":5},\n"
      "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"f32\",\"impl\":\"nccl\","
      "\"impl_id\":0,\"time_us\":99,\"wrong\":0},\n"
      "{\"op\":\"embedding_alltoall\",\"shape\":{\"bytes\":2000},\"dtype\":\"bf16\",\"impl\":\"nccl\","
      "\"impl_id\":0,\"time_us\":50,\"compute_us\":30,\"wrong\":0},\n"
      "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"bf16\",\"impl\":\"none\","
      "\"impl_id\":4,\"time_us\":null,\"wrong\":null}\n"
      "]}";
  int rc = sim_calib_parse(text, "hand.json", &c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_EQ(c.num, 6);
  ASSERT_EQ(c.dropped, 2); /* the row with wrong elements, the row without a time */
  ASSERT_NEAR(c.e[2].bytes, 1000, 0); /* "count": 500 bf16 elements */
  double us;
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 2000, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 15, 1e-12);                    /* halfway between 10 and 20 */
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 5000, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 30, 1e-12);                    /* extrapolated along the last segment */
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 10, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 10, 1e-12);                    /* never below the smallest measurement */
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 1, 2, 1000, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 6, 1e-12);                     /* fastest fused impl; count 500 x bf16 = 1000 B */
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 4, 1000, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 99, 1e-12);                    /* f32 rows for 4-byte elements */
  char note[200];
  ASSERT_EQ(sim_calib_compute(&c, "embedding_alltoall", 2, NULL, 4000, &us, note, sizeof note), 1);
  ASSERT_NEAR(us, 60, 1e-12);                    /* 30 us at 2000 B, scaled to 4000 B */
  ASSERT_STR_HAS(note, "measured");
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 1000, &us, note, sizeof note), 1);
  ASSERT_STR_HAS(note, "hand.json allreduce impl 0, bf16, 4 GPUs): at 1000 B");
  /* the baseline allreduce is the measured one on one node of the file's 4 GPUs only */
  sim_params_t p;
  sim_test_params(&p);
  sim_env_t env = {p, &c, NULL};
  sim_coll_t ar = sim_baseline_allreduce(&env, (sim_topo_t){1, 4}, 2000, 2);
  ASSERT_EQ(ar.algo, SIM_ALGO_MEASURED);
  ASSERT_NEAR(ar.us, 15, 1e-12);
  ar = sim_baseline_allreduce(&env, (sim_topo_t){2, 4}, 2000, 2);
  ASSERT_EQ(ar.algo, SIM_ALGO_TREE); /* modelled: 10 + 5 x 2 x (3 + 3) + 0.04 beats the ring */
  ASSERT_NEAR(ar.us, 70.04, 1e-9);
  ASSERT_EQ(sim_baseline_allreduce(&env, (sim_topo_t){1, 2}, 2000, 2).algo, SIM_ALGO_RING);
  /* the decode model's baseline allreduce takes the rows of its own dtype (fp32 took bf16's) */
  t_context("decode: allreduce rows of the model's element size");
  char path[1024];
  sim_config_t cfg;
  ASSERT_EQ(sim_config_load(sim_src_path(path, sizeof path,
                                         "tools/fco-sim/configs/llama3-70b-decode.cfg"),
                            &cfg, err, sizeof err), 0);
  for (int eb = 2; eb <= 4; eb += 2) {
    cfg.dtype_bytes = eb;
    sim_sources_t src = {0};
    sim_env_t denv = {p, &c, &src};
    sim_row_t row;
    ASSERT_EQ(sim_run_decode(&denv, &cfg, (sim_topo_t){1, 4}, 8, &row, err, sizeof err), 0);
    int found = 0;
    for (int i = 0; i < src.num; i++)
      if (!strcmp(src.s[i].kernel, "allreduce (NCCL)")) {
        ASSERT_STR_HAS(src.s[i].source, eb == 4 ? "impl 0, f32, 4 GPUs" : "impl 0, bf16, 4 GPUs");
        found++;
      }
    ASSERT_EQ(found, 1);
  }
  /* f32 has only an impl 0 row: no fused time, NCCL's is not one */
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 1, 4, 1000, &us, NULL, 0), 0);
  sim_calib_free(&c);

  /* bf16 first among 2-byte dtypes, wherever its rows are; the rows fco-bench's auto measured
   * (impl_id -1) choose nothing; negative compute/comm times are none */
  t_context("dtype choice, negative compute_us");
  text = "{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n"
         "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"f16\",\"impl\":\"auto\","
         "\"impl_id\":-1,\"time_us\":3},\n"
         "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"half\",\"impl\":\"nccl\","
         "\"impl_id\":0,\"time_us\":7},\n"
         "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"bf16\",\"impl\":\"nccl\","
         "\"impl_id\":0,\"time_us\":5},\n"
         "{\"op\":\"gemv_allreduce\",\"shape\":{\"bytes\":1000},\"dtype\":\"bf16\","
         "\"impl\":\"nccl\",\"impl_id\":0,\"time_us\":5,\"compute_us\":-2,\"comm_us\":-1}]}";
  rc = sim_calib_parse(text, "dtypes.json", &c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 1000, &us, note, sizeof note), 1);
  ASSERT_NEAR(us, 5, 0);
  ASSERT_STR_HAS(note, "bf16");
  ASSERT_NEAR(c.e[3].compute_us, -1, 0);
  ASSERT_NEAR(c.e[3].comm_us, -1, 0);
  ASSERT_EQ(sim_calib_compute(&c, "gemv_allreduce", 2, NULL, 1000, &us, NULL, 0), 0);
  /* no bf16 row: the first 2-byte dtype of a row of a numbered impl ("half", not auto's f16) */
  snprintf(c.e[2].dtype, sizeof c.e[2].dtype, "f32");
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 1000, &us, note, sizeof note), 1);
  ASSERT_NEAR(us, 7, 0);
  sim_calib_free(&c);

  static const struct { const char* text; const char* words; } kBad[] = {
      {"[1]", "bad.json:1: the top level must be an object"},
      {"{\"tool\":\"x\",\"gpus\":2,\"results\":[]}", "\"tool\" is \"x\", want \"fco-bench\""},
      {"{\"tool\":\"fco-bench\",\"results\":[]}", "\"gpus\" must be a positive integer"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\n\"results\":{}}", "bad.json:2: \"results\" must be an array"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"allreduce\",\"shape\":{\"bytes\":1},"
       "\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":0}]}",
       "bad.json:2: results[0] lacks time_us"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n\n{\"op\":\"allreduce\",\"shape\":{},"
       "\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":0,\"time_us\":1}]}",
       "bad.json:3: results[0].shape has neither"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[{\"op\":\"a\",\"shape\":{\"bytes\":1},"
       "\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":0,\"time_us\":0}]}",
       "time_us is 0, must be > 0"},
      {"{\"tool\":\"fco-bench\",\n\"gpus\":2,", "bad.json: not valid JSON: line 2"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2.5,\"results\":[]}",
       "bad.json:1: \"gpus\" is 2.5: must be a positive integer, at most 1024"},
      /* integer fields are bounded before use: 2^32 + 2 and 1e400 (inf) read as 1 node x
       * -2147483648 GPUs, impl_id 1e300 was cast to an int, shape B 1e300 gave 1e+300-digit
       * times, shape D -128 or bytes 0 modelled nonsense rows */
      {"{\"tool\":\"fco-bench\",\"gpus\":4294967298,\"results\":[]}",
       "bad.json:1: \"gpus\" is 4294967298: must be a positive integer, at most 1024"},
      {"{\"tool\":\"fco-bench\",\"gpus\":1e400,\"results\":[]}",
       "bad.json:1: \"gpus\" is inf: must be a positive integer, at most 1024"},
      {"{\"tool\":\"fco-bench\",\"gpus\":1025,\"results\":[]}", "\"gpus\" is 1025: must be"},
      {"{\"tool\":\"fco-bench\",\"gpus\":-2,\"results\":[]}", "\"gpus\" is -2: must be"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"allreduce\","
       "\"shape\":{\"bytes\":1},\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":1e300,"
       "\"time_us\":1}]}",
       "bad.json:2: results[0].impl_id is 1e+300: must be an integer in [-1, 1000000]"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"allreduce\","
       "\"shape\":{\"bytes\":1},\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":-2,"
       "\"time_us\":1}]}",
       "results[0].impl_id is -2: must be"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"embedding_alltoall\",\"shape\":"
       "{\n\"B\":1e300,\"D\":128},\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":0,"
       "\"time_us\":1}]}",
       "bad.json:3: results[0].shape.B is 1e+300: must be a positive integer, at most 1e+15"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"embedding_alltoall\",\"shape\":"
       "{\"B\":64,\"D\":-128},\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":0,"
       "\"time_us\":1}]}",
       "results[0].shape.D is -128: must be a positive integer"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"allreduce\",\"shape\":"
       "{\"count\":256,\"bytes\":0},\"dtype\":\"f32\",\"impl\":\"nccl\",\"impl_id\":0,"
       "\"time_us\":1}]}",
       "results[0].shape.bytes is 0: must be a positive integer"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"gemv_allreduce\",\"shape\":"
       "{\"M\":1,\"N\":8.5,\"K\":64},\"dtype\":\"f32\",\"impl\":\"nccl\",\"impl_id\":0,"
       "\"time_us\":1}]}",
       "results[0].shape.N is 8.5: must be a positive integer"},
      /* fco-bench's cpu transport writes "gpus": 0: said so, not "must be a positive integer" */
      {"{\"tool\":\"fco-bench\",\"gpus\":0,\"transport\":\"cpu\",\"results\":[]}",
       "bad.json:1: \"gpus\" is 0: a cpu-transport run of fco-bench, which measured no GPU and "
       "cannot calibrate fco-sim"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n7]}",
       "bad.json:2: results[0] is not an object"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"allreduce\","
       "\"shape\":{\"bytes\":1},\"impl\":\"nccl\",\"impl_id\":0,\"time_us\":1}]}",
       "bad.json:2: results[0] lacks dtype (a string)"},
      {"{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n{\"op\":\"allreduce\","
       "\"shape\":{\"bytes\":1},\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":\"0\","
       "\"time_us\":1}]}",
       "bad.json:2: results[0] lacks impl_id (a number)"},
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    t_context("bad calibration %zu", i);
    ASSERT_EQ(sim_calib_parse(kBad[i].text, "bad.json", &c, err, sizeof err), -1);
    ASSERT_STR_HAS(err, kBad[i].words);
    ASSERT_EQ(c.num, 0);
  }
  /* the bounds themselves are accepted: 1024 GPUs, impl_id -1 (auto) and 10^6, shape 10^15 */
  t_context("calibration at the bounds");
  ASSERT_EQ(sim_calib_parse("{\"tool\":\"fco-bench\",\"gpus\":1024,\"results\":[\n"
                            "{\"op\":\"allreduce\",\"shape\":{\"bytes\":1e15},\"dtype\":\"f32\","
                            "\"impl\":\"auto\",\"impl_id\":-1,\"time_us\":1},\n"
                            "{\"op\":\"allreduce\",\"shape\":{\"count\":1,\"skew\":-1.5},"
                            "\"dtype\":\"f32\",\"impl\":\"x\",\"impl_id\":1e6,\"time_us\":1}]}",
                            "ok.json", &c, err, sizeof err),
            0);
  ASSERT_EQ(c.gpus, 1024);
  ASSERT_EQ(c.num, 2);
  ASSERT_EQ(c.e[1].impl_id, 1000000);
  sim_calib_free(&c);
  t_context("missing calibration file");
  ASSERT_EQ(sim_calib_load("/nonexistent.json", &c, err, sizeof err), -1);
  ASSERT_STR_HAS(err, "cannot open");
}

/* Two sizes whose times fall with size (noise on small messages): extrapolating above the
 * largest size along that line went below zero; it holds at the smallest measured time. */
static void falling_times(void) {
  char err[512], note[200];
  sim_calib_t c;
  t_context("extrapolation with falling times");
  const char* text =
      "{\"tool\":\"fco-bench\",\"gpus\":2,\"transport\":\"nccl\",\"results\":[\n"
      "{\"op\":\"allreduce\",\"shape\":{\"count\":512,\"bytes\":1024},\"dtype\":\"bf16\","
      "\"impl\":\"nccl\",\"impl_id\":0,\"time_us\":10.0,\"wrong\":0},\n"
      "{\"op\":\"allreduce\",\"shape\":{\"count\":1024,\"bytes\":2048},\"dtype\":\"bf16\","
      "\"impl\":\"nccl\",\"impl_id\":0,\"time_us\":9.5,\"wrong\":0}\n"
      "]}";
  int rc = sim_calib_parse(text, "falling.json", &c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  double us;
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 1536, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 9.75, 1e-12); /* inside the range: still linear */
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 2560, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 9.5, 1e-12); /* the line gives 9.25: held at the smallest time */
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 64.0 * 1048576, &us, note, sizeof note),
            1);
  ASSERT_NEAR(us, 9.5, 1e-12); /* the line gives about -16374 */
  ASSERT_STR_HAS(note, "held at the smallest measured time");
  ASSERT_EQ(sim_calib_collective(&c, "allreduce", 0, 2, 16, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 10, 1e-12); /* below the range: the smallest size's time */
  sim_calib_free(&c);
}

/* validate on operator rows, test parameters (tests/test_sim_util.h; kernel_us 2), 2 GPUs */
static void validate_ops(void) {
  char err[512];
  sim_calib_t c;
  sim_params_t p;
  sim_test_params(&p);
  t_context("validate: embedding_alltoall and gemv_allreduce rows");
  const char* text =
      "{\"tool\":\"fco-bench\",\"gpus\":2,\"transport\":\"nccl\",\"results\":[\n"
      "{\"op\":\"embedding_alltoall\",\"shape\":{\"B\":2048,\"tables_per_gpu\":1,\"D\":128,"
      "\"L\":1,\"rows\":1000,\"dist\":\"uniform\"},\"dtype\":\"f32\",\"impl\":\"nccl\","
      "\"impl_id\":0,\"time_us\":50,\"compute_us\":30,\"comm_us\":20,\"wrong\":0},\n"
      "{\"op\":\"embedding_alltoall\",\"shape\":{\"B\":2048,\"tables_per_gpu\":1,\"D\":128,"
      "\"L\":1},\"dtype\":\"f32\",\"impl\":\"fused\",\"impl_id\":1,\"time_us\":40,"
      "\"compute_us\":30,\"comm_us\":20,\"wrong\":0},\n"
      "{\"op\":\"gemv_allreduce\",\"shape\":{\"M\":8,\"N\":8192,\"K\":8192,\"K_r\":4096,"
      "\"P\":2},\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":0,\"time_us\":40,"
      "\"compute_us\":20,\"wrong\":0},\n"
      "{\"op\":\"gemv_allreduce\",\"shape\":{\"M\":8,\"N\":8192,\"K\":8192},\"dtype\":\"bf16\","
      "\"impl\":\"oneshot\",\"impl_id\":1,\"time_us\":20,\"compute_us\":20,\"wrong\":0},\n"
      "{\"op\":\"gemv_allreduce\",\"shape\":{\"M\":8,\"N\":8192},\"dtype\":\"bf16\","
      "\"impl\":\"auto\",\"impl_id\":-1,\"time_us\":20,\"compute_us\":20,\"wrong\":0}\n"
      "]}";
  int rc = sim_calib_parse(text, "ops.json", &c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_NEAR(sim_calib_shape(&c.e[0], "tables_per_gpu", -1), 1, 0);
  ASSERT_NEAR(sim_calib_shape(&c.e[0], "dist", -1), -1, 0); /* not a number */
  sim_val_t v;
  ASSERT_EQ(sim_validate(&p, &c, &v), 0);
  ASSERT_EQ(v.num, 5);
  ASSERT_EQ(v.skipped, 1); /* auto */
  /* all-to-all alone: each rank sends half of 2048 x 128 x 4 B = 524288 B over NVLink:
   * 10 + 5 x 1 + 5.24288 */
  ASSERT_STR_EQ(v.row[0].impl, "a2a alone");
  ASSERT_NEAR(v.row[0].model_us, 20.24288, 1e-9);
  ASSERT_NEAR(v.row[0].error_pct, 100 * (20.24288 / 20 - 1), 1e-9);
  /* impl 0: lookup 30 + all-to-all + permute (2 x 1024 x 2 x 128 x 4 B at 1000 GB/s + 2) */
  ASSERT_NEAR(v.row[1].model_us, 30 + 20.24288 + 2.097152 + 2, 1e-9);
  /* fused: compute 30 - 2 in one wave (f32 D 128: 32-sample tiles, 2 x 32 tiles), then
   * 524288 B at 100 GB/s + 1 */
  ASSERT_NEAR(v.row[2].model_us, 28 + 5.24288 + 1, 1e-9);
  ASSERT_TRUE(v.row[2].fused);
  ASSERT_EQ(v.row[2].kind, SIM_VAL_HOLDOUT); /* f32, and not a fit workload */
  ASSERT_EQ(v.row[1].kind, SIM_VAL_PRED);
  /* gemv impl 0: GEMM 20 + ring allreduce of 8 x 8192 x 2 B: 10 + 5 x 2 + 1.31072 */
  ASSERT_NEAR(v.row[3].model_us, 20 + 21.31072, 1e-9);
  /* oneshot: 8192 / 16 = 512 tiles = 4 waves of 4.5 us; the fp32 partials, 8 x 8192 x 4 =
   * 262144 B, 65536 B a wave = 0.65536 us: 18 + 0.65536 + 1; then the local sum reads 2 x
   * 262144 B of partials and writes 131072 B of y at 1000 GB/s: + 0.65536 */
  ASSERT_NEAR(v.row[4].model_us, 19.65536 + 0.65536, 1e-9);
  ASSERT_EQ(v.row[4].kind, SIM_VAL_FIT); /* bf16, N = 8192: in the fit set */
  ASSERT_TRUE(v.max_err_fco > 0);
  sim_val_free(&v);

  /* the same rows with every fused-kernel term on (hand-computed) */
  t_context("validate: fused rows with interference, signal stalls, landing, x re-reads");
  p.fco_launch_us = 4, p.fused_interf = 0.5, p.fco_sig_us = 2, p.fco_land = 1;
  p.gemv_x_gbs = 1000;
  ASSERT_EQ(sim_validate(&p, &c, &v), 0);
  /* embedding: 4 + one wave whose tiles are half self, half the peer's (remote-first, so the
   * wave signals: its share 1/2 x 2 us, once per ea_sig_every = 4 tiles: 0.25) + 28 + 0.5 x
   * 5.24288 interference; then the 524288 B cross the link (5.24288 + 1). The 524288 B
   * received are landed (2 x 0.524288 us) alongside the self tiles, which start half-way
   * through the wave (at 15.43572): hidden */
  ASSERT_NEAR(v.row[2].model_us, 4 + 0.25 + 28 + 2.62144 + 5.24288 + 1, 1e-9);
  /* the kernel before ed0108a (every tile signals, landing after the tiles) */
  p.ea_sig_every = 1, p.ea_land_overlap = 0;
  sim_val_free(&v);
  ASSERT_EQ(sim_validate(&p, &c, &v), 0);
  ASSERT_NEAR(v.row[2].model_us, 4 + 1 + 28 + 2.62144 + 5.24288 + 1 + 1.048576, 1e-9);
  p.ea_sig_every = 4, p.ea_land_overlap = 1;
  /* gemv: x re-reads 512 x 8 x 4096 x 2 = 33554432 B at 1000 GB/s = 33.554432 us > 18: the
   * loop is 33.554432 in 4 waves of 8.388608, each + 2 (signals) + 0.5 x 0.65536; the last
   * wave's partials then take 0.65536 + 1; then the sum 0.65536 */
  ASSERT_NEAR(v.row[4].model_us, 4 + 33.554432 + 4 * (2 + 0.32768) + 0.65536 + 1 + 0.65536, 1e-9);
  sim_val_free(&v);
  /* f32 fused GEMV rows are not modelled (a different, CUDA-core loop) */
  snprintf(c.e[3].dtype, sizeof c.e[3].dtype, "f32");
  ASSERT_EQ(sim_validate(&p, &c, &v), 0);
  ASSERT_EQ(v.num, 4);
  ASSERT_EQ(v.unmodelled_f32, 1);
  ASSERT_EQ(v.skipped, 2);
  sim_val_free(&v);
  snprintf(c.e[3].dtype, sizeof c.e[3].dtype, "bf16");
  /* the models are of GPUs on NVLink: another transport's rows are all skipped, with a note */
  snprintf(c.transport, sizeof c.transport, "cpu");
  ASSERT_EQ(sim_validate(&p, &c, &v), 0);
  ASSERT_EQ(v.num, 0);
  ASSERT_EQ(v.skipped, 5);
  ASSERT_STR_HAS(v.note, "transport cpu");
  sim_val_free(&v);
  snprintf(c.transport, sizeof c.transport, "nccl");
  /* compute lookups on operator rows use fco-bench's bytes: gathered B x T x L x D x esize
   * (2048 x 1 x 1 x 128 x 4 = 1 MiB in 30 us), weights N x K_r x esize (64 MiB in 20 us) */
  double us;
  ASSERT_EQ(sim_calib_compute(&c, "embedding_alltoall", 4, NULL, 2 * 1048576.0, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 60, 1e-9);
  ASSERT_EQ(sim_calib_compute(&c, "gemv_allreduce", 2, NULL, 8192 * 4096 * 2.0 / 2, &us, NULL, 0),
            1);
  ASSERT_NEAR(us, 10, 1e-9);
  sim_calib_free(&c);
}

/* The fit tests' calibration files begin so: two GPUs over NVLink, two embedding_alltoall fit
 * rows (their times set from the model by times_from_model). */
#define FIT_EMB_ROWS \
  "{\"tool\":\"fco-bench\",\"gpus\":2,\"transport\":\"nccl\",\"results\":[\n" \
  "{\"op\":\"embedding_alltoall\",\"shape\":{\"B\":16384,\"tables_per_gpu\":8,\"D\":128," \
  "\"L\":32,\"dist\":\"uniform\"},\"dtype\":\"bf16\",\"impl\":\"fused\",\"impl_id\":1," \
  "\"time_us\":1,\"compute_us\":370,\"comm_us\":80},\n" \
  "{\"op\":\"embedding_alltoall\",\"shape\":{\"B\":65536,\"tables_per_gpu\":8,\"D\":64," \
  "\"L\":8},\"dtype\":\"bf16\",\"impl\":\"fused\",\"impl_id\":1,\"time_us\":1," \
  "\"compute_us\":260,\"comm_us\":140}"

/* Sets the times of c's rows [0, nfit) — fit rows — to what the model gives with truth; the rows
 * after them are hold-out rows. */
static void times_from_model(sim_calib_t* c, const sim_params_t* truth, int nfit) {
  sim_val_t v;
  ASSERT_EQ(sim_validate(truth, c, &v), 0);
  ASSERT_EQ(v.num, c->num); /* one row per entry, in order */
  for (int i = 0; i < v.num; i++) {
    ASSERT_EQ(v.row[i].kind, i < nfit ? SIM_VAL_FIT : SIM_VAL_HOLDOUT);
    if (i < nfit) c->e[i].time_us = v.row[i].model_us;
  }
  sim_val_free(&v);
}

/* fco-sim fit recovers known constants: fit-set rows whose times the model itself produced
 * with fused_interf 0.5, fco_sig_us 1.5, gemv_x_gbs 4000 (grid points); a hold-out row with a
 * wild time must not move the fit. */
static void fit_recovers(void) {
  char err[512];
  sim_calib_t c;
  t_context("fit: recovering known constants");
  const char* text =
      FIT_EMB_ROWS ",\n"
      "{\"op\":\"gemv_allreduce\",\"shape\":{\"M\":1,\"N\":8192,\"K\":8192,\"K_r\":4096},"
      "\"dtype\":\"bf16\",\"impl\":\"oneshot\",\"impl_id\":1,\"time_us\":1,\"compute_us\":20},\n"
      "{\"op\":\"gemv_allreduce\",\"shape\":{\"M\":64,\"N\":8192,\"K\":8192,\"K_r\":4096},"
      "\"dtype\":\"bf16\",\"impl\":\"oneshot\",\"impl_id\":1,\"time_us\":1,\"compute_us\":22},\n"
      "{\"op\":\"gemv_allreduce\",\"shape\":{\"M\":1,\"N\":4096,\"K\":8192,\"K_r\":4096},"
      "\"dtype\":\"bf16\",\"impl\":\"oneshot\",\"impl_id\":1,\"time_us\":1,\"compute_us\":20}\n"
      "]}";
  int rc = sim_calib_parse(text, "fit.json", &c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  sim_params_t truth;
  sim_params_default(&truth);
  truth.fused_interf = 0.5, truth.fco_sig_us = 1.5, truth.gemv_x_gbs = 4000;
  ASSERT_EQ(c.num, 5);
  times_from_model(&c, &truth, 4); /* the hold-out row: N = 4096 */
  c.e[4].time_us = 1000;
  sim_params_t p;
  sim_params_default(&p);
  const sim_calib_t* cp = &c;
  sim_fit_t fit;
  ASSERT_EQ(sim_fit_fused(&p, &cp, 1, &fit), 0);
  ASSERT_EQ(fit.rows, 4);
  ASSERT_NEAR(fit.interf, 0.5, 1e-9);
  ASSERT_NEAR(fit.sig_us, 1.5, 1e-9);
  ASSERT_NEAR(fit.x_gbs, 4000, 1e-9);
  ASSERT_NEAR(fit.rms_pct, 0, 1e-9);
  snprintf(c.transport, sizeof c.transport, "local"); /* not NVLink: no fit rows */
  ASSERT_EQ(sim_fit_fused(&p, &cp, 1, &fit), 0);
  ASSERT_EQ(fit.rows, 0);
  sim_calib_free(&c);
}

/* Compute lookups by shape (calib.h): rows of equal work bytes (16384) but different row
 * widths, bag lengths and distributions; the query takes the row of its own shape, not the
 * first of equal bytes (which priced DLRM's D 128 multi-hot bags with an L 1 row). */
#define EA_ROW(shape, us)                                                                   \
  "{\"op\":\"embedding_alltoall\",\"shape\":{" shape "},\"dtype\":\"bf16\",\"impl\":\"nccl\"," \
  "\"impl_id\":0,\"time_us\":99,\"compute_us\":" #us "}"
static void compute_shape(void) {
  char err[512], note[200];
  sim_calib_t c;
  t_context("compute lookup by row bytes, bag length, distribution");
  const char* text =
      "{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[\n"
      EA_ROW("\"bytes\":16384", 1) ",\n"
      EA_ROW("\"B\":64,\"tables_per_gpu\":1,\"D\":128,\"L\":1,\"dist\":\"uniform\"", 10) ",\n"
      EA_ROW("\"B\":64,\"tables_per_gpu\":1,\"D\":32,\"L\":4,\"dist\":\"uniform\"", 20) ",\n"
      EA_ROW("\"B\":16,\"tables_per_gpu\":1,\"D\":128,\"L\":4,\"dist\":\"zipf\"", 5) ",\n"
      EA_ROW("\"B\":16,\"tables_per_gpu\":1,\"D\":128,\"L\":4,\"dist\":\"uniform\"", 30) "\n"
      "]}";
  ASSERT_EQ(sim_calib_parse(text, "shape.json", &c, err, sizeof err), 0);
  static const struct {
    double row_bytes, bag, us;
  } kCases[] = {
      {256, 4, 30},  /* its own shape, uniform (the zipf row of that shape is faster) */
      {256, 1, 10},  /* D 128, L 1 */
      {64, 4, 20},   /* D 32 */
      {256, 3, 30},  /* no L 3: L 4 is nearer in log than L 1 */
      {512, 4, 30},  /* no 512 B rows: 256 B is nearer in log than 64 B */
  };
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    t_context("compute lookup: row %g B, L %g", kCases[i].row_bytes, kCases[i].bag);
    sim_calib_shape_t want = {kCases[i].row_bytes, kCases[i].bag};
    double us;
    ASSERT_EQ(sim_calib_compute(&c, "embedding_alltoall", 2, &want, 32768, &us, note, sizeof note),
              1);
    ASSERT_NEAR(us, 2 * kCases[i].us, 1e-12); /* twice the row's bytes */
  }
  double us;
  sim_calib_shape_t want = {256, 4};
  ASSERT_EQ(sim_calib_compute(&c, "embedding_alltoall", 2, &want, 16384, &us, note, sizeof note),
            1);
  ASSERT_STR_HAS(note, "shape.json embedding_alltoall bf16 compute_us of D 128, L 4 at 16 KB");
  /* without a shape, by bytes alone: all tie, the first row in the file */
  ASSERT_EQ(sim_calib_compute(&c, "embedding_alltoall", 2, NULL, 16384, &us, NULL, 0), 1);
  ASSERT_NEAR(us, 1, 1e-12);
  sim_calib_free(&c);
}
#undef EA_ROW

/* Ties, both resolved by order: the compute lookup takes the first row in the file among rows at
 * the same (log) distance in bytes; the fit takes the first grid point (fused_interf, then
 * fco_sig_us, then gemv_x_gbs, each from its smallest value) among equal RMS errors. */
static void ties(void) {
  char err[512];
  sim_calib_t c;
  t_context("ties: equal-distance calibration rows, equal-error grid points");
  for (int order = 0; order < 2; order++) {
    /* 2000 and 8000 gathered bytes (B x tables x L x D x 2 B) around a query of 4000 */
    const char* a = "{\"op\":\"embedding_alltoall\",\"shape\":{\"B\":1000,\"tables_per_gpu\":1,"
                    "\"D\":1,\"L\":1},\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":0,"
                    "\"time_us\":9,\"compute_us\":10}";
    const char* b = "{\"op\":\"embedding_alltoall\",\"shape\":{\"B\":4000,\"tables_per_gpu\":1,"
                    "\"D\":1,\"L\":1},\"dtype\":\"bf16\",\"impl\":\"nccl\",\"impl_id\":0,"
                    "\"time_us\":9,\"compute_us\":80}";
    char text[1024];
    snprintf(text, sizeof text, "{\"tool\":\"fco-bench\",\"gpus\":2,\"results\":[%s,\n%s]}",
             order ? b : a, order ? a : b);
    int rc = sim_calib_parse(text, "tie.json", &c, err, sizeof err);
    if (rc) t_fail(__FILE__, __LINE__, "%s", err);
    double us;
    ASSERT_EQ(sim_calib_compute(&c, "embedding_alltoall", 2, NULL, 4000, &us, NULL, 0), 1);
    /* a: 10 us at 2000 B -> 20; b: 80 us at 8000 B -> 40 */
    ASSERT_NEAR(us, order ? 40 : 20, 1e-12);
    sim_calib_free(&c);
  }
  /* fit rows of the embedding operator only: gemv_x_gbs changes no error, so every x ties and
   * the fit keeps the first, SIM_FIT_X_MIN; the two others are recovered */
  const char* text = FIT_EMB_ROWS "\n]}";
  int rc = sim_calib_parse(text, "fit.json", &c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  sim_params_t truth;
  sim_params_default(&truth);
  truth.fused_interf = 0.5, truth.fco_sig_us = 1.5, truth.gemv_x_gbs = 9000;
  ASSERT_EQ(c.num, 2);
  times_from_model(&c, &truth, 2);
  sim_params_t p;
  sim_params_default(&p);
  const sim_calib_t* cp = &c;
  sim_fit_t fit;
  ASSERT_EQ(sim_fit_fused(&p, &cp, 1, &fit), 0);
  ASSERT_EQ(fit.rows, 2);
  ASSERT_NEAR(fit.rms_pct, 0, 1e-9);
  ASSERT_NEAR(fit.x_gbs, SIM_FIT_X_MIN, 1e-9);
  ASSERT_NEAR(fit.interf, 0.5, 1e-9);
  ASSERT_NEAR(fit.sig_us, 1.5, 1e-9);
  sim_calib_free(&c);
}

int main(void) {
  json();
  shipped();
  lookups();
  falling_times();
  validate_ops();
  compute_shape();
  fit_recovers();
  ties();
  printf("test_sim_calib: ok\n");
  return 0;
}
