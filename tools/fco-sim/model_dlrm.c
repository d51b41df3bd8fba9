/*
 * model_dlrm.c — one training iteration of a DLRM on N nodes x G GPUs.
 *
 * Parallelism (TorchRec style): embedding tables model-parallel: table-wise; with
 * sharding = column the costliest shards are halved column-wise until there are as many shards
 * as GPUs (or min_shard_dim stops it); grid then also halves them row-wise while their lookups
 * outweigh their traffic. Shards are placed longest-first on the least-loaded GPU (cost: HBM
 * time + link time per sample; ties spread over nodes). Bottom MLP, interaction (dot or DCN v2)
 * and top MLP are data-parallel on `B` samples per GPU.
 *
 * Iteration, per rank clock (model.h):
 *   forward  embedding lookup of all B*P samples of the rank's shards -> All-to-All of pooled
 *            embeddings (rank r sends B x its shard dims to every rank) | bottom MLP (the
 *            baseline runs it on the compute stream while NCCL moves data) -> interaction ->
 *            top MLP
 *   backward top MLP, interaction -> All-to-All of the embedding gradients back to the shard
 *            owners | bottom MLP backward -> embedding backward + row-wise optimizer;
 *            dense gradient AllReduce (DDP: overlapping the rest of the backward pass, after
 *            the All-to-All has freed the network) -> dense optimizer.
 * Fused schedule: embedding lookup + All-to-All is one fco kernel (tile = the bags of up to
 * 32/G of the rank's shards of one width x C/nt samples, sim_ea_tile; put to the samples' owner
 * as soon as it is pooled, signalled in batches, landed by the owner from its workspace into
 * its output alongside its own tiles: SIM_FUSED_EMBEDDING); with fuse_bwd also the
 * interaction's last backward GEMM + the gradient All-to-All (fco's GEMM + All-to-All).
 * Not modelled: the index All-to-All (TorchRec pipelines it with the previous iteration),
 * data loading, the loss, and HBM capacity (reported, not enforced).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct {
  int table;
  double dim, pooling, rows; /* a column shard has fewer dims, a row shard fewer rows and */
  double cost;               /* (uniformly hashed) lookups                                */
} shard_t;

typedef struct {
  int P, num_shards, used_gpus;
  double *dims, *lookups, *gather, *shards, *mem; /* per rank; per sample except mem */
  double* tiles; /* per rank: fused-kernel tiles per destination (B samples), all shards */
  double* width; /* per rank x SIM_DLRM_WIDTHS: shards of width emb_dim / 2^k             */
  double max_mem_gb;
  shard_t* shard; /* [num_shards], each on GPU owner[i]: priced one by one (their shapes) */
  int* owner;
} plan_t;

static void plan_free(plan_t* pl) {
  free(pl->shard);
  free(pl->owner);
  free(pl->dims);
  free(pl->lookups);
  free(pl->gather);
  free(pl->shards);
  free(pl->mem);
  free(pl->tiles);
  free(pl->width);
}

static double row_bytes(const sim_params_t* p, double dim, double eb) {
  double b = dim * eb;
  return b < p->access_bytes ? p->access_bytes : b;
}

/* Planner cost of a shard per sample (ns): its HBM time (lookup forward + backward) plus the
 * time its pooled output and gradient take on the GPU's link (NIC once there are nodes), the
 * two things a TorchRec-style planner balances. */
static double shard_hbm(const sim_params_t* p, const shard_t* s, double eb) {
  return s->pooling * row_bytes(p, s->dim, eb) * (1 + p->emb_bwd_x) / (p->gather_eff * p->hbm_gbs);
}
static double shard_comm(const sim_params_t* p, sim_topo_t t, const shard_t* s, double eb) {
  return 2 * s->dim * eb / sim_link_gbs(p, t.nodes > 1 ? SIM_LINK_NET : SIM_LINK_NVL);
}

