/*
 * test_sim_net.c — fco-sim's network model on hand-computed cases: NCCL ring and tree
 * allreduce, flat and hierarchical all-to-all (phase bytes of rank-1 traffic), direct volumes of
 * fused kernels, fco's one-shot allreduce; exact times with round parameters
 * (tests/test_sim_util.h: NVLink 100 GB/s 1 us, NIC 50 GB/s 3 us, NCCL Simple base 10, hop x5).
 *   make test   or   build/tests/test_sim_net
 */
#include "net.h"
#include "test_sim_util.h"

#define SIMPLE SIM_PROTO_SIMPLE

static void allreduce_ring_tree(void) {
  sim_params_t p;
  sim_test_params(&p);
  t_context("allreduce");
  /* P=2 one node: 10 + 5 * (2 hops x 1 us) + (2*1/2 * 1e6 B) / 100 GB/s = 10 + 10 + 10 */
  sim_coll_t c = sim_nccl_allreduce(&p, (sim_topo_t){1, 2}, 1e6);
  ASSERT_NEAR(c.us, 30, 1e-9);
  ASSERT_EQ(c.algo, SIM_ALGO_RING);
  ASSERT_EQ(c.proto, SIM_PROTO_SIMPLE);
  /* P=8 one node: 10 + 5 * 14 + 2*7/8 * 8e6 / 1e5 = 10 + 70 + 140 */
  ASSERT_NEAR(sim_nccl_allreduce(&p, (sim_topo_t){1, 8}, 8e6).us, 220, 1e-9);
  /* 2 nodes x 4: edge = min(NVLink 100, 4 x NIC 50) = 100 GB/s.
   * ring: 10 + 5 * (2(8-2) x 1 + 2(2-1) x 3) + 140 = 10 + 90 + 140 = 240
   * tree: 10 + 5 * 2 * ((4-1) x 1 + log2(2) x 3) + 2 * 8e6 / 1e5 = 10 + 60 + 160 = 230 */
  sim_topo_t t = {2, 4};
  ASSERT_NEAR(sim_nccl_allreduce_with(&p, t, 8e6, SIM_ALGO_RING, SIM_PROTO_SIMPLE).us, 240, 1e-9);
  ASSERT_NEAR(sim_nccl_allreduce_with(&p, t, 8e6, SIM_ALGO_TREE, SIM_PROTO_SIMPLE).us, 230, 1e-9);
  c = sim_nccl_allreduce(&p, t, 8e6);
  ASSERT_NEAR(c.us, 230, 1e-9);
  ASSERT_EQ(c.algo, SIM_ALGO_TREE); /* the tuner takes the faster */
  /* a single node has no tree */
  ASSERT_TRUE(isinf(sim_nccl_allreduce_with(&p, (sim_topo_t){1, 8}, 8e6, SIM_ALGO_TREE,
                                            SIM_PROTO_SIMPLE).us));
  /* NIC-bound: 2 nodes x 1 GPU: edge = NIC 50 GB/s; ring 10 + 5 * 2 * 3 + 1e6 / 5e4 = 60 */
  ASSERT_NEAR(sim_nccl_allreduce_with(&p, (sim_topo_t){2, 1}, 1e6, SIM_ALGO_RING, SIM_PROTO_SIMPLE).us,
              60, 1e-9);
  /* tree across 3 nodes x 4: ceil(log2 3) = 2 network hops each way, and tree_eff scales
   * its bandwidth: 10 + 5 x 2 x (3 x 1 + 2 x 3) + 2 x 8e6 / (1e5 x 0.5) = 10 + 90 + 320 */
  p.tree_eff = 0.5;
  ASSERT_NEAR(sim_nccl_allreduce_with(&p, (sim_topo_t){3, 4}, 8e6, SIM_ALGO_TREE, SIMPLE).us, 420,
              1e-9);
  p.tree_eff = 1;
  /* one GPU a node has no NVLink edge, even where the NIC is faster: edge = NIC 1000 GB/s;
   * ring 10 + 5 x 2 x 3 + 1e6 / 1e6 = 41 */
  p.nic_gbps = 8000;
  ASSERT_NEAR(sim_nccl_allreduce_with(&p, (sim_topo_t){2, 1}, 1e6, SIM_ALGO_RING, SIMPLE).us, 41,
              1e-9);
  p.nic_gbps = 400;
  /* the protocol with the lower line wins: LL at base 1, eff 0.1 beats Simple for small sizes */
  p.nccl_ll_us = 1, p.nvl_ll_eff = 0.1;
  c = sim_nccl_allreduce(&p, (sim_topo_t){1, 2}, 1000); /* LL: 1 + 2 + 1000/1e4 = 3.1 */
  ASSERT_NEAR(c.us, 3.1, 1e-9);
  ASSERT_EQ(c.proto, SIM_PROTO_LL);
  /* nothing to do */
  ASSERT_NEAR(sim_nccl_allreduce(&p, (sim_topo_t){1, 1}, 1e6).us, 0, 0);
  p.comm_off = 1;
  ASSERT_NEAR(sim_nccl_allreduce(&p, (sim_topo_t){4, 8}, 1e6).us, 0, 0);
}

