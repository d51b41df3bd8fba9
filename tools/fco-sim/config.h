/*
 * config.h — model configuration files of fco-sim: one `[dlrm]`, `[decode]` or `[moe]`
 * section of `key = value` lines; lists are comma-separated; `#` starts a comment. Every error
 * names the file and line ("dlrm.cfg:12: 'pooling' has 25 values but 'rows' (line 11) has 26").
 * The keys of each model, their meaning and defaults: tools/fco-sim/README.md.
 */
#ifndef FCO_SIM_CONFIG_H_
#define FCO_SIM_CONFIG_H_

#include <stddef.h>

#define SIM_MAX_TABLES 1024
#define SIM_MAX_LAYERS 32

typedef enum { SIM_MODEL_DLRM = 0, SIM_MODEL_DECODE, SIM_MODEL_MOE, SIM_MODEL_NUM } sim_model_t;
typedef enum { SIM_INTER_DOT = 0, SIM_INTER_DCN } sim_interaction_t;
typedef enum { SIM_SHARD_TABLE = 0, SIM_SHARD_COLUMN, SIM_SHARD_GRID, SIM_SHARD_NUM } sim_sharding_t;

typedef struct {
  int model; /* sim_model_t */
  char name[64];
  char path[256];

  /* [dlrm] */
  int num_tables;
  double rows[SIM_MAX_TABLES];
  double pooling[SIM_MAX_TABLES];
  double emb_dim;
  double batch_per_gpu; /* 0 when global_batch is given (strong scaling)  */
  double global_batch;  /* 0 when batch_per_gpu is given (weak scaling)   */
  double dense_features;
  int num_bottom, num_top;
  double bottom[SIM_MAX_LAYERS], top[SIM_MAX_LAYERS];
  int interaction; /* sim_interaction_t */
  double dcn_layers, dcn_low_rank;
  double dtype_bytes; /* embeddings and activations */
  double grad_bytes;  /* dense gradients (AllReduce) */
  int sharding;       /* sim_sharding_t */
  double min_shard_dim;

  /* [decode] (tensor parallel) and [moe] */
  double hidden, ffn, layers, heads, kv_heads, head_dim, vocab, batch, context, gated;
  double expert_ffn, experts, top_k, tokens_per_gpu, zipf;
} sim_config_t;

/* Parse a file; 0 ok, else -1 and "path:line: message" in err. */
int sim_config_load(const char* path, sim_config_t* c, char* err, size_t err_len);
/* Parse text (name: the file name used in messages). */
int sim_config_parse(const char* text, const char* name, sim_config_t* c, char* err,
                     size_t err_len);

const char* sim_model_name(int model);
const char* sim_sharding_name(int sharding);

#endif /* FCO_SIM_CONFIG_H_ */
