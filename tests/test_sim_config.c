/*
 * test_sim_config.c — fco-sim's configuration parser: every shipped configuration loads with
 * the values its sources give; each kind of bad file fails with a message that names the file,
 * the line and the key (or the value) at fault; values at the ends of the documented ranges
 * load, and keys left out take README.md's defaults.
 *   make test   or   build/tests/test_sim_config
 */
#include <unistd.h>

#include "config.h"
#include "test_sim_util.h"

static void shipped(void) {
  char path[1024], err[512];
  sim_config_t* c = calloc(1, sizeof *c);
  ASSERT_NOT_NULL(c);
  static const char* const kFiles[] = {"dlrm-dcnv2.cfg", "dlrm-kaggle.cfg", "llama3-70b-decode.cfg",
                                       "moe-deepseek-v3.cfg", "moe-mixtral-8x7b.cfg"};
  for (size_t i = 0; i < sizeof kFiles / sizeof kFiles[0]; i++) {
    char rel[256];
    snprintf(rel, sizeof rel, "tools/fco-sim/configs/%s", kFiles[i]);
    t_context("%s", rel);
    int rc = sim_config_load(sim_src_path(path, sizeof path, rel), c, err, sizeof err);
    if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  }
  t_context("dlrm-dcnv2.cfg values");
  ASSERT_EQ(sim_config_load(sim_src_path(path, sizeof path, "tools/fco-sim/configs/dlrm-dcnv2.cfg"),
                            c, err, sizeof err), 0);
  ASSERT_EQ(c->model, SIM_MODEL_DLRM);
  ASSERT_EQ(c->num_tables, 26);
  ASSERT_NEAR(c->rows[0], 40000000, 0);
  ASSERT_NEAR(c->rows[25], 36, 0);
  ASSERT_NEAR(c->pooling[20], 100, 0);
  double lookups = 0;
  for (int i = 0; i < c->num_tables; i++) lookups += c->pooling[i];
  ASSERT_NEAR(lookups, 214, 0);
  ASSERT_NEAR(c->emb_dim, 128, 0);
  ASSERT_EQ(c->num_bottom, 3);
  ASSERT_EQ(c->num_top, 5);
  ASSERT_NEAR(c->top[0], 1024, 0);
  ASSERT_EQ(c->interaction, SIM_INTER_DCN);
  ASSERT_NEAR(c->dcn_layers, 3, 0);
  ASSERT_NEAR(c->dcn_low_rank, 512, 0);
  ASSERT_NEAR(c->global_batch, 65536, 0);
  ASSERT_NEAR(c->dtype_bytes, 2, 0);
  ASSERT_NEAR(c->grad_bytes, 4, 0);
  ASSERT_STR_EQ(c->name, "mlperf-dlrm-dcnv2");
  t_context("missing file");
  ASSERT_EQ(sim_config_load("/nonexistent/x.cfg", c, err, sizeof err), -1);
  ASSERT_STR_HAS(err, "/nonexistent/x.cfg");
  ASSERT_STR_HAS(err, "cannot open");
  free(c);
}

/* A valid [dlrm] body; cases below replace or add one line. */
#define GOOD                                  \
  "# a comment\n"                             \
  "[dlrm]\n"                                  \
  "embedding_dim = 16\n"                      \
  "rows = 100, 200, 300\n"                    \
  "pooling = 1, 2, 3\n"                       \
  "dense_features = 13\n"                     \
  "bottom_mlp = 64, 16\n"                     \
  "top_mlp = 64, 1\n"                         \
  "interaction = dot\n"                       \
  "batch_per_gpu = 128   # inline comment\n"

typedef struct {
  const char* text;
  int line;          /* the line the message must name */
  const char* words; /* '|'-separated phrases the message must contain */
} bad_t;