/* Shards are emb_dim / 2^k wide (column halving); k, capped at SIM_DLRM_WIDTHS - 1. */
#define SIM_DLRM_WIDTHS 16
static int width_class(const sim_config_t* c, double dim) {
  int k = (int)lround(log2(c->emb_dim / dim));
  return k < 0 ? 0 : k >= SIM_DLRM_WIDTHS ? SIM_DLRM_WIDTHS - 1 : k;
}

static int cmp_cost(const void* a, const void* b) {
  const shard_t *x = a, *y = b;
  if (x->cost != y->cost) return x->cost < y->cost ? 1 : -1;
  return x->table - y->table;
}

/* A binary heap of indices, `before(a, b)` the order (a pops first), for the planner: the
 * costliest splittable shard and the least-loaded GPU in O(log) rather than by a scan over all
 * shards or GPUs (quadratic in GPUs: 1024 tables cut into 131072 column shards took a minute
 * to place on 131072 GPUs). The orders are total (ties by index or position), so the heaps
 * pick exactly what the scans picked. */
typedef struct {
  int *h, n;
  int (*before)(const void* ctx, int a, int b);
  const void* ctx;
} heap_t;

static void heap_push(heap_t* q, int x) {
  int i = q->n++;
  while (i > 0 && q->before(q->ctx, x, q->h[(i - 1) / 2])) {
    q->h[i] = q->h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  q->h[i] = x;
}

static int heap_pop(heap_t* q) {
  int top = q->h[0], x = q->h[--q->n], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= q->n) break;
    if (c + 1 < q->n && q->before(q->ctx, q->h[c + 1], q->h[c])) c++;
    if (!q->before(q->ctx, q->h[c], x)) break;
    q->h[i] = q->h[c];
    i = c;
  }
  if (q->n) q->h[i] = x;
  return top;
}

/* split order: costliest first, then the lower index */
static int split_before(const void* ctx, int a, int b) {
  const shard_t* s = ctx;
  return s[a].cost != s[b].cost ? s[a].cost > s[b].cost : a < b;
}

/* placement order over positions k of the GPU order: least loaded first, then the lower k */
typedef struct {
  const double* load;
  const int* order;
} place_t;
static int place_before(const void* ctx, int a, int b) {
  const place_t* pc = ctx;
  double la = pc->load[pc->order[a]], lb = pc->load[pc->order[b]];
  return la != lb ? la < lb : a < b;
}

