/*
 * overlap.h — the tile-pipeline model of a fused operator on one rank.
 *
 * A fused kernel computes its tiles in waves (one tile per SM: `sms` tiles per wave) and each
 * finished tile is put straight to its destination while the next waves compute. Model: chunks
 * (waves) computed back to back; chunk i's bytes enter each link's FIFO when its compute ends;
 * a link sends at its bandwidth. With T equal chunks, compute C and link time M this gives
 *     max(C, M) + min(C, M) / T   (+ the link latency once)
 * i.e. the longer stage plus one chunk of the shorter one (fill or drain). An unfused operator
 * is C + M. The order of the tiles matters when destinations differ in link: remote-first
 * starts the slow NIC transfers at once; local-first leaves them, exposed, at the tail.
 *
 * What a real fused kernel adds to that ideal (sim_fused_time; constants in params.h, fitted
 * by `fco-sim fit` on measured fused rows, docs/fco-sim.md):
 *   interference  the SMs issue the NVLink stores themselves, and stall on them: a wave's
 *                 compute is stretched by fused_interf x its own NVLink put time
 *                 (fused_interf_net x its NIC time for NIC puts). 0 = the ideal pipeline,
 *                 1 = compute and NVLink puts serialize.
 *   signals       every wave of tiles that signal a peer (release fence + flag) stalls
 *                 fco_sig_us (per wave: the SMs stall in parallel); a kernel that signals
 *                 once per sig_every tiles (the embedding kernel since ed0108a: one fence per
 *                 batch of 4 remote tiles) stalls fco_sig_us / sig_every per such wave.
 *   landing       staged receivers (fco's all-to-all kernels) copy what they received from
 *                 the workspace into their output: 2 x bytes / HBM. After their tiles (the
 *                 GEMM + All-to-All kernel), or, with land_overlap (the embedding kernel since
 *                 ed0108a: land units polled between its local tiles, spread over all
 *                 blocks), from the start of its self tiles on, alongside them: the kernel
 *                 ends at max(pipeline end, self phase start + landing). Remote-first only
 *                 (local-first: nothing has arrived when the self tiles run; after them).
 *   switch drain  (switch_drain: the embedding kernel) a block's last remote tiles end in a
 *                 signal batch whose fence waits until the batch's NVLink stores are
 *                 acknowledged, and its first local tile starts with a block-wide sync (the
 *                 land poll): every block waits for its pending puts. About (sig_every + 1)/2
 *                 tiles a block are pending (the phase ends anywhere in a batch), for every
 *                 co-resident block (sms x ea_blocks_per_sm), as a share of the NVLink tiles
 *                 (at most all of them): drain = that share x NVLink bytes / NVLink GB/s,
 *                 added where the self tiles start. A constant of the kernel's design, not of
 *                 the workload: its tiles are 16 KB whatever D and dtype (C bags x row bytes),
 *                 so at 2 GPUs it is 2.5 x 16 KB x 264 / 364 GB/s = 29.7 us per call.
 *   fixed         fco_launch_us per kernel, fco_peer_us per destination.
 */
#ifndef FCO_SIM_OVERLAP_H_
#define FCO_SIM_OVERLAP_H_

#include "net.h"

#define SIM_MAX_CHUNKS 4096 /* more waves than this are merged: the fill term shrinks below 0.03% */

typedef struct {
  double compute_us;
  double bytes[SIM_NUM_LINKS];
} sim_chunk_t;

typedef struct {
  double gbs[SIM_NUM_LINKS];
  double lat_us[SIM_NUM_LINKS];
} sim_links_t;

typedef struct {
  double end_us;                      /* all computed and every byte delivered         */
  double compute_end_us;
  double link_end_us[SIM_NUM_LINKS];  /* last byte delivered (incl. latency); 0 unused  */
} sim_pipe_t;

/* Run chunks through the pipeline (see above). */
sim_pipe_t sim_pipeline(const sim_chunk_t* chunks, int n, const sim_links_t* links);

/* Destination classes of a rank's tiles. */
enum { SIM_DEST_SELF = 0, SIM_DEST_NODE = 1, SIM_DEST_REMOTE = 2, SIM_NUM_DEST = 3 };

