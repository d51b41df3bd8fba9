/*
 * params.h — every machine and model constant of fco-sim in one X-macro table, so the struct,
 * the defaults, the command-line flags (--nvl-gbs 364, ...), the '#' metadata lines and the
 * JSON output cannot drift apart. Defaults: H200 (NVLink 4 via NVSwitch) nodes of 8 GPUs, one
 * 400 Gb/s InfiniBand NIC per GPU. Where a default comes from (DESIGN.md probe, fitted to
 * bench/results/2026-11-30_nvidia-h200-x2_fe93fe66a60f, or an assumption) is in its help text
 * and in docs/fco-sim.md. The three fused-kernel constants marked "fitted" (fused_interf,
 * fco_sig_us, gemv_x_gbs) are the output of `fco-sim fit --calib calib/h200-x2-embedding_
 * alltoall.json,calib/h200-x2-gemv_allreduce.json` (run ed0108a38b78; fit set in validate.c);
 * tools/fco-sim/expected/fit-h200-x2.txt checks that they still are.
 */
#ifndef FCO_SIM_PARAMS_H_
#define FCO_SIM_PARAMS_H_

#include <stdio.h>

/* XX(name, default, unit, help) */
#define SIM_PARAM_MAP(XX)                                                                         \
  /* links */                                                                                     \
  XX(nvl_gbs, 364.0, "GB/s", "NVLink bandwidth per GPU per direction (DESIGN.md probe: SM stores)") \
  XX(nvl_lat_us, 0.6, "us", "NVLink one-way latency per hop (DESIGN.md probe: flag ping-pong)")   \
  XX(nic_gbps, 400.0, "Gb/s", "NIC line rate per GPU (one NIC per GPU, rail-optimised fabric)")   \
  XX(nic_eff, 0.92, "", "achievable fraction of the NIC line rate (assumption)")                  \
  XX(nic_lat_us, 2.7, "us", "network latency per hop (NCCL tuning model's LL net hop)")           \
  /* one GPU */                                                                                   \
  XX(hbm_gbs, 4300.0, "GB/s", "HBM bandwidth (DESIGN.md probe: copy)")                            \
  XX(tflops, 790.0, "TFLOP/s", "dense bf16 GEMM rate (DESIGN.md probe)")                          \
  XX(gather_eff, 0.6, "", "fraction of HBM bandwidth random embedding-row gathers reach (assumption)") \
  XX(access_bytes, 64.0, "B", "smallest HBM access per gathered row (narrower rows waste the rest)") \
  XX(kernel_us, 2.0, "us", "fixed cost per compute kernel in a CUDA graph (assumption)")          \
  XX(emb_bwd_x, 2.0, "x", "embedding backward+optimizer HBM bytes relative to forward gathers")  \
  XX(index_bytes, 8.0, "B", "bytes per embedding index (int64)")                                 \
  /* NCCL model: time = base + hops*lat*hop_x + bytes/(link*eff), min over protocols */           \
  XX(nccl_ll_us, 4.9, "us", "NCCL LL base latency (fitted, 2xH200 allreduce)")                    \
  XX(nccl_ll128_us, 4.25, "us", "NCCL LL128 base latency (fitted)")                               \
  XX(nccl_simple_us, 14.4, "us", "NCCL Simple base latency (fitted)")                             \
  XX(nvl_ll_eff, 0.06, "", "NCCL LL bandwidth fraction on NVLink (fitted)")                       \
  XX(nvl_ll128_eff, 0.35, "", "NCCL LL128 bandwidth fraction on NVLink (fitted)")                 \
  XX(nvl_simple_eff, 0.77, "", "NCCL Simple bandwidth fraction on NVLink (fitted)")               \
  XX(net_ll_eff, 0.5, "", "NCCL LL fraction on the NIC (8-byte lines, half data)")                \
  XX(net_ll128_eff, 0.9375, "", "NCCL LL128 fraction on the NIC (120 of 128 bytes data)")         \
  XX(net_simple_eff, 1.0, "", "NCCL Simple fraction on the NIC")                                  \
  XX(ll128_hop_x, 2.0, "x", "LL128 hop latency relative to LL (NCCL tuning model)")               \
  XX(simple_hop_x, 5.0, "x", "Simple hop latency relative to LL (NCCL tuning model)")             \
  XX(tree_eff, 0.92, "", "tree allreduce bandwidth relative to ring (NCCL tuning model)")         \
  XX(nccl_peer_us, 0.2, "us", "NCCL all-to-all cost per peer (P-1 send/recv pairs; assumption)")  \
  /* fco fused operators */                                                                       \
  XX(fco_launch_us, 4.3, "us", "fused kernel launch+completion (fitted, fco one-shot allreduce)") \
  XX(fco_peer_us, 0.02, "us", "fused kernel cost per destination (signal put; assumption)")      \
  XX(fused_interf, 0.65, "", "share of its NVLink put time a fused kernel's compute stalls (fitted)") \
  XX(fused_interf_net, 0.0, "", "the same for NIC puts (0: the NIC moves them, DMA; assumption)") \
  XX(fco_sig_us, 0.75, "us", "stall per wave of tiles that signal a peer (release, flag; fitted)") \
  XX(fco_land, 1.0, "0|1", "fused all-to-alls land staged data in the output (2 x bytes, HBM)") \
  XX(ea_land_overlap, 1.0, "0|1", "embedding kernel lands alongside its local tiles (0: after)") \
  XX(ea_sig_every, 4.0, "tiles", "embedding kernel: remote tiles per signal (FCO_EA_SIGNAL_EVERY)") \
  XX(ea_drain, 1.0, "0|1", "embedding kernel waits for its last signal batch's NVLink puts before its local tiles") \
  XX(ea_blocks_per_sm, 2.0, "",                                                                   \
     "co-resident blocks per SM of the modelled embedding kernel (as fitted: launch bounds"        \
     " 256, 2; fco's lean kernel now runs 3 or 4, FCO_EA_LEAN_BLOCKS)")                            \
  XX(fused_penalty, 0.0, "", "further compute slowdown in a fused kernel (the fit finds none)") \
  XX(sms, 132.0, "", "tiles in flight at once (H200 SMs, one tile per SM): one wave")             \
  XX(remote_first, 1.0, "0|1", "fused kernels compute tiles bound for other nodes first")         \
  XX(fco_pxn, 0.0, "0|1", "fused kernels relay remote tiles through the rail GPU (not built yet)") \
  XX(tile_rows, 0.0, "rows", "embedding tile: samples x one table (0: fco's rule, by D, tables)") \
  XX(gemm_tile, 128.0, "", "GEMM output tile edge (tile = gemm_tile x gemm_tile)")                \
  XX(gemv_tile_cols, 16.0, "cols",                                                               \
     "GEMV output columns per tile of the modelled fused GEMV (as fitted: 16; fco's now runs"      \
     " groups of 64/128 columns at M >= 9)")                                                       \
  XX(gemv_auto_max_m, 8.0, "rows",                                                               \
     "the model's bound for fco's AUTO: it fuses GEMV+AllReduce up to this M, else"                \
     " + fco_allreduce (as fitted; the library's bound is now M <= 16, bf16/f16)")                 \
  XX(gemv_auto_max_n, 4096.0, "cols",                                                            \
     "... and up to this N (as fitted; the library's bound is now N <= 16384)")                    \
  XX(gemv_x_gbs, 6600.0, "GB/s",                                                                 \
     "the modelled fused GEMV re-reads x per tile at this rate (fitted)")                          \
  /* skew and schedule */                                                                         \
  XX(jitter, 0.03, "", "per-rank compute-time jitter (coefficient of variation, each kernel)")    \
  XX(seed, 1.0, "", "seed of the jitter draws (deterministic)")                                   \
  XX(baseline_overlap, 1.0, "0|1", "baseline overlaps forward All-to-All with the bottom MLP")    \
  XX(ddp_overlap, 1.0, "0|1", "dense gradient AllReduce overlaps the rest of the backward pass")  \
  XX(fuse_bwd, 0.0, "0|1", "also fuse the backward All-to-All with the interaction's last GEMM")  \
  XX(dense_opt_bytes, 20.0, "B", "dense optimizer HBM bytes per parameter (Adagrad, fp32)")

