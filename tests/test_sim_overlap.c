/*
 * test_sim_overlap.c — fco-sim's tile-pipeline model on hand-computed cases: compute-bound and
 * link-bound pipelines (max(C, M) + one chunk of the shorter stage), two links in parallel,
 * the effect of the tile order (remote-first hides the NIC transfer; local-first leaves it at
 * the tail, no better than unfused), broadcast ops, waves, and a fused op over all ranks.
 *   make test   or   build/tests/test_sim_overlap
 */
#include "model.h"
#include "overlap.h"
#include "test_sim_util.h"

static void pipeline(void) {
  sim_links_t l = {{100, 50}, {1, 3}};
  sim_chunk_t ch[4];
  t_context("pipeline");
  /* compute-bound: 4 chunks of 10 us computing, 5 us sending (5e5 B at 100 GB/s):
   * 40 + 5 (the last chunk's send) + 1 (latency) */
  for (int i = 0; i < 4; i++) ch[i] = (sim_chunk_t){10, {5e5, 0}};
  sim_pipe_t r = sim_pipeline(ch, 4, &l);
  ASSERT_NEAR(r.end_us, 46, 1e-9);
  ASSERT_NEAR(r.compute_end_us, 40, 1e-9);
  ASSERT_NEAR(r.link_end_us[SIM_LINK_NET], 0, 0); /* unused */
  /* link-bound: 5 us compute, 10 us send: 5 (first chunk) + 40 + 1 */
  for (int i = 0; i < 4; i++) ch[i] = (sim_chunk_t){5, {1e6, 0}};
  ASSERT_NEAR(sim_pipeline(ch, 4, &l).end_us, 46, 1e-9);
  /* the same work unfused would be 20 + 40 + 1: the pipeline saves all but one chunk */
  /* both links at once: NVLink 4 x 10 us, NIC 4 x 20 us (1e6 B at 50 GB/s): NIC bound:
   * 5 + 80 + 3 */
  for (int i = 0; i < 4; i++) ch[i] = (sim_chunk_t){5, {1e6, 1e6}};
  r = sim_pipeline(ch, 4, &l);
  ASSERT_NEAR(r.link_end_us[SIM_LINK_NVL], 5 + 40 + 1, 1e-9);
  ASSERT_NEAR(r.end_us, 88, 1e-9);
  /* a gap: chunk 2 computes long, the link idles, then resumes */
  sim_chunk_t g[3] = {{10, {1e5, 0}}, {100, {1e5, 0}}, {10, {1e5, 0}}};
  ASSERT_NEAR(sim_pipeline(g, 3, &l).end_us, 120 + 1 + 1, 1e-9);
}

static void tile_order(void) {
  sim_params_t p;
  sim_test_params(&p);
  t_context("tile order");
  /* 100 us of compute in 2 waves; half the tiles stay local, half go to another node:
   * 5e6 B over the NIC at 50 GB/s = 100 us. Unfused: 100 + 100 = 200. */
  sim_fused_op_t op;
  memset(&op, 0, sizeof op);
  op.compute_us = 100;
  op.tiles = 2 * p.sms;
  op.frac[SIM_DEST_SELF] = 0.5;
  op.frac[SIM_DEST_REMOTE] = 0.5;
  op.bytes[SIM_DEST_REMOTE] = 5e6;
  op.peers[SIM_DEST_REMOTE] = 8;
  /* remote-first: wave 1 (0-50) holds every remote tile; the NIC sends 50-150, + 3 us */
  p.remote_first = 1;
  ASSERT_NEAR(sim_fused_time(&p, &op, NULL), 153, 1e-9);
  /* local-first: the remote tiles finish at 100 and their transfer is exposed: 200 + 3 */
  p.remote_first = 0;
  ASSERT_NEAR(sim_fused_time(&p, &op, NULL), 203, 1e-9);
  /* fixed costs: launch, per-destination signal, compute penalty (100 x 1.1 = 2 x 55) */
  p.remote_first = 1, p.fco_launch_us = 4, p.fco_peer_us = 0.5, p.fused_penalty = 0.1;
  ASSERT_NEAR(sim_fused_time(&p, &op, NULL), 4 + 8 * 0.5 + 55 + 100 + 3, 1e-9);
  /* many waves: the pipeline approaches max(C, M) + one wave (C = 100, M = 100 over 100
   * waves, remote-first over a 1/2 remote share: remote tiles in waves 1-50) */
  p.fco_launch_us = 0, p.fco_peer_us = 0, p.fused_penalty = 0;
  op.tiles = 100 * p.sms;
  ASSERT_NEAR(sim_fused_time(&p, &op, NULL), 1 + 100 + 3, 1e-9);
  ASSERT_NEAR(sim_waves(&p, 100 * p.sms), 100, 0);
  ASSERT_NEAR(sim_waves(&p, 1), 1, 0);
  ASSERT_NEAR(sim_waves(&p, p.sms + 1), 2, 0);
}

static void broadcast_and_all(void) {
  sim_params_t p;
  sim_test_params(&p);
  t_context("broadcast op, fused op over all ranks");
  /* broadcast (one-shot allreduce): every tile to every peer, order moot: 1 wave of 10 us,
   * 3 NVLink peers x 1e5 B = 3e5 B = 3 us: 10 + 3 + 1 */
  sim_fused_op_t op;
  memset(&op, 0, sizeof op);
  op.compute_us = 10;
  op.tiles = 1;
  op.broadcast = 1;
  op.bytes[SIM_DEST_NODE] = 3e5;
  ASSERT_NEAR(sim_fused_time(&p, &op, NULL), 14, 1e-9);
  /* four ranks on one node, even traffic (4e6 B each, 1e6 per destination, 3e6 leave):
   * each rank's tiles: 1/4 self, 3/4 NVLink; compute 40 us in one wave -> 40 + 30 + 1.
   * A rank that starts 5 us late finishes 5 us late: everyone waits for it. */
  sim_topo_t t = {1, 4};
  double u[4] = {4e6, 4e6, 4e6, 4e6}, v[4] = {.25, .25, .25, .25};
  double start[4] = {0, 0, 5, 0}, comp[4] = {40, 40, 40, 40}, tiles[4] = {1, 1, 1, 1}, kend[4];
  double longest;
  double arrive = sim_fused_all(&p, t, u, v, start, comp, tiles, kend, &longest);
  ASSERT_NEAR(arrive, 76, 1e-9);
  ASSERT_NEAR(kend[0], 71, 1e-9);
  ASSERT_NEAR(kend[2], 76, 1e-9);
  ASSERT_NEAR(longest, 71, 1e-9);
  /* receiver-bound: nobody computes; ranks 1-3 each send 4e7 B to rank 0 (400 us + 1 each),
   * but rank 0 takes in 1.2e8 B through its one NVLink port: 1200 us + 1 */
  double u3[4] = {0, 4e7, 4e7, 4e7}, v3[4] = {1, 0, 0, 0}, z[4] = {0, 0, 0, 0};
  arrive = sim_fused_all(&p, t, u3, v3, z, z, tiles, NULL, NULL);
  ASSERT_NEAR(arrive, 1201, 1e-6);
}

int main(void) {
  pipeline();
  tile_order();
  broadcast_and_all();
  printf("test_sim_overlap: ok\n");
  return 0;
}