static const bad_t kBad[] = {
    {"rows = 1\n[dlrm]\n", 1, "before any section"},
    {"[dlrn]\n", 1, "unknown section [dlrn]"},
    {"[dlrm\n", 1, "bad section header"},
    {GOOD "colour = blue\n", 11, "unknown key 'colour'|[dlrm]"},
    {GOOD "this line has no equals sign\n", 11, "expected 'key = value'"},
    {GOOD "dcn_layers =\n", 11, "'dcn_layers' has no value"},
    {GOOD "embedding_dim = 32\n", 11, "'embedding_dim' is set twice (first on line 3)"},
    {GOOD "[moe]\n", 11, "one model|[moe] follows [dlrm] (line 2)"},
    {"[dlrm]\nembedding_dim = 12.5\n", 2, "embedding_dim is 12.5|whole number"},
    {"[dlrm]\nembedding_dim = abc\n", 2, "embedding_dim = 'abc'|not a number"},
    {"[dlrm]\nrows = 10, x7, 30\n", 2, "rows: value 2 'x7' is not a number"},
    {"[dlrm]\nrows = 10,, 30\n", 2, "rows: value 2 is empty"},
    {"[dlrm]\nrows = 10, 20,\n", 2, "rows: value 3 is empty"},
    {"[dlrm]\npooling = 1, 0, 3\n", 2, "pooling value 2 is 0|must be in"},
    {"[dlrm]\nsharding = diagonal\n", 2, "sharding = 'diagonal'|table, column or grid"},
    {"[dlrm]\ninteraction = cross\n", 2, "interaction = 'cross'|dot or dcn"},
    {"[dlrm]\ndtype = int3\n", 2, "dtype = 'int3'"},
    /* whole-file checks name the lines involved */
    {"[dlrm]\nembedding_dim = 16\nrows = 1, 2\npooling = 1, 2, 3\ndense_features = 1\n"
     "bottom_mlp = 16\ntop_mlp = 1\ninteraction = dot\nbatch_per_gpu = 1\n",
     4, "'pooling' has 3 values but 'rows' (line 3) has 2"},
    {"[dlrm]\nembedding_dim = 16\nrows = 1\npooling = 1\ndense_features = 1\n"
     "bottom_mlp = 32\ntop_mlp = 1\ninteraction = dot\nbatch_per_gpu = 1\n",
     6, "bottom_mlp ends in 32 but embedding_dim (line 2) is 16"},
    {GOOD "global_batch = 1024\n", 11, "not both"},
    {"[dlrm]\nembedding_dim = 16\nrows = 1\npooling = 1\ndense_features = 1\n"
     "bottom_mlp = 16\ntop_mlp = 1\ninteraction = dot\n",
     1, "needs batch_per_gpu|or global_batch"},
    {"[dlrm]\nembedding_dim = 16\n", 1, "[dlrm] lacks the required key 'rows'"},
    {"# only a comment\n\n", 1, "no model section"},
    {"[dlrm]\nembedding_dim = 16\nrows = 1\npooling = 1\ndense_features = 1\n"
     "bottom_mlp = 16\ntop_mlp = 1\ninteraction = dcn\nbatch_per_gpu = 1\n",
     8, "interaction = dcn needs dcn_layers and dcn_low_rank"},
    {GOOD "dcn_layers = 2\n", 11, "dcn_* keys are set but interaction (line 9) is dot"},
    {"[decode]\nhidden = 100\nffn = 1\nlayers = 1\nheads = 3\nkv_heads = 1\nbatch = 1\n"
     "context = 1\n",
     5, "hidden 100 is not a multiple of heads 3"},
    {"[decode]\nhidden = 64\nffn = 1\nlayers = 1\nheads = 8\nkv_heads = 3\nbatch = 1\n"
     "context = 1\n",
     6, "kv_heads 3 must divide heads 8"},
    {"[moe]\nhidden = 64\nexpert_ffn = 1\nexperts = 4\ntop_k = 8\ntokens_per_gpu = 1\n", 5,
     "top_k 8 exceeds experts 4"},
    {"[moe]\nhidden = 64\nexpert_ffn = 1\nexperts = 4\ntop_k = 2\ntokens_per_gpu = 1\n"
     "zipf = 11\n",
     7, "zipf is 11"},
    {"[moe]\nzipf = -1\n", 2, "zipf is -1: must be in [0, 10]"},
    {"[moe]\nzipf = nan\n", 2, "zipf = 'nan': not a number"},
    {"[dlrm] x\n", 1, "bad section header '[dlrm] x'"},
    {"[dlrm]\nname = " /* 64 characters: one more than name[] holds */
     "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl\n",
     2, "name is longer than 63 characters"},
    {"[dlrm]\nembedding_dim = 16\nrows = 1, 2, 3\npooling = 1, 2\ndense_features = 1\n"
     "bottom_mlp = 16\ntop_mlp = 1\ninteraction = dot\nbatch_per_gpu = 1\n",
     4, "'pooling' has 2 values but 'rows' (line 3) has 3"},
    {"[dlrm]\nembedding_dim = 16\nrows = 1\npooling = 1\nbottom_mlp = 16\ntop_mlp = 1\n"
     "interaction = dot\nbatch_per_gpu = 1\n",
     1, "[dlrm] lacks the required key 'dense_features'"},
    {"[dlrm]\nembedding_dim = 16\nrows = 1\npooling = 1\ndense_features = 1\n"
     "bottom_mlp = 16\ntop_mlp = 1\ninteraction = dcn\nbatch_per_gpu = 1\ndcn_layers = 2\n",
     8, "interaction = dcn needs dcn_layers and dcn_low_rank"},
    {GOOD "dcn_low_rank = 64\n", 11, "dcn_* keys are set but interaction (line 9) is dot"},
    {GOOD "min_shard_dim = 32\n", 11, "min_shard_dim 32 exceeds embedding_dim 16"},
};

