/*
 * net.c — link classes and collective-time models of fco-sim (see net.h for the formulas).
 */
#include "net.h"

#include <math.h>
#include <stdlib.h>

const char* sim_algo_name(int algo) {
  static const char* const kNames[SIM_ALGO_NUM] = {"none", "ring", "tree", "a2a-flat",
                                                   "a2a-hier", "measured"};
  return algo >= 0 && algo < SIM_ALGO_NUM ? kNames[algo] : "?";
}

const char* sim_proto_name(int proto) {
  static const char* const kNames[SIM_NUM_PROTOS] = {"LL", "LL128", "Simple"};
  return proto >= 0 && proto < SIM_NUM_PROTOS ? kNames[proto] : "";
}

double sim_link_gbs(const sim_params_t* p, int link) {
  return link == SIM_LINK_NVL ? p->nvl_gbs : p->nic_gbps / 8.0 * p->nic_eff;
}

double sim_link_lat_us(const sim_params_t* p, int link) {
  return link == SIM_LINK_NVL ? p->nvl_lat_us : p->nic_lat_us;
}

static double proto_base(const sim_params_t* p, int proto) {
  return proto == SIM_PROTO_LL ? p->nccl_ll_us
         : proto == SIM_PROTO_LL128 ? p->nccl_ll128_us
                                    : p->nccl_simple_us;
}

static double proto_hop_x(const sim_params_t* p, int proto) {
  return proto == SIM_PROTO_LL ? 1.0 : proto == SIM_PROTO_LL128 ? p->ll128_hop_x : p->simple_hop_x;
}

/* NCCL's achievable bandwidth on one link class with one protocol. */
static double proto_gbs(const sim_params_t* p, int proto, int link) {
  double eff;
  if (link == SIM_LINK_NVL)
    eff = proto == SIM_PROTO_LL ? p->nvl_ll_eff
          : proto == SIM_PROTO_LL128 ? p->nvl_ll128_eff : p->nvl_simple_eff;
  else
    eff = proto == SIM_PROTO_LL ? p->net_ll_eff
          : proto == SIM_PROTO_LL128 ? p->net_ll128_eff : p->net_simple_eff;
  return sim_link_gbs(p, link) * eff;
}

/* Slowest edge of a ring/tree that uses every rail: NVLink inside a node, and the node's G
 * NICs together (one ring or tree per rail) between nodes. */
static double edge_gbs(const sim_params_t* p, sim_topo_t t, int proto) {
  double nvl = proto_gbs(p, proto, SIM_LINK_NVL);
  double net = t.gpn * proto_gbs(p, proto, SIM_LINK_NET);
  if (t.nodes == 1) return nvl;
  if (t.gpn == 1) return net;
  return nvl < net ? nvl : net;
}

sim_coll_t sim_nccl_allreduce_with(const sim_params_t* p, sim_topo_t t, double bytes, int algo,
                                   int proto) {
  sim_coll_t c = {0, SIM_ALGO_NONE, -1};
  int P = sim_topo_ranks(t), N = t.nodes, G = t.gpn;
  if (P <= 1 || bytes <= 0 || p->comm_off) return c;
  double hop = proto_hop_x(p, proto);
  double bw = edge_gbs(p, t, proto);
  c.algo = algo;
  c.proto = proto;
  if (algo == SIM_ALGO_RING) {
    double lat = 2.0 * (P - N) * p->nvl_lat_us + 2.0 * (N - 1) * p->nic_lat_us;
    c.us = proto_base(p, proto) + hop * lat + sim_xfer_us(2.0 * (P - 1) / P * bytes, bw);
  } else if (algo == SIM_ALGO_TREE && N > 1) {
    double lat = 2.0 * ((G - 1) * p->nvl_lat_us + ceil(log2((double)N)) * p->nic_lat_us);
    c.us = proto_base(p, proto) + hop * lat + sim_xfer_us(2.0 * bytes, bw * p->tree_eff);
  } else {
    c.us = INFINITY;
  }
  return c;
}