static int plan_shards(const sim_config_t* c, const sim_params_t* run_p, sim_topo_t t, double B,
                       plan_t* pl, char* err, size_t len) {
  /* The plan is costed with the default machine, so a sweep over one parameter (a faster
   * NIC, ...) compares the same placement; the gathers themselves use the run's parameters. */
  sim_params_t ref;
  sim_params_default(&ref);
  const sim_params_t* p = &ref;
  int P = sim_topo_ranks(t), T = c->num_tables;
  double eb = c->dtype_bytes;
  memset(pl, 0, sizeof *pl);
  pl->P = P;
  /* splitting stops at P shards (or at max_shards), so at most max(T, P) are ever held */
  double max_shards = T * floor(c->emb_dim / c->min_shard_dim + 1) + P;
  int cap = T > P ? T : P;
  shard_t* s = calloc((size_t)cap, sizeof *s);
  int* hp = calloc((size_t)cap, sizeof(int));
  pl->dims = calloc((size_t)P, sizeof(double));
  pl->lookups = calloc((size_t)P, sizeof(double));
  pl->gather = calloc((size_t)P, sizeof(double));
  pl->shards = calloc((size_t)P, sizeof(double));
  pl->mem = calloc((size_t)P, sizeof(double));
  pl->tiles = calloc((size_t)P, sizeof(double));
  pl->width = calloc((size_t)P * SIM_DLRM_WIDTHS, sizeof(double));
  pl->owner = calloc((size_t)cap, sizeof(int));
  double* load = calloc((size_t)P, sizeof(double));
  int* order = calloc((size_t)P, sizeof(int));
  if (!s || !hp || !pl->dims || !pl->lookups || !pl->gather || !pl->shards || !pl->mem ||
      !pl->tiles || !pl->width || !pl->owner || !load || !order) {
    free(s);
    free(hp);
    free(load);
    free(order);
    plan_free(pl);
    snprintf(err, len, "out of memory planning %d shards over %d GPUs", cap, P);
    return -1;
  }
  int n = 0;
  for (int i = 0; i < T; i++) {
    s[n] = (shard_t){i, c->emb_dim, c->pooling[i], c->rows[i], 0};
    s[n].cost = shard_hbm(p, &s[n], eb) + shard_comm(p, t, &s[n], eb);
    n++;
  }
  /* Split the costliest splittable shard until every GPU has one: column-wise (halves its
   * lookup bytes and its traffic) down to min_shard_dim; then, with grid, row-wise (halves its
   * lookups only, its traffic stays) while its lookups outweigh its traffic. */
  heap_t q = {hp, 0, split_before, s};
#define SPLIT_COL(x) ((x)->dim >= 2 * c->min_shard_dim && fmod((x)->dim, 2) == 0)
#define SPLIT_ROW(x) \
  (c->sharding == SIM_SHARD_GRID && shard_hbm(p, (x), eb) > shard_comm(p, t, (x), eb))
  if (c->sharding != SIM_SHARD_TABLE)
    for (int i = 0; i < n; i++)
      if (SPLIT_COL(&s[i]) || SPLIT_ROW(&s[i])) heap_push(&q, i);
  while (c->sharding != SIM_SHARD_TABLE && n < P && n < max_shards && q.n) {
    int best = heap_pop(&q);
    if (SPLIT_COL(&s[best])) s[best].dim /= 2;
    else s[best].pooling /= 2, s[best].rows /= 2;
    s[best].cost = shard_hbm(p, &s[best], eb) + shard_comm(p, t, &s[best], eb);
    s[n] = s[best];
    if (SPLIT_COL(&s[best]) || SPLIT_ROW(&s[best])) {
      heap_push(&q, best);
      heap_push(&q, n);
    }
    n++;
  }
#undef SPLIT_COL
#undef SPLIT_ROW
  qsort(s, (size_t)n, sizeof *s, cmp_cost);
  /* ties go to GPUs interleaved over nodes: node 0 GPU 0, node 1 GPU 0, ..., so a few
   * shards spread over nodes rather than filling node 0 first */
  for (int i = 0; i < P; i++) order[i] = (i % t.nodes) * t.gpn + i / t.nodes;
  /* the least-loaded GPU, ties to the first in that order: a heap of order positions (all
   * loads 0 at first: already a heap in position order) */
  place_t pc = {load, order};
  int* pos = NULL;
  heap_t g = {NULL, 0, place_before, &pc};
  if (n > 0) {
    pos = calloc((size_t)P, sizeof(int));
    if (!pos) {
      free(s);
      free(hp);
      free(load);
      free(order);
      plan_free(pl);
      snprintf(err, len, "out of memory placing %d shards over %d GPUs", n, P);
      return -1;
    }
    for (int k = 0; k < P; k++) pos[k] = k;
    g.h = pos, g.n = P;
  }
  for (int i = 0; i < n; i++) {
    int k = heap_pop(&g), r = order[k];
    load[r] += s[i].cost;
    heap_push(&g, k);
    pl->owner[i] = r;
    pl->dims[r] += s[i].dim;
    pl->lookups[r] += s[i].pooling;
    pl->gather[r] += s[i].pooling * row_bytes(run_p, s[i].dim, eb);
    pl->shards[r] += 1;
    pl->width[(size_t)r * SIM_DLRM_WIDTHS + width_class(c, s[i].dim)] += 1;
    pl->mem[r] += s[i].rows * (s[i].dim * eb + 4.0); /* + row-wise Adagrad state */
  }
  free(pos);
  pl->num_shards = n;
  /* the kernel tiles a rank's shards of one width together (up to 32/G of them a tile) */
  for (int r = 0; r < P; r++)
    for (int k = 0; k < SIM_DLRM_WIDTHS; k++)
      pl->tiles[r] += sim_ea_tiles(run_p, c->emb_dim / ldexp(1, k), eb,
                                   pl->width[(size_t)r * SIM_DLRM_WIDTHS + k], B);
  for (int r = 0; r < P; r++) {
    if (pl->shards[r] > 0) pl->used_gpus++;
    if (pl->mem[r] / 1e9 > pl->max_mem_gb) pl->max_mem_gb = pl->mem[r] / 1e9;
  }
  pl->shard = s;
  free(hp);
  free(load);
  free(order);
  return 0;
}

