/*
 * local.c — the local transport: P virtual ranks of one process on ONE GPU, so every GPU kernel
 * can be tested on a one-GPU machine. Created by fco_comm_init_all (or fco_comm_init with
 * nranks == 1). Every virtual rank's signal area (FCO_SIG_BYTES, zeroed once, never grows) and
 * data workspace live on that device; the peer tables hold plain device pointers to each
 * other's buffers, so kernels cannot tell this transport from nccl.
 *
 * Issue: an operation must be issued for all P virtual ranks inside one
 * fco_group_start()/fco_group_end(); run() then makes ONE launch covering every virtual rank
 * (fco_cuda_ar_launch_t.num_local = P) on ops[0].stream. Spinning blocks of one rank can
 * therefore never starve the grid of another (two separately launched spinning kernels need
 * not be co-scheduled). Ranks' other streams are joined with an event before and after.
 *
 * Test hook (not an API): env FCO_FAULT_SKIP_RANK=r, read at every call, makes the one-shot
 * launch (impl 1) leave virtual rank r out — num_local = P-1, the others renumbered in the
 * launch struct, each keeping its own device state — so they time out exactly as if rank r
 * never called. Rank r's epoch then lags: the communicator is unusable afterwards (as after any
 * timeout). Used by the timeout test on one GPU.
 */
#include <stdlib.h>
#include <string.h>

#include "../cuda/cuda_ops.h"
#include "gpu_common.h"

typedef struct {
  fco_gpu_rank_t g;
  void* sig; /* FCO_SIG_BYTES of signal slots */
  void* ws;  /* data workspace, comm->ws_bytes bytes, then the LL area (internal.h) */
} local_rank_t;

/* comm->world->shared: orders the virtual ranks' streams around the single launch. */
typedef struct {
  cudaEvent_t join;
  int have_join;
} local_world_t;

static local_rank_t* lr(fco_comm_t c) { return (local_rank_t*)c->tp; }

/* Peer p of a virtual rank is world->comms[p] (rank p), or the comm itself when alone. */
static fco_result_t write_tables(fco_comm_t* comms, int n) {
  for (int i = 0; i < n; i++) {
    fco_gpu_rank_t* g = &lr(comms[i])->g;
    memset(g->table.peer_data, 0, sizeof g->table.peer_data);
    memset(g->table.peer_sig, 0, sizeof g->table.peer_sig);
    for (int p = 0; p < n; p++) {
      g->table.peer_data[p] = lr(comms[p])->ws;
      g->table.peer_sig[p] = (uint64_t*)lr(comms[p])->sig;
    }
    g->table.ws_bytes = comms[i]->ws_bytes;
    FCO_CHECK(fco_gpu_rank_write_table(comms[i], g));
  }
  /* The copies ran on the legacy stream; user streams may be non-blocking. */
  FCO_CUDA_CHECK(comms[0], cudaDeviceSynchronize());
  return FCO_OK;
}

static fco_result_t rank_setup(fco_comm_t comm) {
  local_rank_t* me = (local_rank_t*)calloc(1, sizeof *me);
  if (!me)
    return fco_set_error(comm, FCO_ERR_OUT_OF_MEMORY, "rank %d: out of host memory", comm->rank);
  comm->tp = me;
  FCO_CHECK(fco_gpu_rank_create(comm, &me->g));
  void* sig = NULL;
  FCO_CUDA_CHECK(comm, cudaMalloc(&sig, FCO_SIG_BYTES));
  me->sig = sig;
  FCO_CUDA_CHECK(comm, cudaMemset(me->sig, 0, FCO_SIG_BYTES));
  return FCO_OK;
}

static fco_result_t local_init_rank(fco_comm_t comm, const fco_unique_id_t* id, void* nccl_comm) {
  (void)id;
  if (nccl_comm)
    return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                         "the local transport cannot adopt an NCCL communicator");
  if (comm->nranks != 1)
    return fco_set_error(comm, FCO_ERR_UNSUPPORTED,
                         "the local transport runs all virtual ranks in one process: create them "
                         "with fco_comm_init_all (nranks %d given to fco_comm_init)", comm->nranks);
  int dev = comm->cfg.device;
  if (dev < 0) FCO_CUDA_CHECK(comm, cudaGetDevice(&dev));
  FCO_CHECK(fco_gpu_use_device(comm, dev));
  comm->device = dev;
  FCO_CHECK(rank_setup(comm));
  return write_tables(&comm, 1);
}