sim_coll_t sim_nccl_allreduce(const sim_params_t* p, sim_topo_t t, double bytes) {
  sim_coll_t best = {0, SIM_ALGO_NONE, -1};
  if (sim_topo_ranks(t) <= 1 || bytes <= 0 || p->comm_off) return best;
  best.us = INFINITY;
  static const int kAlgos[] = {SIM_ALGO_RING, SIM_ALGO_TREE};
  for (int a = 0; a < 2; a++)
    for (int proto = 0; proto < SIM_NUM_PROTOS; proto++) {
      sim_coll_t c = sim_nccl_allreduce_with(p, t, bytes, kAlgos[a], proto);
      if (c.us < best.us) best = c;
    }
  return best;
}

/* Node sums U_n, V_n and rail sums of v (Σ over nodes of v at local index j). */
typedef struct {
  double U, V;
  double *Un, *Vn, *Vrail, *Urail;
} sums_t;

static int sums_init(sim_topo_t t, const double* u, const double* v, sums_t* s) {
  s->U = s->V = 0;
  s->Un = calloc((size_t)t.nodes, sizeof(double));
  s->Vn = calloc((size_t)t.nodes, sizeof(double));
  s->Vrail = calloc((size_t)t.gpn, sizeof(double));
  s->Urail = calloc((size_t)t.gpn, sizeof(double));
  if (!s->Un || !s->Vn || !s->Vrail || !s->Urail) return -1;
  for (int n = 0; n < t.nodes; n++)
    for (int j = 0; j < t.gpn; j++) {
      int r = n * t.gpn + j;
      s->U += u[r];
      s->V += v[r];
      s->Un[n] += u[r];
      s->Vn[n] += v[r];
      s->Vrail[j] += v[r];
      s->Urail[j] += u[r];
    }
  return 0;
}

static void sums_free(sums_t* s) {
  free(s->Un);
  free(s->Vn);
  free(s->Vrail);
  free(s->Urail);
}

void sim_a2a_phase_bytes(sim_topo_t t, const double* u, const double* v, double* nvl_max,
                         double* net_max) {
  *nvl_max = *net_max = 0;
  int P = sim_topo_ranks(t);
  if (P <= 1) return;
  sums_t s;
  if (sums_init(t, u, v, &s)) {
    sums_free(&s);
    *nvl_max = *net_max = INFINITY; /* out of memory: never a silent 0 */
    return;
  }
  for (int n = 0; n < t.nodes; n++)
    for (int j = 0; j < t.gpn; j++) {
      int r = n * t.gpn + j;
      double send1, recv1, send2 = 0, recv2 = 0;
      if (t.nodes == 1) {
        send1 = u[r] * (s.V - v[r]);
        recv1 = v[r] * (s.U - u[r]);
      } else if (t.gpn == 1) {
        send1 = recv1 = 0;
        send2 = u[r] * (s.V - v[r]);
        recv2 = v[r] * (s.U - u[r]);
      } else {
        /* phase 1: everything for rail i != j leaves GPU (n, j) over NVLink; GPU (n, j)
         * gathers its rail's data from the G-1 other GPUs of its node */
        send1 = u[r] * (s.V - s.Vrail[j]);
        recv1 = s.Vrail[j] * (s.Un[n] - u[r]);
        /* phase 2: rail j carries node n's data for (m, j), m != n */
        send2 = s.Un[n] * (s.Vrail[j] - v[r]);
        recv2 = v[r] * (s.U - s.Un[n]);
      }
      double m1 = send1 > recv1 ? send1 : recv1, m2 = send2 > recv2 ? send2 : recv2;
      if (m1 > *nvl_max) *nvl_max = m1;
      if (m2 > *net_max) *net_max = m2;
    }
  sums_free(&s);
}