/* Everything of one (config, world, batch) that does not depend on the schedule. */
typedef struct {
  sim_topo_t t;
  int P;
  double B, eb;
  plan_t plan;
  double *emb_fwd, *emb_bwd;     /* per rank, us without kernel_us (0: no shards)  */
  double *u_f, *v_f, *u_b, *v_b; /* rank-1 traffic, forward and backward           */
  double *tiles_f, *tiles_b;
  double bot_fwd, bot_bwd;       /* bottom MLP                                      */
  double dense_rest;             /* interaction + top MLP fwd, top + interaction bwd */
                                 /* except the last interaction backward GEMM       */
  double inter_last;             /* that GEMM, without kernel_us                    */
  double opt, ar_bytes, params, grad_bytes;
} dlrm_t;

static void dlrm_free(dlrm_t* d) {
  plan_free(&d->plan);
  free(d->emb_fwd);
  free(d->emb_bwd);
  free(d->u_f);
  free(d->v_f);
  free(d->u_b);
  free(d->v_b);
  free(d->tiles_f);
  free(d->tiles_b);
}

/* Forward GEMM of a linear layer and its two backward GEMMs (dgrad unless first). */
static void linear(const sim_env_t* env, double B, double in, double out, double eb, int need_dgrad,
                   double* fwd, double* bwd, double* params) {
  *fwd += sim_gemm_us(env, B, out, in, eb);
  *bwd += sim_gemm_us(env, in, out, B, eb); /* wgrad */
  if (need_dgrad) *bwd += sim_gemm_us(env, B, in, out, eb);
  *params += in * out + out;
}