static fco_result_t local_init_all(fco_comm_t* comms, int n, const int* devs) {
  (void)devs; /* comms[i]->device is already devs[0] (or 0); comm.c checked they are equal */
  fco_result_t r = FCO_OK;
  fco_comm_t c0 = comms[0];
  local_world_t* w = (local_world_t*)calloc(1, sizeof *w);
  if (!w) return fco_set_error(c0, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  c0->world->shared = w;
  FCO_CHECK_GOTO(fco_gpu_use_device(c0, c0->device), r, fail);
  FCO_CUDA_CHECK_GOTO(c0, cudaEventCreateWithFlags(&w->join, cudaEventDisableTiming), r, fail);
  w->have_join = 1;
  for (int i = 0; i < n; i++) FCO_CHECK_GOTO(rank_setup(comms[i]), r, fail);
  FCO_CHECK_GOTO(write_tables(comms, n), r, fail);
  return FCO_OK;
fail:
  /* comm.c reports comms[0]'s message; destroy (called by comm.c) frees the partial state. */
  fco_gpu_share_error(comms, n);
  return r;
}

static fco_result_t free_ws(fco_comm_t comm) {
  fco_result_t r = FCO_OK;
  local_rank_t* me = lr(comm);
  if (me->ws) FCO_CUDA_CHECK_KEEP(comm, cudaFree(me->ws), r);
  me->ws = NULL;
  comm->ws_bytes = 0;
  return r;
}

static fco_result_t local_grow(fco_comm_t* comms, int n, size_t bytes) {
  fco_result_t r = FCO_OK;
  for (int i = 0; i < n; i++)
    if (!comms[i] || !comms[i]->tp)
      return fco_set_error(NULL, FCO_ERR_INVALID_USAGE,
                           "workspace growth needs every virtual rank, but rank %d was "
                           "destroyed", i);
  fco_comm_t c0 = comms[0];
  size_t target = 0; /* one size for every virtual rank: the largest any asks (gpu_common.h) */
  for (int i = 0; i < n; i++) {
    const size_t t = fco_gpu_ws_target(comms[i], &lr(comms[i])->g.keep, bytes);
    if (t > target) target = t;
  }
  FCO_CUDA_CHECK_GOTO(c0, cudaSetDevice(c0->device), r, fail);
  /* Work in flight on any virtual rank may still use the old buffers. */
  FCO_CUDA_CHECK_GOTO(c0, cudaDeviceSynchronize(), r, fail);
  /* A workspace a captured call used is kept for its graph (gpu_common.h); the rest is freed
   * before allocating: all ranks share one GPU, old + new may not fit together. */
  int keep[FCO_MAX_GPU_RANKS] = {0};
  for (int i = 0; i < n; i++)
    if ((r = fco_gpu_keep_need(comms[i], &lr(comms[i])->g.keep, &keep[i])) != FCO_OK) {
      fco_gpu_share_error(comms, n); /* nothing changed yet */
      return r;
    }
  size_t kept = 0;
  for (int i = 0; i < n; i++) { /* first (cannot fail): the fail path frees what is left */
    local_rank_t* me = lr(comms[i]);
    if (keep[i] && me->ws) kept += fco_ws_alloc_bytes(comms[i]->ws_bytes);
    fco_gpu_keep_add(&me->g.keep, keep[i] ? me->ws : NULL, NULL);
    if (keep[i]) {
      me->ws = NULL;
      comms[i]->ws_bytes = 0;
    }
  }
  for (int i = 0; i < n; i++) FCO_CHECK_GOTO(free_ws(comms[i]), r, fail);
  if (kept)
    fco_log(c0, "local: %zu bytes of workspace a CUDA graph captured kept until destroy", kept);
  for (int i = 0; i < n; i++) {
    void* ws = NULL; /* stored only on success: a failed call leaves it unspecified */
    /* + the LL area past the data workspace, zeroed (src/core/internal.h: LL area). */
    FCO_CUDA_CHECK_GOTO(comms[i], cudaMalloc(&ws, fco_ws_alloc_bytes(target)), r, fail);
    lr(comms[i])->ws = ws;
    FCO_CUDA_CHECK_GOTO(comms[i], cudaMemset((char*)ws + fco_ws_ll_offset(target), 0,
                                             fco_ws_ll_bytes(target)), r, fail);
  }
  /* cudaMemset is asynchronous: the zeros land before any rank's kernel can store LL words. */
  FCO_CUDA_CHECK_GOTO(comms[0], cudaDeviceSynchronize(), r, fail);
  for (int i = 0; i < n; i++) comms[i]->ws_bytes = target;
  FCO_CHECK_GOTO(write_tables(comms, n), r, fail);
  fco_log(c0, "local: workspace %zu bytes per virtual rank (%zu needed)", target, bytes);
  return FCO_OK;
fail: {
  /* Leave every rank consistently without a workspace; the next call grows again. */
  char msg[FCO_ERRMSG_LEN];
  memcpy(msg, fco_last_error(NULL), sizeof msg);
  for (int i = 0; i < n; i++) (void)free_ws(comms[i]);
  (void)write_tables(comms, n);
  fco_set_error(NULL, r, "%s", msg);
  fco_gpu_share_error(comms, n);
  return r;
}
}

/* Symmetric buffers (fco_mem_alloc): one cudaMalloc a virtual rank; every rank's table row k
 * holds all of them (one device: plain pointers). */
static fco_result_t local_sym_alloc(fco_comm_t* comms, int n, int k, size_t bytes) {
  fco_result_t r = FCO_OK;
  void* ptrs[FCO_MAX_GPU_RANKS] = {0};
  for (int i = 0; i < n; i++)
    if (!comms[i] || !comms[i]->tp)
      return fco_set_error(NULL, FCO_ERR_INVALID_USAGE, "fco_mem_alloc: rank %d was destroyed", i);
  FCO_CUDA_CHECK_GOTO(comms[0], cudaSetDevice(comms[0]->device), r, fail);
  for (int i = 0; i < n; i++) {
    FCO_CUDA_CHECK_GOTO(comms[i], cudaMalloc(&ptrs[i], bytes), r, fail);
    FCO_CUDA_CHECK_GOTO(comms[i], cudaMemset(ptrs[i], 0, bytes), r, fail);
  }
  for (int i = 0; i < n; i++) FCO_CHECK_GOTO(fco_gpu_sym_row(comms[i], k, ptrs, n), r, fail);
  FCO_CUDA_CHECK_GOTO(comms[0], cudaDeviceSynchronize(), r, fail);
  for (int i = 0; i < n; i++) comms[i]->sym[k].ptr = ptrs[i];
  return FCO_OK;
fail:
  for (int i = 0; i < n; i++) {
    if (ptrs[i]) (void)cudaFree(ptrs[i]);
    (void)fco_gpu_sym_row(comms[i], k, NULL, 0);
  }
  (void)cudaGetLastError();
  fco_gpu_share_error(comms, n);
  return r;
}

static fco_result_t local_sym_free(fco_comm_t comm, int k) {
  fco_result_t r = FCO_OK;
  FCO_CUDA_CHECK_KEEP(comm, cudaSetDevice(comm->device), r);
  /* Every virtual rank shares the device: no kernel may still store into the buffer. */
  FCO_CUDA_CHECK_KEEP(comm, cudaDeviceSynchronize(), r);
  if (comm->sym[k].ptr) FCO_CUDA_CHECK_KEEP(comm, cudaFree(comm->sym[k].ptr), r);
  comm->sym[k].ptr = NULL;
  fco_result_t x = fco_gpu_sym_row(comm, k, NULL, 0);
  return r == FCO_OK ? x : r;
}

/* One grid for every virtual rank (minus the fault-injected one, if any). */
static fco_result_t launch(const fco_op_t* const* by_rank, int P, void* stream, fco_comm_t c0) {
  const fco_op_t* a = by_rank[0];
  long long skip = a->impl >= 1 && P > 1 ? fco_env_int("FCO_FAULT_SKIP_RANK", -1) : -1;
  fco_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  l.transport = FCO_TRANSPORT_LOCAL;
  l.nranks = P;
  l.stream = stream;
  for (int p = 0; p < P; p++) {
    if (p == skip) continue;
    fco_gpu_rank_ctx_t* r = &l.r[l.num_local++];
    r->op = by_rank[p];
    r->dev = lr(by_rank[p]->comm)->g.dev;
    r->ws = lr(by_rank[p]->comm)->ws;
  }
  if (l.num_local > 0) l.plan = l.r[0].op->comm->last_plan;
  if (skip >= 0 && skip < P)
    fco_log(c0, "local: FCO_FAULT_SKIP_RANK=%lld: virtual rank %lld left out of the launch",
            skip, skip);
  char err[FCO_ERRMSG_LEN];
  err[0] = '\0';
  int mid_call = 0;
  l.mid_call = &mid_call;
  fco_result_t r = fco_cuda_run(&l, err);
  if (r != FCO_OK) {
    char d[160];
    fco_op_describe(a, d, sizeof d);
    fco_set_error(c0, r, "local transport, %s, P=%d: %s", d, P, err[0] ? err : "launch failed");
    if (mid_call) { /* every virtual rank was in the launch: each keeps it */
      char base[FCO_ERRMSG_LEN];
      memcpy(base, c0->last_error, sizeof base);
      for (int p = P - 1; p >= 0; p--) { /* rank 0 last: its message is the thread's */
        if (!by_rank[p]) continue;
        memcpy(by_rank[p]->comm->last_error, base, FCO_ERRMSG_LEN);
        fco_gpu_mid_call_failed(by_rank[p]->comm, r);
      }
    }
    return r;
  }
  /* One grid ran every virtual rank: they all ran what r[0]'s launcher recorded. */
  for (int p = 0; p < P && l.plan; p++)
    if (by_rank[p]->comm->last_plan != l.plan)
      memcpy(by_rank[p]->comm->last_plan, l.plan, FCO_PLAN_LEN);
  return FCO_OK;
}

static fco_result_t local_run(fco_op_t* ops, int n) {
  fco_comm_t c0 = ops[0].comm;
  int P = c0->nranks;
  if (n != P)
    return fco_set_error(c0, FCO_ERR_INVALID_USAGE,
                         "local transport: the operation was issued for %d of the %d virtual "
                         "ranks; issue it for every virtual rank between fco_group_start() and "
                         "fco_group_end() (one grid covers all of them)", n, P);
  for (int i = 1; i < n; i++) FCO_CHECK(fco_op_check_same(&ops[0], &ops[i]));
  const fco_op_t* by_rank[FCO_MAX_GPU_RANKS] = {0};
  for (int i = 0; i < n; i++) {
    int rk = ops[i].comm->rank;
    if (rk < 0 || rk >= P || by_rank[rk] || !ops[i].comm->tp)
      return fco_set_error(c0, FCO_ERR_INVALID_USAGE,
                           "local transport: virtual rank %d appears twice in one group or is "
                           "not part of this communicator", rk);
    by_rank[rk] = &ops[i];
  }

  /* The other streams (deduplicated) that must be ordered around the one launch. */
  cudaStream_t s0 = (cudaStream_t)ops[0].stream, others[FCO_MAX_GPU_RANKS];
  int num_others = 0;
  for (int i = 1; i < n; i++) {
    cudaStream_t s = (cudaStream_t)ops[i].stream;
    int seen = s == s0;
    for (int j = 0; j < num_others && !seen; j++) seen = others[j] == s;
    if (!seen) others[num_others++] = s;
  }
  local_world_t* w = c0->world ? (local_world_t*)c0->world->shared : NULL;
  if (num_others > 0 && (!w || !w->have_join))
    return fco_set_error(c0, FCO_ERR_INTERNAL, "local transport: no join event for %d streams",
                         num_others + 1);

  FCO_CUDA_CHECK(c0, cudaSetDevice(c0->device));
  /* Does a graph capture this call (then a growth keeps the workspace: gpu_common.h)? */
  int unmarked = 0;
  for (int i = 0; i < n; i++) unmarked |= !lr(ops[i].comm)->g.keep.captured;
  if (unmarked) {
    fco_gpu_keep_t probe = {0};
    fco_gpu_keep_note(&probe, s0);
    for (int j = 0; j < num_others; j++) fco_gpu_keep_note(&probe, others[j]);
    for (int i = 0; i < n && probe.captured; i++) lr(ops[i].comm)->g.keep.captured = 1;
  }
  for (int j = 0; j < num_others; j++) {
    /* One event serves every join: a wait binds to the record made just before it. */
    FCO_CUDA_CHECK(c0, cudaEventRecord(w->join, others[j]));
    FCO_CUDA_CHECK(c0, cudaStreamWaitEvent(s0, w->join, 0));
  }
  const fco_result_t r = launch(by_rank, P, (void*)s0, c0);
  if (r != FCO_OK) {
    /* The other streams still wait for s0 (best effort): a capture that reached s0 through
     * their joins above must be able to end (cudaErrorStreamCaptureUnjoined otherwise: the
     * caller's whole graph lost). The launch's error stays the call's. */
    if (num_others > 0 && cudaEventRecord(w->join, s0) == cudaSuccess)
      for (int j = 0; j < num_others; j++) (void)cudaStreamWaitEvent(others[j], w->join, 0);
    (void)cudaGetLastError();
    return r;
  }
  if (num_others > 0) {
    FCO_CUDA_CHECK(c0, cudaEventRecord(w->join, s0));
    for (int j = 0; j < num_others; j++)
      FCO_CUDA_CHECK(c0, cudaStreamWaitEvent(others[j], w->join, 0));
  }
  return FCO_OK;
}

static fco_result_t local_destroy(fco_comm_t comm) {
  fco_result_t r = FCO_OK;
  local_rank_t* me = lr(comm);
  fco_world_t* world = comm->world;
  local_world_t* w = world ? (local_world_t*)world->shared : NULL;
  int last = world && world->live == 1;
  if ((me || (last && w && w->have_join)) && comm->device >= 0) {
    FCO_CUDA_CHECK_KEEP(comm, cudaSetDevice(comm->device), r);
    /* Every virtual rank shares the device: wait for all work that may touch our buffers. */
    FCO_CUDA_CHECK_KEEP(comm, cudaDeviceSynchronize(), r);
  }
  if (me) {
    fco_result_t x = fco_sym_free_all(comm);
    if (r == FCO_OK) r = x;
    x = free_ws(comm);
    if (r == FCO_OK) r = x;
    for (int i = 0; i < me->g.keep.n; i++)
      FCO_CUDA_CHECK_KEEP(comm, cudaFree(me->g.keep.v[i].ptr), r);
    fco_gpu_keep_clear(&me->g.keep);
    if (me->sig) FCO_CUDA_CHECK_KEEP(comm, cudaFree(me->sig), r);
    x = fco_gpu_rank_destroy(comm, &me->g);
    if (r == FCO_OK) r = x;
    free(me);
    comm->tp = NULL;
  }
  if (last && w) {
    if (w->have_join) FCO_CUDA_CHECK_KEEP(comm, cudaEventDestroy(w->join), r);
    free(w);
    world->shared = NULL;
  }
  return r;
}

static fco_result_t local_poll_error(fco_comm_t comm) {
  return comm->tp ? fco_gpu_poll_error(comm, &lr(comm)->g) : FCO_OK;
}

const fco_transport_ops_t fco_transport_local = {
    .name = "local",
    .world_grows_together = 1,
    .init_rank = local_init_rank,
    .init_all = local_init_all,
    .destroy = local_destroy,
    .grow = local_grow,
    .run = local_run,
    .poll_error = local_poll_error,
    .capturing = fco_gpu_capturing,
    .sym_alloc = local_sym_alloc,
    .sym_free = local_sym_free,
};