static void alltoall(void) {
  sim_params_t p;
  sim_test_params(&p);
  t_context("all-to-all");
  /* one node, 4 GPUs, each sends 4e6 B spread evenly (1e6 to each rank, self included):
   * 3e6 leave and 3e6 arrive per GPU: 10 + 5 x 1 + 3e6 / 1e5 = 45; + 3 peers x 0.5 us */
  double u[4] = {4e6, 4e6, 4e6, 4e6}, v[4] = {0.25, 0.25, 0.25, 0.25};
  p.nccl_peer_us = 0.5;
  sim_coll_t c = sim_nccl_alltoall(&p, (sim_topo_t){1, 4}, u, v);
  ASSERT_NEAR(c.us, 46.5, 1e-9);
  ASSERT_EQ(c.algo, SIM_ALGO_A2A_FLAT);
  /* 2 nodes x 2 GPUs, same traffic. Phase 1 (NVLink): GPU (n,j) sends u (1 - V_rail j) =
   * 4e6 x 1/2 = 2e6 and gathers V_rail j (U_n - u) = 1/2 x 4e6 = 2e6. Phase 2 (rail): sends
   * U_n (V_rail j - v) = 8e6 x 1/4 = 2e6, receives v (U - U_m) = 1/4 x 8e6 = 2e6. */
  double nvl, net;
  sim_topo_t t = {2, 2};
  sim_a2a_phase_bytes(t, u, v, &nvl, &net);
  ASSERT_NEAR(nvl, 2e6, 1e-3);
  ASSERT_NEAR(net, 2e6, 1e-3);
  /* 10 + 3 peers x 0.5 + (5 x 1 + 2e6 / 1e5) + (5 x 3 + 2e6 / 5e4) = 11.5 + 25 + 55 */
  c = sim_nccl_alltoall(&p, t, u, v);
  ASSERT_NEAR(c.us, 91.5, 1e-9);
  ASSERT_EQ(c.algo, SIM_ALGO_A2A_HIER);
  /* a lone sender (GPU 0 of node 0): the rail hop spreads its 4e6 remote bytes over the
   * node's two NICs (2e6 each); sending directly, its own NIC carries all 4e6 */
  double u1[4] = {8e6, 0, 0, 0};
  sim_a2a_phase_bytes(t, u1, v, &nvl, &net);
  ASSERT_NEAR(nvl, 4e6, 1e-3); /* GPU 0 hands rail 1's half (ranks 1 and 3) to GPU 1 */
  ASSERT_NEAR(net, 2e6, 1e-3);
  sim_vol_t vol;
  sim_direct_volume(t, u1, v, 0, &vol);
  ASSERT_NEAR(vol.send[SIM_LINK_NVL], 2e6, 1e-3);
  ASSERT_NEAR(vol.send[SIM_LINK_NET], 4e6, 1e-3);
  ASSERT_NEAR(vol.recv[SIM_LINK_NVL], 0, 0);
  ASSERT_EQ(vol.peers[SIM_LINK_NVL], 1);
  ASSERT_EQ(vol.peers[SIM_LINK_NET], 2);
  sim_direct_volume(t, u1, v, 3, &vol); /* rank 3 (node 1) gets 2e6 over its NIC */
  ASSERT_NEAR(vol.recv[SIM_LINK_NET], 2e6, 1e-3);
  ASSERT_NEAR(vol.send[SIM_LINK_NET], 0, 0);
  /* skewed destinations: the receiver of everything is the bottleneck, hierarchy or not */
  double u2[4] = {1, 1, 1, 1}, v2[4] = {0, 0, 0, 1e6};
  sim_a2a_phase_bytes(t, u2, v2, &nvl, &net);
  ASSERT_NEAR(net, 2e6, 1e-3); /* node 0's 2 x 1e6 enter GPU 3 through its own NIC */
  /* one GPU a node (4 nodes): no NVLink phase; each rank's NIC sends u (V - v) and receives
   * v (U - u) — rank 1 sends 3 x (10 - 2) = 24, rank 3 receives 4 x (7 - 1) = 24, rank 2 sends
   * 2 x (10 - 3) = 14 and receives 3 x (7 - 2) = 15: the largest is 24 */
  double u3[4] = {1, 3, 2, 1}, v3[4] = {1, 2, 3, 4};
  sim_topo_t t1 = {4, 1};
  sim_a2a_phase_bytes(t1, u3, v3, &nvl, &net);
  ASSERT_NEAR(nvl, 0, 0);
  ASSERT_NEAR(net, 24, 1e-12);
  /* nothing to send: no collective, not even its base latency */
  double u0[4] = {0, 0, 0, 0};
  c = sim_nccl_alltoall(&p, t, u0, v);
  ASSERT_NEAR(c.us, 0, 0);
  ASSERT_EQ(c.algo, SIM_ALGO_NONE);
  p.comm_off = 1;
  ASSERT_NEAR(sim_nccl_alltoall(&p, t, u, v).us, 0, 0);
}