static void bad_files(void) {
  sim_config_t* c = calloc(1, sizeof *c);
  char err[512];
  ASSERT_NOT_NULL(c);
  t_context("good body");
  int rc = sim_config_parse(GOOD, "good.cfg", c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_NEAR(c->batch_per_gpu, 128, 0);
  ASSERT_STR_EQ(c->name, "good.cfg"); /* no name key: the file's */
  ASSERT_NEAR(c->min_shard_dim, 16, 0); /* README.md's defaults */
  ASSERT_EQ(c->sharding, SIM_SHARD_TABLE);
  ASSERT_NEAR(c->dtype_bytes, 2, 0);
  ASSERT_NEAR(c->grad_bytes, 4, 0);
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    t_context("bad case %zu: %s", i, kBad[i].words);
    err[0] = '\0';
    ASSERT_EQ(sim_config_parse(kBad[i].text, "bad.cfg", c, err, sizeof err), -1);
    char where[32];
    snprintf(where, sizeof where, "bad.cfg:%d:", kBad[i].line);
    if (strncmp(err, where, strlen(where)))
      t_fail(__FILE__, __LINE__, "message does not start with \"%s\": \"%s\"", where, err);
    char words[256];
    snprintf(words, sizeof words, "%s", kBad[i].words);
    for (char* w = strtok(words, "|"); w; w = strtok(NULL, "|"))
      if (!t_contains(err, w)) t_fail(__FILE__, __LINE__, "message lacks \"%s\": \"%s\"", w, err);
  }
  free(c);
}

/* Cases built at run time: a list one value longer than the tables it fills, a line longer
 * than the parser's buffer, a binary file. */
