/*
 * overlap.c — tile-pipeline model of fused operators (see overlap.h).
 */
#include "overlap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

sim_pipe_t sim_pipeline(const sim_chunk_t* chunks, int n, const sim_links_t* links) {
  sim_pipe_t r;
  memset(&r, 0, sizeof r);
  double t = 0, free_at[SIM_NUM_LINKS] = {0};
  int used[SIM_NUM_LINKS] = {0};
  for (int i = 0; i < n; i++) {
    t += chunks[i].compute_us;
    for (int l = 0; l < SIM_NUM_LINKS; l++) {
      if (!(chunks[i].bytes[l] > 0)) continue;
      double start = free_at[l] > t ? free_at[l] : t;
      free_at[l] = start + sim_xfer_us(chunks[i].bytes[l], links->gbs[l]);
      used[l] = 1;
    }
  }
  r.compute_end_us = t;
  r.end_us = t;
  for (int l = 0; l < SIM_NUM_LINKS; l++) {
    if (!used[l]) continue;
    r.link_end_us[l] = free_at[l] + links->lat_us[l];
    if (r.link_end_us[l] > r.end_us) r.end_us = r.link_end_us[l];
  }
  return r;
}

double sim_waves(const sim_params_t* p, double tiles) {
  double w = ceil(tiles / p->sms - 1e-9);
  return w < 1 ? 1 : w;
}

/* Rank r's op from its direct volume and the sums of v over all ranks (V) and its node (Vn). */
static void fused_from(const sim_vol_t* vol, double V, double Vn, double vr, double compute_us,
                       double tiles, sim_fused_op_t* op) {
  memset(op, 0, sizeof *op);
  op->compute_us = compute_us;
  op->tiles = tiles;
  if (V > 0) {
    op->frac[SIM_DEST_SELF] = vr / V;
    op->frac[SIM_DEST_NODE] = (Vn - vr) / V;
    op->frac[SIM_DEST_REMOTE] = (V - Vn) / V;
  } else {
    op->frac[SIM_DEST_SELF] = 1;
  }
  op->bytes[SIM_DEST_NODE] = vol->send[SIM_LINK_NVL];
  op->bytes[SIM_DEST_REMOTE] = vol->send[SIM_LINK_NET];
  op->peers[SIM_DEST_NODE] = vol->peers[SIM_LINK_NVL];
  op->peers[SIM_DEST_REMOTE] = vol->peers[SIM_LINK_NET];
  op->land_bytes = vol->recv[SIM_LINK_NVL] + vol->recv[SIM_LINK_NET];
}

void sim_fused_from_rank1(sim_topo_t t, const double* u, const double* v, int r,
                          double compute_us, double tiles, sim_fused_op_t* op) {
  sim_vol_t vol;
  sim_direct_volume(t, u, v, r, &vol);
  int P = sim_topo_ranks(t), n = r / t.gpn;
  double V = 0, Vn = 0;
  for (int q = 0; q < P; q++) {
    V += v[q];
    if (q / t.gpn == n) Vn += v[q];
  }
  fused_from(&vol, V, Vn, v[r], compute_us, tiles, op);
}

void sim_fused_from_traffic(sim_topo_t t, const sim_traffic_t* s, const double* u,
                            const double* v, int r, double compute_us, double tiles,
                            sim_fused_op_t* op) {
  sim_vol_t vol;
  sim_direct_volume_at(t, s, u, v, r, &vol);
  fused_from(&vol, s->V, s->Vn[r / t.gpn], v[r], compute_us, tiles, op);
}

void sim_fused_kernel(const sim_params_t* p, int kind, sim_fused_op_t* op) {
  op->sig_every = kind == SIM_FUSED_EMBEDDING ? p->ea_sig_every : 1;
  op->land_overlap = kind == SIM_FUSED_EMBEDDING && p->ea_land_overlap != 0;
  op->switch_drain = kind == SIM_FUSED_EMBEDDING && p->ea_drain != 0;
}

static int dest_link(int dest) {
  return dest == SIM_DEST_NODE ? SIM_LINK_NVL : dest == SIM_DEST_REMOTE ? SIM_LINK_NET : -1;
}