static int dlrm_setup(const sim_env_t* env, const sim_config_t* c, sim_topo_t t, double B,
                      dlrm_t* d, char* err, size_t len) {
  const sim_params_t* p = &env->p;
  memset(d, 0, sizeof *d);
  d->t = t;
  d->P = sim_topo_ranks(t);
  d->B = B;
  d->eb = c->dtype_bytes;
  int P = d->P;
  if (plan_shards(c, p, t, B, &d->plan, err, len)) return -1;
  double* arrs[8];
  for (int i = 0; i < 8; i++) {
    arrs[i] = calloc((size_t)P, sizeof(double));
    if (!arrs[i]) {
      for (int k = 0; k < i; k++) free(arrs[k]);
      plan_free(&d->plan);
      snprintf(err, len, "out of memory (%d GPUs)", P);
      return -1;
    }
  }
  d->emb_fwd = arrs[0], d->emb_bwd = arrs[1], d->u_f = arrs[2], d->v_f = arrs[3];
  d->u_b = arrs[4], d->v_b = arrs[5], d->tiles_f = arrs[6], d->tiles_b = arrs[7];

  double eb = d->eb, Bg = B * P, Dtot = 0;
  for (int r = 0; r < P; r++) Dtot += d->plan.dims[r];
  const plan_t* pl = &d->plan;
  char how[120];
  snprintf(how, sizeof how, "row gathers at %g of it, >= %g B a row", p->gather_eff,
           p->access_bytes);
  /* the forward lookup shard by shard: a calibration row of each one's row width and bag
   * length prices its gathers (fco-bench's bytes: rows gathered x D x esize, no rounding) */
  for (int i = 0; i < pl->num_shards; i++) {
    const shard_t* s = &pl->shard[i];
    double raw = Bg * s->pooling * s->dim * eb;
    double bytes = Bg * (s->pooling * row_bytes(p, s->dim, eb) / p->gather_eff +
                         s->pooling * p->index_bytes + s->dim * eb);
    sim_calib_shape_t want = {s->dim * eb, s->pooling};
    d->emb_fwd[pl->owner[i]] += sim_mem_kernel_us(env, "embedding fwd", "embedding_alltoall",
                                                  &want, raw, bytes, eb, how);
  }
  snprintf(how + strlen(how), sizeof how - strlen(how), "; %g x the gathers", p->emb_bwd_x);
  for (int r = 0; r < P; r++) {
    if (pl->shards[r] > 0) {
      double gather = Bg * pl->gather[r];
      double other = Bg * (pl->lookups[r] * p->index_bytes + pl->dims[r] * eb);
      d->emb_bwd[r] = sim_mem_kernel_us(env, "embedding bwd+optimizer", NULL, NULL, 0,
                                        p->emb_bwd_x * gather / p->gather_eff + other, eb, how);
    }
    d->u_f[r] = Bg * pl->dims[r] * eb;
    d->v_f[r] = 1.0 / P;
    d->u_b[r] = B * Dtot * eb;
    d->v_b[r] = Dtot > 0 ? pl->dims[r] / Dtot : 0;
    d->tiles_f[r] = P * pl->tiles[r];
  }

  /* dense part, per GPU */
  double fwd = 0, bwd = 0, params = 0, in = c->dense_features;
  for (int i = 0; i < c->num_bottom; i++) {
    linear(env, B, in, c->bottom[i], eb, i > 0, &fwd, &bwd, &params);
    in = c->bottom[i];
  }
  d->bot_fwd = fwd;
  d->bot_bwd = bwd;
  fwd = bwd = 0;
  double T = c->num_tables, D = c->emb_dim, F, last_m, last_n, last_k;
  if (c->interaction == SIM_INTER_DCN) {
    F = (T + 1) * D;
    double r = c->dcn_low_rank;
    for (int l = 0; l < (int)c->dcn_layers; l++) {
      linear(env, B, F, r, eb, 1, &fwd, &bwd, &params); /* U: F -> r (no bias counted twice) */
      linear(env, B, r, F, eb, 1, &fwd, &bwd, &params); /* V: r -> F                         */
      double ew = sim_roofline_us(p, 0, 4.0 * B * F * eb) + p->kernel_us;
      fwd += ew;
      bwd += 2 * ew;
    }
    /* the layer-0 U dgrad writes the gradient of x0, whose embedding part goes back */
    last_m = B, last_n = F, last_k = r;
    in = F;
  } else {
    double f = T + 1, flops = 2.0 * B * f * f * D, bytes = B * f * D * eb + B * f * f * eb;
    double bmm = sim_roofline_us(p, flops, bytes) + p->kernel_us;
    fwd += bmm;
    bwd += 2 * bmm;
    last_m = B * f, last_n = D, last_k = f; /* batched dgrad: B x [f x f] x [f x D] */
    in = D + T * (T + 1) / 2;
  }
  for (int i = 0; i < c->num_top; i++) {
    linear(env, B, in, c->top[i], eb, 1, &fwd, &bwd, &params);
    in = c->top[i];
  }
  double last = sim_gemm_us(env, last_m, last_n, last_k, eb) - p->kernel_us;
  d->inter_last = last;
  d->dense_rest = fwd + bwd - (last + p->kernel_us);
  d->params = params;
  d->grad_bytes = c->grad_bytes;
  d->ar_bytes = params * c->grad_bytes;
  d->opt = sim_roofline_us(p, 0, params * p->dense_opt_bytes) + p->kernel_us;
  for (int r = 0; r < P; r++)
    d->tiles_b[r] = ceil(last_m / p->gemm_tile) * ceil(last_n / p->gemm_tile);
  return 0;
}