static void oneshot(void) {
  sim_params_t p;
  sim_test_params(&p);
  t_context("fco one-shot allreduce");
  /* 4 + 1 (NVLink hop) + (P-1) 1e6 / 1e5 + (P+1) 1e6 / 1e6 (HBM) = 4 + 1 + 10 + 3 */
  p.fco_launch_us = 4;
  ASSERT_NEAR(sim_fco_oneshot_allreduce(&p, (sim_topo_t){1, 2}, 1e6), 18, 1e-9);
  /* 2 nodes x 2: NVLink 1e6 / 1e5 = 10, NIC 2e6 / 5e4 = 40 (the larger), hop 3, HBM 5 */
  ASSERT_NEAR(sim_fco_oneshot_allreduce(&p, (sim_topo_t){2, 2}, 1e6), 4 + 3 + 40 + 5, 1e-9);
  /* + fco_peer_us per destination: 4 GPUs, 3 peers x 0.5 (NVLink 3e6 / 1e5, HBM 5e6 / 1e6) */
  p.fco_peer_us = 0.5;
  ASSERT_NEAR(sim_fco_oneshot_allreduce(&p, (sim_topo_t){1, 4}, 1e6), 4 + 1.5 + 1 + 30 + 5, 1e-9);
  p.fco_peer_us = 0;
  /* link classes */
  ASSERT_NEAR(sim_link_gbs(&p, SIM_LINK_NET), 50, 1e-12);
  ASSERT_NEAR(sim_xfer_us(1e6, 100), 10, 1e-12);
}

int main(void) {
  allreduce_ring_tree();
  alltoall();
  oneshot();
  printf("test_sim_net: ok\n");
  return 0;
}