/* One rank's part of a fused producer operator (compute -> put to destinations). */
typedef struct {
  double compute_us;          /* the computation alone (no launch cost), jitter applied   */
  double tiles;               /* tiles of this rank                                     */
  double frac[SIM_NUM_DEST];  /* share of the tiles bound for self / node peers / remote  */
  double bytes[SIM_NUM_DEST]; /* bytes put to node peers / remote nodes (self: 0)         */
  int peers[SIM_NUM_DEST];    /* destinations in each class                              */
  int broadcast;              /* every tile goes to every destination (allreduce): the   */
                              /* bytes of each class spread over all tiles, order moot   */
  double net_x;               /* NIC bandwidth multiplier (rail relaying lends the other  */
                              /* GPUs' NICs; 0 or 1: its own NIC only)                    */
  double relay_frac;          /* share of remote bytes that first cross NVLink (relay)    */
  double land_bytes;          /* bytes this rank copies from its staging into its output  */
                              /* (read + write: 2 x land_bytes / HBM)                     */
  double sig_every;           /* tiles per signal (batch); <= 1: every tile signals       */
  int land_overlap;           /* land alongside the self tiles, not after every tile      */
  int switch_drain;           /* before its first self tile a block waits until the puts  */
                              /* of its last signal batch are acknowledged (see above)    */
} sim_fused_op_t;

/* Fused kernels whose design the model distinguishes (sim_fused_kernel):
 *   SIM_FUSED_GEMM_A2A   fco's GEMM + All-to-All (src/cuda/gemm_alltoall_fused.cu): every
 *                        tile signals; lands after its tiles;
 *   SIM_FUSED_EMBEDDING  fco's embedding lookup + All-to-All (src/cuda/embedding_alltoall_fused.cu,
 *                        since ed0108a): one signal per ea_sig_every remote tiles; lands
 *                        alongside its local tiles (ea_land_overlap). */
enum { SIM_FUSED_GEMM_A2A = 0, SIM_FUSED_EMBEDDING = 1 };

/* Set op's signalling, landing and switch drain to those of kernel `kind` (params:
 * ea_sig_every, ea_land_overlap, ea_drain). */
void sim_fused_kernel(const sim_params_t* p, int kind, sim_fused_op_t* op);

/* The parts of one fused kernel's time (sim_fused_time), in us. */
typedef struct {
  sim_pipe_t pipe;     /* the pipeline (stalls included in its compute)             */
  double interf_us;    /* compute stall on the kernel's own puts (interference)     */
  double sig_us;       /* signal stalls                                             */
  double land_us;      /* landing copy: the part that ends after the pipeline       */
  double drain_us;     /* switch to the self tiles: wait for the last batch's puts     */
  double self_start_us; /* when the self tiles start (remote-first; compute end if none) */
  double fixed_us;     /* fco_launch_us + per-destination costs                     */
} sim_fused_detail_t;

/* The rank-`r` fused op of rank-1 traffic u, v (see net.h): tile shares by destination
 * follow v, bytes follow u[r] * v; it lands (staging -> output) everything it receives. */
void sim_fused_from_rank1(sim_topo_t t, const double* u, const double* v, int r,
                          double compute_us, double tiles, sim_fused_op_t* op);
/* The same from the sums of u and v taken once for all ranks (sim_traffic_init): O(1). */
void sim_fused_from_traffic(sim_topo_t t, const sim_traffic_t* s, const double* u,
                            const double* v, int r, double compute_us, double tiles,
                            sim_fused_op_t* op);

/* Time of the fused kernel on one rank: fco_launch + per-destination cost + the pipeline of
 * its waves, each wave's compute (x (1 + fused_penalty)) stretched by its interference and
 * signal stalls + the landing copy. With fco_pxn (a fused kernel that relays remote tiles
 * through the GPU on the destination's rail, as NCCL's PXN does), the caller sets net_x and
 * relay_frac: see sim_fused_all. The tile order is remote-first when p->remote_first, else
 * local-first. `detail` may be NULL. */
double sim_fused_time(const sim_params_t* p, const sim_fused_op_t* op, sim_fused_detail_t* detail);

/* Waves of a kernel with `tiles` tiles: ceil(tiles / sms), at least 1. */
double sim_waves(const sim_params_t* p, double tiles);

#endif /* FCO_SIM_OVERLAP_H_ */