double sim_fused_time(const sim_params_t* p, const sim_fused_op_t* op, sim_fused_detail_t* detail) {
  double waves = sim_waves(p, op->tiles);
  int n = waves > SIM_MAX_CHUNKS ? SIM_MAX_CHUNKS : (int)waves;
  sim_chunk_t* ch = calloc((size_t)n, sizeof *ch);
  if (!ch) return INFINITY;
  double C = op->compute_us * (1.0 + p->fused_penalty);
  sim_links_t links;
  for (int l = 0; l < SIM_NUM_LINKS; l++) {
    links.gbs[l] = sim_link_gbs(p, l);
    links.lat_us[l] = sim_link_lat_us(p, l);
  }
  if (op->net_x > 1) links.gbs[SIM_LINK_NET] *= op->net_x;
  const double interf[SIM_NUM_LINKS] = {p->fused_interf, p->fused_interf_net};
  static const int kRemoteFirst[SIM_NUM_DEST] = {SIM_DEST_REMOTE, SIM_DEST_NODE, SIM_DEST_SELF};
  static const int kLocalFirst[SIM_NUM_DEST] = {SIM_DEST_SELF, SIM_DEST_NODE, SIM_DEST_REMOTE};
  const int* order = p->remote_first ? kRemoteFirst : kLocalFirst;
  double fsum = op->frac[0] + op->frac[1] + op->frac[2];
  int peers = op->peers[SIM_DEST_NODE] + op->peers[SIM_DEST_REMOTE];
  double interf_us = 0, sig_us = 0;
  for (int k = 0; k < n; k++) {
    ch[k].compute_us = C / n;
    if (p->comm_off) continue;
    double sig_share = 0; /* share of this chunk's tiles that signal a peer */
    if (op->broadcast) {
      for (int d = SIM_DEST_NODE; d < SIM_NUM_DEST; d++)
        ch[k].bytes[dest_link(d)] += op->bytes[d] / n;
      ch[k].bytes[SIM_LINK_NVL] += op->relay_frac * op->bytes[SIM_DEST_REMOTE] / n;
      sig_share = peers > 0 ? 1 : 0;
    } else {
      double lo = (double)k / n, hi = (double)(k + 1) / n, a = 0;
      for (int i = 0; i < SIM_NUM_DEST; i++) {
        int d = order[i];
        double f = fsum > 0 ? op->frac[d] / fsum : 0;
        double ov = fmin(hi, a + f) - fmax(lo, a);
        if (f > 0 && ov > 0 && dest_link(d) >= 0) {
          ch[k].bytes[dest_link(d)] += op->bytes[d] * ov / f;
          if (d == SIM_DEST_REMOTE)
            ch[k].bytes[SIM_LINK_NVL] += op->relay_frac * op->bytes[d] * ov / f;
          sig_share += ov * n;
        }
        a += f;
      }
    }
    /* the chunk's SMs stall on their own puts and on their signals (n chunks = waves/n waves;
     * one stall per sig_every signalling tiles; a rank without tiles signals nothing) */
    double per = op->sig_every > 1 ? op->sig_every : 1;
    double stall = op->tiles > 0 ? sig_share * p->fco_sig_us * waves / n / per : 0;
    sig_us += stall;
    for (int l = 0; l < SIM_NUM_LINKS; l++) {
      double x = interf[l] * sim_xfer_us(ch[k].bytes[l], links.gbs[l]);
      stall += x;
      interf_us += x;
    }
    ch[k].compute_us += stall;
  }
  /* the self tiles start once the tiles before them (remote-first: all the others) have
   * been computed: chunk compute summed up to position (1 - self share) x n; with
   * switch_drain the blocks first wait for the NVLink puts of their last signal batch */
  double self_start = -1, drain = 0;
  if (p->remote_first && !op->broadcast) {
    double fself = fsum > 0 ? op->frac[SIM_DEST_SELF] / fsum : 1.0;
    double x = (1.0 - fself) * n, acc = 0;
    int kb = (int)floor(x);
    for (int k = 0; k < n && x > 0; k++) {
      double part = x >= 1 ? 1 : x;
      acc += part * ch[k].compute_us;
      x -= part;
    }
    self_start = acc;
    double nvl_tiles = fsum > 0 ? op->tiles * op->frac[SIM_DEST_NODE] / fsum : 0;
    if (op->switch_drain && !p->comm_off && fself > 0 && nvl_tiles > 0 &&
        op->bytes[SIM_DEST_NODE] > 0) {
      double per = op->sig_every > 1 ? op->sig_every : 1;
      double pending = p->sms * p->ea_blocks_per_sm * (per + 1) / 2;
      drain = sim_xfer_us(op->bytes[SIM_DEST_NODE] * fmin(1.0, pending / nvl_tiles),
                          links.gbs[SIM_LINK_NVL]);
      ch[kb < n ? kb : n - 1].compute_us += drain;
      self_start += drain;
    }
  }
  sim_pipe_t pipe = sim_pipeline(ch, n, &links);
  if (self_start < 0) self_start = pipe.compute_end_us;
  free(ch);
  double land = p->comm_off || !p->fco_land ? 0 : 2 * sim_xfer_us(op->land_bytes, p->hbm_gbs);
  /* landing alongside the self tiles: only what outlasts the pipeline shows */
  if (op->land_overlap && p->remote_first && land > 0)
    land = fmax(0, self_start + land - pipe.end_us);
  double fixed = p->fco_launch_us + (p->comm_off ? 0 : peers * p->fco_peer_us);
  if (detail) {
    detail->pipe = pipe;
    detail->interf_us = interf_us;
    detail->sig_us = sig_us;
    detail->land_us = land;
    detail->drain_us = drain;
    detail->fixed_us = fixed;
    detail->self_start_us = self_start;
  }
  return fixed + pipe.end_us + land;
}