static void big_and_binary(void) {
  sim_config_t* c = calloc(1, sizeof *c);
  size_t cap = 64 * 1024;
  char *text = calloc(cap, 1), err[512];
  ASSERT_NOT_NULL(c);
  ASSERT_NOT_NULL(text);
  t_context("rows: SIM_MAX_TABLES values, then one more");
  size_t n = (size_t)snprintf(text, cap, "[dlrm]\nrows = 1");
  for (int i = 1; i < SIM_MAX_TABLES; i++) n += (size_t)snprintf(text + n, cap - n, ", 1");
  snprintf(text + n, cap - n, "\n");
  ASSERT_EQ(sim_config_parse(text, "big.cfg", c, err, sizeof err), -1); /* lacks keys, no more */
  ASSERT_STR_HAS(err, "big.cfg:1: [dlrm] lacks the required key 'embedding_dim'");
  snprintf(text + n, cap - n, ", 1\n");
  ASSERT_EQ(sim_config_parse(text, "big.cfg", c, err, sizeof err), -1);
  ASSERT_STR_HAS(err, "big.cfg:2: rows has more than 1024 values");
  t_context("a line of 16384 characters");
  n = (size_t)snprintf(text, cap, "[dlrm]\nname = ");
  memset(text + n, 'x', 16384 - strlen("name = "));
  text[n + 16384 - strlen("name = ")] = '\0';
  ASSERT_EQ(sim_config_parse(text, "long.cfg", c, err, sizeof err), -1);
  ASSERT_STR_HAS(err, "long.cfg:2: line longer than 16383 characters");
  t_context("binary file");
  char path[] = "/tmp/fco-sim-config-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  static const char kBin[] = "[dlrm]\nname = a\0b\n";
  ASSERT_EQ(write(fd, kBin, sizeof kBin - 1), (ssize_t)(sizeof kBin - 1));
  close(fd);
  ASSERT_EQ(sim_config_load(path, c, err, sizeof err), -1);
  ASSERT_STR_HAS(err, "binary file (NUL byte)");
  unlink(path);
  free(text);
  free(c);
}

/* Values at the ends of their documented ranges are accepted (README.md's key tables). */
static void edges(void) {
  sim_config_t* c = calloc(1, sizeof *c);
  char err[512];
  ASSERT_NOT_NULL(c);
  t_context("dlrm edges: D 1, fractional pooling, fp8, min_shard_dim 1");
  int rc = sim_config_parse("[dlrm]\nembedding_dim = 1\nrows = 1, 2\npooling = 0.5, 2\n"
                            "dense_features = 0\nbottom_mlp = 1\ntop_mlp = 1\ninteraction = dot\n"
                            "global_batch = 1\ndtype = fp8\nmin_shard_dim = 1\n",
                            "dir/sub/edge.cfg", c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_NEAR(c->emb_dim, 1, 0);
  ASSERT_NEAR(c->pooling[0], 0.5, 0); /* an average: need not be whole */
  ASSERT_NEAR(c->dtype_bytes, 1, 0);
  ASSERT_NEAR(c->global_batch, 1, 0);
  ASSERT_STR_EQ(c->name, "edge.cfg"); /* the file's base name */
  t_context("moe edges: top_k = experts, zipf 10");
  rc = sim_config_parse("[moe]\nhidden = 1\nexpert_ffn = 1\nexperts = 4\ntop_k = 4\n"
                        "tokens_per_gpu = 1\nzipf = 10\n", "moe.cfg", c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_NEAR(c->top_k, 4, 0);
  ASSERT_NEAR(c->zipf, 10, 0);
  ASSERT_NEAR(c->gated, 1, 0); /* default */
  t_context("decode edges: vocab 0 (no LM head), head_dim from hidden / heads");
  rc = sim_config_parse("[decode]\nhidden = 96\nffn = 1\nlayers = 1\nheads = 8\nkv_heads = 8\n"
                        "vocab = 0\nbatch = 1\ncontext = 0\n", "dec.cfg", c, err, sizeof err);
  if (rc) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_NEAR(c->vocab, 0, 0);
  ASSERT_NEAR(c->head_dim, 12, 0);
  free(c);
}

int main(void) {
  shipped();
  bad_files();
  big_and_binary();
  edges();
  printf("test_sim_config: ok\n");
  return 0;
}