enum { PH_EMB_FWD = 1, PH_BOT_FWD, PH_DENSE, PH_INTER_LAST, PH_BOT_BWD, PH_EMB_BWD, PH_OPT };

/* One iteration; returns its time. record: write parts and algo into row. */
static double dlrm_iterate(const sim_env_t* env, const dlrm_t* d, int fused, sim_row_t* row,
                           int record) {
  const sim_params_t* p = &env->p;
  int P = d->P;
  double *t = calloc((size_t)P, sizeof(double)), *e = calloc((size_t)P, sizeof(double));
  double *k = calloc((size_t)P, sizeof(double)), *c = calloc((size_t)P, sizeof(double));
  double *s = calloc((size_t)P, sizeof(double));
  if (!t || !e || !k || !c || !s) {
    free(t), free(e), free(k), free(c), free(s);
    return INFINITY;
  }
  /* forward: embedding lookup + All-to-All, bottom MLP */
  if (!fused) {
    for (int r = 0; r < P; r++)
      e[r] = d->emb_fwd[r] > 0 ? (d->emb_fwd[r] + p->kernel_us) * sim_jitter(p, PH_EMB_FWD, r) : 0;
    sim_coll_t a2a = sim_nccl_alltoall(p, d->t, d->u_f, d->v_f);
    double A = sim_max(e, P) + a2a.us;
    for (int r = 0; r < P; r++) {
      double b = d->bot_fwd * sim_jitter(p, PH_BOT_FWD, r);
      t[r] = p->baseline_overlap ? fmax(A, e[r] + b) : A + b;
    }
    if (record) {
      sim_row_part(row, "embedding fwd", sim_max(e, P), 0);
      sim_row_part(row, "all-to-all fwd", a2a.us, 0);
      sim_row_algo(row, "A2A", a2a);
    }
  } else {
    for (int r = 0; r < P; r++) c[r] = d->emb_fwd[r] * sim_jitter(p, PH_EMB_FWD, r);
    double longest;
    double F =
        sim_fused_all(p, SIM_FUSED_EMBEDDING, d->t, d->u_f, d->v_f, t, c, d->tiles_f, k, &longest);
    for (int r = 0; r < P; r++) t[r] = fmax(F, k[r] + d->bot_fwd * sim_jitter(p, PH_BOT_FWD, r));
    if (record) sim_row_part(row, "fused emb+a2a fwd", 0, F);
  }
  /* interaction, top MLP forward and backward (all but the last interaction GEMM) */
  double t0 = sim_max(t, P);
  for (int r = 0; r < P; r++) t[r] += d->dense_rest * sim_jitter(p, PH_DENSE, r);
  /* backward All-to-All of embedding gradients, bottom MLP backward */
  double A_end;
  if (fused && p->fuse_bwd) {
    for (int r = 0; r < P; r++) e[r] = d->inter_last * sim_jitter(p, PH_INTER_LAST, r);
    A_end = sim_fused_all(p, SIM_FUSED_GEMM_A2A, d->t, d->u_b, d->v_b, t, e, d->tiles_b, k, NULL);
    for (int r = 0; r < P; r++) c[r] = k[r] + d->bot_bwd * sim_jitter(p, PH_BOT_BWD, r);
    if (record) sim_row_part(row, "fused gemm+a2a bwd", 0, A_end - sim_max(t, P));
  } else {
    for (int r = 0; r < P; r++)
      t[r] += (d->inter_last + p->kernel_us) * sim_jitter(p, PH_INTER_LAST, r);
    sim_coll_t a2a = sim_nccl_alltoall(p, d->t, d->u_b, d->v_b);
    A_end = sim_max(t, P) + a2a.us;
    for (int r = 0; r < P; r++) {
      double b = d->bot_bwd * sim_jitter(p, PH_BOT_BWD, r);
      c[r] = p->baseline_overlap ? t[r] + b : A_end + b;
    }
    if (record) sim_row_part(row, "all-to-all bwd", fused ? 0 : a2a.us, fused ? a2a.us : 0);
  }
  if (record) sim_row_part(row, "dense fwd+bwd", fused ? 0 : sim_max(t, P) - t0,
                           fused ? sim_max(t, P) - t0 : 0);
  /* embedding backward + optimizer on the shard owners */
  double emb_bwd_max = 0;
  for (int r = 0; r < P; r++) {
    double eb = d->emb_bwd[r] > 0 ? (d->emb_bwd[r] + p->kernel_us) * sim_jitter(p, PH_EMB_BWD, r) : 0;
    if (eb > emb_bwd_max) emb_bwd_max = eb;
    s[r] = fmax(A_end, c[r]) + eb;
  }
  /* dense gradient AllReduce (DDP) and dense optimizer */
  sim_coll_t ar = sim_baseline_allreduce(env, d->t, d->ar_bytes, d->grad_bytes);
  double AR_end = p->ddp_overlap ? fmax(sim_max(c, P), A_end) + ar.us : sim_max(s, P) + ar.us;
  for (int r = 0; r < P; r++) s[r] = fmax(s[r], AR_end) + d->opt * sim_jitter(p, PH_OPT, r);
  double end = sim_max(s, P);
  if (record) {
    sim_row_part(row, "embedding bwd", fused ? 0 : emb_bwd_max, fused ? emb_bwd_max : 0);
    sim_row_part(row, "allreduce", fused ? 0 : ar.us, fused ? ar.us : 0);
    if (!fused) sim_row_algo(row, "AR", ar);
  }
  free(t), free(e), free(k), free(c), free(s);
  return end;
}

