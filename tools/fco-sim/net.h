/*
 * net.h — fco-sim's network layer: two link classes (NVLink inside a node, one NIC per GPU
 * between nodes), the collectives as NCCL runs them at that scale, and the direct traffic of
 * fco's fused kernels. All times in microseconds, sizes in bytes.
 *
 * NCCL model (the structure of NCCL's own tuner, src/graph/tuning.cc): for each protocol p of
 * LL / LL128 / Simple, time = base_p + hops * lat_link * hop_x_p + bytes / (bw_link * eff_p,link),
 * and the fastest (algorithm, protocol) pair wins, as NCCL's tuner picks it.
 *   allreduce ring: 2(P-1) steps, 2(N-1) of them cross the network; moves 2(P-1)/P x bytes
 *                   through the slowest edge: min(NVLink, G x NIC) (one ring per NIC rail).
 *   allreduce tree: intra-node chain + inter-node double binary tree (N > 1 only):
 *                   2((G-1) NVLink + ceil(log2 N) network) hops, 2 x bytes / (edge * tree_eff).
 *   all-to-all:     one node: flat over NVLink. Several nodes: hierarchical (NCCL's PXN): data
 *                   for local GPU j of any node first moves over NVLink to this node's GPU j,
 *                   then rail j carries it to the other nodes; the two phases add up. Plus
 *                   nccl_peer_us per peer (P-1 send/recv pairs).
 * Traffic of an all-to-all is rank-1: bytes(src -> dst) = u[src] * v[dst] (src != dst), which
 * covers every exchange fco-sim needs: DLRM (a rank's shard output x a destination's batch
 * share), MoE (a rank's tokens x an expert GPU's load share) and their transposes.
 */
#ifndef FCO_SIM_NET_H_
#define FCO_SIM_NET_H_

#include "params.h"

typedef struct {
  int nodes;
  int gpn; /* GPUs per node */
} sim_topo_t;

static inline int sim_topo_ranks(sim_topo_t t) { return t.nodes * t.gpn; }

enum { SIM_LINK_NVL = 0, SIM_LINK_NET = 1, SIM_NUM_LINKS = 2 };
enum { SIM_PROTO_LL = 0, SIM_PROTO_LL128 = 1, SIM_PROTO_SIMPLE = 2, SIM_NUM_PROTOS = 3 };
typedef enum {
  SIM_ALGO_NONE = 0, /* nothing to move (one rank, or comm_off) */
  SIM_ALGO_RING,
  SIM_ALGO_TREE,
  SIM_ALGO_A2A_FLAT,
  SIM_ALGO_A2A_HIER,
  SIM_ALGO_MEASURED, /* taken from the calibration file */
  SIM_ALGO_NUM
} sim_algo_t;

typedef struct {
  double us;
  int algo;  /* sim_algo_t */
  int proto; /* SIM_PROTO_* (-1 when none) */
} sim_coll_t;

const char* sim_algo_name(int algo);
const char* sim_proto_name(int proto);

/* Achievable bandwidth (GB/s per direction per GPU) and one-hop latency of a link class. */
double sim_link_gbs(const sim_params_t* p, int link);
double sim_link_lat_us(const sim_params_t* p, int link);
/* bytes over gbs GB/s, in us. */
static inline double sim_xfer_us(double bytes, double gbs) { return bytes / (gbs * 1e3); }

/* NCCL allreduce of `bytes` per rank: the faster of ring and tree, over protocols. */
sim_coll_t sim_nccl_allreduce(const sim_params_t* p, sim_topo_t t, double bytes);
/* One algorithm and protocol (SIM_ALGO_RING / SIM_ALGO_TREE); us = INFINITY if not possible. */
sim_coll_t sim_nccl_allreduce_with(const sim_params_t* p, sim_topo_t t, double bytes, int algo,
                                   int proto);

/* Per-GPU bytes of the hierarchical all-to-all phases of rank-1 traffic u, v (length P): the
 * largest of (sent, received) over GPUs, phase 1 over NVLink, phase 2 over the NIC. */
void sim_a2a_phase_bytes(sim_topo_t t, const double* u, const double* v, double* nvl_max,
                         double* net_max);
/* NCCL all-to-all of rank-1 traffic u, v (length P). */
sim_coll_t sim_nccl_alltoall(const sim_params_t* p, sim_topo_t t, const double* u,
                             const double* v);

/* Direct traffic of rank `r` (fco's fused kernels put each tile straight to its destination:
 * NVLink inside the node, its own NIC to other nodes; no hierarchy). */
typedef struct {
  double send[SIM_NUM_LINKS];
  double recv[SIM_NUM_LINKS];
  int peers[SIM_NUM_LINKS];
} sim_vol_t;
void sim_direct_volume(sim_topo_t t, const double* u, const double* v, int r, sim_vol_t* out);

/* The sums sim_direct_volume takes over all ranks (U, V) and over rank r's node (Un, Vn),
 * taken once for every rank: the volumes of all P ranks in O(P), not O(P^2) (16384 nodes x 8
 * GPUs took minutes). Summed in the same order, so the volumes are the same to the bit. */
typedef struct {
  double U, V;
  double *Un, *Vn; /* per node */
} sim_traffic_t;
/* 0 ok, -1 out of memory (s still freeable). */
int sim_traffic_init(sim_topo_t t, const double* u, const double* v, sim_traffic_t* s);
void sim_traffic_free(sim_traffic_t* s);
/* sim_direct_volume of rank r from those sums, in O(1). */
void sim_direct_volume_at(sim_topo_t t, const sim_traffic_t* s, const double* u, const double* v,
                          int r, sim_vol_t* out);

/* fco's one-shot allreduce on its own (no compute): every rank puts its whole input to every
 * peer, signals, then sums P inputs locally: fco_launch + lat + (P-1) bytes / link
 * + (P+1) bytes / HBM. The model the measured fco-bench rows validate. */
double sim_fco_oneshot_allreduce(const sim_params_t* p, sim_topo_t t, double bytes);

#endif /* FCO_SIM_NET_H_ */