sim_coll_t sim_nccl_alltoall(const sim_params_t* p, sim_topo_t t, const double* u,
                             const double* v) {
  sim_coll_t best = {0, SIM_ALGO_NONE, -1};
  int P = sim_topo_ranks(t);
  if (P <= 1 || p->comm_off) return best;
  double nvl, net;
  sim_a2a_phase_bytes(t, u, v, &nvl, &net);
  if (nvl <= 0 && net <= 0) return best;
  int has_nvl = t.gpn > 1, has_net = t.nodes > 1;
  best.us = INFINITY;
  for (int proto = 0; proto < SIM_NUM_PROTOS; proto++) {
    double hop = proto_hop_x(p, proto);
    double us = proto_base(p, proto) + (P - 1) * p->nccl_peer_us;
    if (has_nvl) us += hop * p->nvl_lat_us + sim_xfer_us(nvl, proto_gbs(p, proto, SIM_LINK_NVL));
    if (has_net) us += hop * p->nic_lat_us + sim_xfer_us(net, proto_gbs(p, proto, SIM_LINK_NET));
    if (us < best.us) {
      best.us = us;
      best.proto = proto;
      best.algo = has_nvl && has_net ? SIM_ALGO_A2A_HIER : SIM_ALGO_A2A_FLAT;
    }
  }
  return best;
}

/* Rank r's direct volumes from the sums over all ranks (U, V) and over r's node (Un, Vn): the
 * one formula of sim_direct_volume and sim_direct_volume_at. */
static void volume_from(sim_topo_t t, double U, double V, double Un, double Vn, const double* u,
                        const double* v, int r, sim_vol_t* out) {
  out->send[SIM_LINK_NVL] = u[r] * (Vn - v[r]);
  out->send[SIM_LINK_NET] = u[r] * (V - Vn);
  out->recv[SIM_LINK_NVL] = v[r] * (Un - u[r]);
  out->recv[SIM_LINK_NET] = v[r] * (U - Un);
  out->peers[SIM_LINK_NVL] = t.gpn - 1;
  out->peers[SIM_LINK_NET] = sim_topo_ranks(t) - t.gpn;
}

void sim_direct_volume(sim_topo_t t, const double* u, const double* v, int r, sim_vol_t* out) {
  int P = sim_topo_ranks(t), n = r / t.gpn;
  double U = 0, V = 0, Un = 0, Vn = 0;
  for (int q = 0; q < P; q++) {
    U += u[q];
    V += v[q];
    if (q / t.gpn == n) {
      Un += u[q];
      Vn += v[q];
    }
  }
  volume_from(t, U, V, Un, Vn, u, v, r, out);
}

int sim_traffic_init(sim_topo_t t, const double* u, const double* v, sim_traffic_t* s) {
  int P = sim_topo_ranks(t);
  s->U = s->V = 0;
  s->Un = calloc((size_t)t.nodes, sizeof(double));
  s->Vn = calloc((size_t)t.nodes, sizeof(double));
  if (!s->Un || !s->Vn) return -1;
  for (int q = 0; q < P; q++) {
    s->U += u[q];
    s->V += v[q];
    s->Un[q / t.gpn] += u[q];
    s->Vn[q / t.gpn] += v[q];
  }
  return 0;
}

void sim_traffic_free(sim_traffic_t* s) {
  free(s->Un);
  free(s->Vn);
  s->Un = s->Vn = NULL;
}

void sim_direct_volume_at(sim_topo_t t, const sim_traffic_t* s, const double* u, const double* v,
                          int r, sim_vol_t* out) {
  const int n = r / t.gpn;
  volume_from(t, s->U, s->V, s->Un[n], s->Vn[n], u, v, r, out);
}

double sim_fco_oneshot_allreduce(const sim_params_t* p, sim_topo_t t, double bytes) {
  int P = sim_topo_ranks(t);
  if (P <= 1 || bytes <= 0 || p->comm_off) return 0;
  double nvl = sim_xfer_us((t.gpn - 1) * bytes, sim_link_gbs(p, SIM_LINK_NVL));
  double net = sim_xfer_us((double)(P - t.gpn) * bytes, sim_link_gbs(p, SIM_LINK_NET));
  double lat = t.nodes > 1 ? p->nic_lat_us : p->nvl_lat_us;
  return p->fco_launch_us + (P - 1) * p->fco_peer_us + lat + (nvl > net ? nvl : net) +
         sim_xfer_us((P + 1) * bytes, p->hbm_gbs);
}