typedef struct {
#define SIM_PARAM_FIELD(name, def, unit, help) double name;
  SIM_PARAM_MAP(SIM_PARAM_FIELD)
#undef SIM_PARAM_FIELD
  int comm_off; /* internal: every communication costs 0 (the compute-only reference run) */
} sim_params_t;

typedef struct {
  const char* name; /* C name: nvl_gbs; the flag is --nvl-gbs */
  double def;
  const char* unit;
  const char* help;
  size_t offset;
} sim_param_info_t;

extern const sim_param_info_t sim_param_info[];
extern const int sim_num_params;

void sim_params_default(sim_params_t* p);
/* Index of the parameter whose flag is `flag` ("--nvl-gbs" or "nvl-gbs" or "nvl_gbs"), or -1. */
int sim_param_find(const char* flag);
/* The flag of parameter idx without its leading "--" (underscores as dashes: "nvl-gbs") in buf
 * (cut to len - 1 characters); returns buf. */
const char* sim_param_flag(int idx, char* buf, size_t len);
double* sim_param_ptr(sim_params_t* p, int idx);
double sim_param_get(const sim_params_t* p, int idx);
/* Check ranges (bandwidths > 0, fractions in (0, 1], counts of SMs, tiles and blocks whole
 * and >= 1, ...); 0 ok, else message in err. */
int sim_params_check(const sim_params_t* p, char* err, size_t err_len);

#endif /* FCO_SIM_PARAMS_H_ */