int sim_run_dlrm(const sim_env_t* env, const sim_config_t* c, sim_topo_t t, double batch,
                 sim_row_t* row, char* err, size_t err_len) {
  memset(row, 0, sizeof *row);
  int P = sim_topo_ranks(t);
  row->nodes = t.nodes;
  row->gpn = t.gpn;
  row->ranks = P;
  double B = batch > 0 ? batch : c->batch_per_gpu > 0 ? c->batch_per_gpu : c->global_batch / P;
  row->batch = B;
  if (B < 1) {
    row->skipped = 1;
    snprintf(row->note, sizeof row->note, "global batch %g < %d GPUs", c->global_batch, P);
    return 0;
  }
  dlrm_t d;
  if (dlrm_setup(env, c, t, B, &d, err, err_len)) return -1;
  row->base_us = dlrm_iterate(env, &d, 0, row, 1);
  /* one GPU: nothing to communicate, fco's AUTO keeps the unfused path */
  row->fused_us = P > 1 ? dlrm_iterate(env, &d, 1, row, 1) : row->base_us;
  sim_env_t ref = *env;
  ref.p.comm_off = 1;
  ref.sources = NULL;
  row->compute_us = dlrm_iterate(&ref, &d, 0, row, 0);
  snprintf(row->note, sizeof row->note,
           "%d %s shards on %d of %d GPUs, <= %.1f GB of tables per GPU, %.3g M dense params",
           d.plan.num_shards, sim_sharding_name(c->sharding),
           d.plan.used_gpus, P, d.plan.max_mem_gb, d.params / 1e6);
  sim_row_finish(row);
  dlrm_free(&d);
  return 0;
}
