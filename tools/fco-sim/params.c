/*
 * params.c — defaults, flag lookup and range checks of the parameter table (params.h).
 */
#include "params.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

const sim_param_info_t sim_param_info[] = {
#define SIM_PARAM_INFO(name, def, unit, help) {#name, def, unit, help, offsetof(sim_params_t, name)},
    SIM_PARAM_MAP(SIM_PARAM_INFO)
#undef SIM_PARAM_INFO
};
const int sim_num_params = (int)(sizeof sim_param_info / sizeof sim_param_info[0]);

void sim_params_default(sim_params_t* p) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < sim_num_params; i++) *sim_param_ptr(p, i) = sim_param_info[i].def;
}

double* sim_param_ptr(sim_params_t* p, int idx) {
  return (double*)(void*)((char*)p + sim_param_info[idx].offset);
}

double sim_param_get(const sim_params_t* p, int idx) {
  return *(const double*)(const void*)((const char*)p + sim_param_info[idx].offset);
}

int sim_param_find(const char* flag) {
  while (*flag == '-') flag++;
  for (int i = 0; i < sim_num_params; i++) {
    const char* a = sim_param_info[i].name;
    const char* b = flag;
    while (*a && *b && (*a == *b || (*a == '_' && *b == '-'))) a++, b++;
    if (!*a && !*b) return i;
  }
  return -1;
}

const char* sim_param_flag(int idx, char* buf, size_t len) {
  const char* name = sim_param_info[idx].name;
  size_t j = 0;
  for (; j + 1 < len && name[j]; j++) buf[j] = name[j] == '_' ? '-' : name[j];
  if (len) buf[j] = '\0';
  return buf;
}

static int is_toggle(const char* name) {
  return !strcmp(name, "remote_first") || !strcmp(name, "fco_pxn") || !strcmp(name, "baseline_overlap") ||
         !strcmp(name, "ddp_overlap") || !strcmp(name, "fuse_bwd") || !strcmp(name, "fco_land") ||
         !strcmp(name, "ea_land_overlap") || !strcmp(name, "ea_drain");
}

static int is_fraction(const char* name) {
  size_t n = strlen(name);
  return (n > 4 && !strcmp(name + n - 4, "_eff"));
}

/* Counts of SMs, tiles, blocks, tiles per signal: a fraction of one (--sms 0.5 made a wave
 * half a tile) or none (--ea-sig-every 0) runs but means nothing. tile_rows: 0 is fco's rule. */
static int is_count(const char* name) {
  return !strcmp(name, "sms") || !strcmp(name, "gemm_tile") || !strcmp(name, "gemv_tile_cols") ||
         !strcmp(name, "ea_blocks_per_sm") || !strcmp(name, "ea_sig_every") ||
         !strcmp(name, "tile_rows");
}

int sim_params_check(const sim_params_t* p, char* err, size_t err_len) {
  static const char* const kPositive[] = {"nvl_gbs", "nic_gbps", "hbm_gbs", "tflops", "sms",
                                          "gemm_tile", "gemv_tile_cols", "gemv_x_gbs",
                                          "access_bytes", "ea_blocks_per_sm"};
  for (int i = 0; i < sim_num_params; i++) {
    const char* name = sim_param_info[i].name;
    double v = sim_param_get(p, i);
    int bad = !(v >= 0) || v > 1e12; /* also rejects NaN */
    for (size_t k = 0; k < sizeof kPositive / sizeof kPositive[0]; k++)
      if (!strcmp(name, kPositive[k]) && !(v > 0)) bad = 1;
    if (is_fraction(name) && !(v > 0 && v <= 1)) bad = 1;
    if (is_toggle(name) && v != 0 && v != 1) bad = 1;
    int zero_ok = !strcmp(name, "tile_rows");
    if (is_count(name) && !(v == floor(v) && (v >= 1 || (zero_ok && v == 0)))) bad = 1;
    if (!strcmp(name, "jitter") && !(v < 1)) bad = 1;
    if ((!strcmp(name, "fused_penalty") || !strcmp(name, "fused_interf") ||
         !strcmp(name, "fused_interf_net")) && !(v < 10))
      bad = 1;
    if (bad) {
      const char* want = is_toggle(name)   ? "0 or 1"
                         : zero_ok           ? "0 (fco's rule) or a whole number, 1 to 1e12"
                         : is_count(name)    ? "a whole number, 1 to 1e12"
                         : is_fraction(name) ? "in (0, 1]"
                         : !strcmp(name, "jitter") ? "in [0, 1)"
                                                    : "a non-negative number (some must be > 0)";
      char flag[64];
      snprintf(err, err_len, "--%s is %g: must be %s", sim_param_flag(i, flag, sizeof flag), v,
               want);
      return -1;
    }
  }
  return 0;
}
