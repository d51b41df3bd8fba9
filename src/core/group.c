/*
 * group.c — fco_group_start/end (per thread, nestable, as NCCL's) and the path every operation
 * takes: submit → (queue) → execute = let the op revise AUTO with every rank's call at hand
 * (fco_op_info_t.agree), grow the workspace collectively if needed, record the plan
 * (fco_last_plan), then hand the ops to the transport. Ops of one world issued in one group
 * are executed together in rounds (round i = the i-th op of each comm), so the local transport
 * can launch one grid per round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Thread_local int g_depth;
static _Thread_local fco_op_t* g_queue;
static _Thread_local int g_len, g_cap;

/* Worlds with an operator call that failed on one of their ranks while this thread's group was
 * open (fco_op_call_result): the first failure of each, up to kMaxRefused worlds a group (more
 * keep the old behaviour: their other ranks' ops run, and wait for the missing call). */
enum { kMaxRefused = 8 };
typedef struct {
  const fco_world_t* world;
  int rank;
  fco_result_t code;
  char msg[FCO_ERRMSG_LEN];
} refused_t;
static _Thread_local refused_t g_refused[kMaxRefused];
static _Thread_local int g_nrefused;
/* The first refused operator call's code of this thread's open group, whatever its comm:
 * fco_group_end returns it (until session 55 a group whose every call was refused, or a lone
 * communicator's refused call, gave FCO_OK there). */
static _Thread_local fco_result_t g_refused_code;

fco_result_t fco_op_call_result(fco_comm_t comm, fco_result_t r) {
  if (r == FCO_OK || g_depth == 0) return r;
  if (g_refused_code == FCO_OK) g_refused_code = r;
  if (!comm || !comm->world) return r;
  for (int i = 0; i < g_nrefused; i++)
    if (g_refused[i].world == comm->world) return r;
  if (g_nrefused == kMaxRefused) return r;
  refused_t* f = &g_refused[g_nrefused++];
  f->world = comm->world;
  f->rank = comm->rank;
  f->code = r;
  snprintf(f->msg, sizeof f->msg, "%s", comm->last_error);
  return r;
}

static const refused_t* refused_of(const fco_comm_t comm) {
  for (int i = 0; i < g_nrefused; i++)
    if (comm->world && g_refused[i].world == comm->world) return &g_refused[i];
  return NULL;
}

fco_result_t fco_group_start(void) {
  if (g_depth++ == 0) {
    g_nrefused = 0;
    g_refused_code = FCO_OK;
  }
  return FCO_OK;
}

int fco_group_holds(fco_comm_t comm) {
  for (int i = 0; i < g_len; i++)
    if (g_queue[i].comm == comm) return 1;
  return 0;
}

/* The calls' streams, and the devices' default streams (a global capture elsewhere). */
static int capturing_any(fco_op_t* ops, int n) {
  for (int i = 0; i < n; i++)
    if (ops[i].comm->tops->capturing &&
        (ops[i].comm->tops->capturing(ops[i].comm, ops[i].stream) ||
         fco_capturing_device(ops[i].comm)))
      return 1;
  return 0;
}

static fco_result_t execute(fco_op_t* ops, int n) {
  fco_comm_t c0 = ops[0].comm;
  const fco_op_info_t* info = fco_op_info(ops[0].kind);
  if (info && info->agree && n > 1) info->agree(ops, n); /* batches are of one kind */
  size_t need = 0;
  for (int i = 0; i < n; i++) {
    if (ops[i].comm->async_error != FCO_OK)
      return fco_async_refuse(ops[i].comm, fco_op_name(ops[i].kind));
    if (ops[i].ws_bytes > need) need = ops[i].ws_bytes;
  }
  /* A world with a rank destroyed (allowed while only other ranks' calls are queued): no
   * collective call on it can complete; it would wait for that rank until the timeout and
   * leave the communicator unusable. */
  if (c0->world && c0->nranks > 1)
    for (int i = 0; i < c0->world->n; i++)
      if (!__atomic_load_n(&c0->world->comms[i], __ATOMIC_ACQUIRE))
        return fco_set_error(c0, FCO_ERR_INVALID_USAGE,
                             "%s: rank %d of this fco_comm_init_all group was destroyed: no "
                             "collective call on the group can complete (destroy every rank)",
                             fco_op_name(ops[0].kind), i);
  fco_comm_t batch[FCO_MAX_RANKS];
  fco_comm_t* comms = batch;
  int ncomms = n;
  if (c0->world && c0->tops->world_grows_together) {
    comms = c0->world->comms;
    ncomms = c0->world->n;
  } else {
    for (int i = 0; i < n; i++) batch[i] = ops[i].comm;
  }
  int grow = 0; /* every rank of a world is alive: checked above */
  for (int i = 0; i < ncomms; i++)
    if (comms[i]->ws_bytes < need) grow = 1;
  if (grow) {
    for (int i = 0; i < ncomms; i++) {
      long long cap = comms[i]->cfg.max_workspace_bytes;
      if (cap > 0 && need > (size_t)cap)
        return fco_set_error(c0, FCO_ERR_OUT_OF_MEMORY,
                             "workspace of %zu bytes per rank needed, over "
                             "cfg.max_workspace_bytes = %lld", need, cap);
    }
    if (capturing_any(ops, n))
      return fco_set_error(c0, FCO_ERR_INVALID_USAGE,
                           "the workspace must grow to %zu bytes per rank, which allocates, but the "
                           "stream is being captured into a CUDA graph: call fco_comm_reserve(comm, "
                           "%zu) on every rank before capturing", need, need);
    fco_log(c0, "workspace: growing to %zu bytes per rank", need);
    for (int i = 0; i < n; i++) ops[i].comm->grow_cause = &ops[i];
    const fco_result_t g = c0->tops->grow(comms, ncomms, need);
    for (int i = 0; i < n; i++) ops[i].comm->grow_cause = NULL;
    if (g != FCO_OK) return g;
  }
  /* fco_last_plan: the op layer's part; GPU launchers append theirs during run. */
  for (int i = 0; i < n; i++)
    snprintf(ops[i].comm->last_plan, FCO_PLAN_LEN, "%s impl %d", fco_op_name(ops[i].kind),
             ops[i].impl);
  return c0->tops->run(ops, n);
}

fco_result_t fco_ops_execute(fco_op_t* ops, int n) {
  const int dev = fco_device_save(ops[0].comm->transport);
  fco_result_t r = execute(ops, n);
  fco_device_restore(dev);
  if (r != FCO_OK) {
    /* fco_set_error left the message in this thread's slot too (whichever comm it named: the
     * batch's first for a workspace cap or a capture, the failing one from run): every rank
     * of a failed batch gets it, and none keeps a plan. Before session 42 a failure ahead of
     * run (the cap, a capture) reached the first rank's fco_last_error only. */
    char msg[FCO_ERRMSG_LEN];
    memcpy(msg, fco_last_error(NULL), sizeof msg);
    for (int i = 0; i < n; i++) {
      memcpy(ops[i].comm->last_error, msg, sizeof msg);
      ops[i].comm->last_plan[0] = '\0';
    }
  }
  return r;
}

fco_result_t fco_op_submit(const fco_op_t* op) {
  /* An error the device recorded (a timeout, bad data, the epoch limit) makes every later call
   * fail: the record is polled here (one read of host-mapped memory). */
  if (fco_comm_poll_async(op->comm) != FCO_OK)
    return fco_async_refuse(op->comm, fco_op_name(op->kind));
  if (g_depth == 0) {
    fco_op_t tmp = *op;
    return fco_ops_execute(&tmp, 1);
  }
  if (g_len == g_cap) {
    int cap = g_cap ? 2 * g_cap : 16;
    fco_op_t* q = (fco_op_t*)realloc(g_queue, (size_t)cap * sizeof *q);
    if (!q) return fco_set_error(op->comm, FCO_ERR_OUT_OF_MEMORY, "group queue full");
    g_queue = q;
    g_cap = cap;
  }
  g_queue[g_len++] = *op;
  return FCO_OK;
}

static const void* group_key(const fco_op_t* op) {
  return op->comm->world ? (const void*)op->comm->world : (const void*)op->comm;
}

/* Compare every rank's call sequence of q[at]'s world with q[at]'s rank's (each op is looked at
 * once: `seen` marks the world's ops); on a difference, fail (and mark done) every call of that
 * world with a message naming both ranks. kinds0: scratch of n entries. */
static fco_result_t check_sequences(const fco_op_t* q, int n, int at, char* done, char* seen,
                                    fco_op_kind_t* kinds0) {
  const fco_world_t* w = q[at].comm->world;
  const fco_comm_t c0 = q[at].comm;
  int n0 = 0;
  for (int i = at; i < n; i++)
    if (q[i].comm == c0) kinds0[n0++] = q[i].kind;
  char msg[FCO_ERRMSG_LEN] = "";
  for (int i = at; i < n; i++) {
    if (q[i].comm->world != w || seen[i]) continue;
    const fco_comm_t c = q[i].comm;
    int m = 0, bad = -1;
    fco_op_kind_t bad_kind = FCO_OP_ALLREDUCE;
    for (int j = i; j < n; j++)
      if (q[j].comm == c) {
        seen[j] = 1;
        if (bad < 0 && m < n0 && q[j].kind != kinds0[m]) {
          bad = m;
          bad_kind = q[j].kind;
        }
        m++;
      }
    if (msg[0] || (bad < 0 && m == n0)) continue;
    if (m != n0)
      snprintf(msg, sizeof msg, "fco_group_end: rank %d has %d calls of its world in the group, "
               "rank %d has %d (one thread driving several ranks queues the same calls for "
               "each, in the same order); none issued", c0->rank, n0, c->rank, m);
    else
      snprintf(msg, sizeof msg, "fco_group_end: call %d of the world in the group is fco_%s on "
               "rank %d but fco_%s on rank %d (every rank makes the same calls in the same "
               "order); none issued", bad + 1, fco_op_name(kinds0[bad]), c0->rank,
               fco_op_name(bad_kind), c->rank);
  }
  if (!msg[0]) return FCO_OK;
  for (int i = 0; i < n; i++)
    if (q[i].comm->world == w) {
      done[i] = 1;
      fco_set_error(q[i].comm, FCO_ERR_INVALID_ARGUMENT, "%s", msg);
    }
  return FCO_ERR_INVALID_ARGUMENT;
}

fco_result_t fco_group_end(void) {
  if (g_depth == 0)
    return fco_set_error(NULL, FCO_ERR_INVALID_USAGE, "fco_group_end without fco_group_start");
  if (--g_depth > 0) return FCO_OK;
  int n = g_len;
  fco_op_t* q = g_queue;
  g_queue = NULL;
  g_len = g_cap = 0;
  const fco_result_t refused = g_refused_code;
  g_refused_code = FCO_OK;
  if (n == 0) {
    free(q);
    g_nrefused = 0;
    return refused;
  }
  fco_result_t first = FCO_OK;
  char* done = (char*)calloc((size_t)n, 1);
  fco_op_t* batch = (fco_op_t*)malloc((size_t)n * sizeof *batch);
  char* seen = (char*)calloc((size_t)n, 1);
  fco_op_kind_t* kinds0 = (fco_op_kind_t*)malloc((size_t)n * sizeof *kinds0);
  if (!done || !batch || !seen || !kinds0) {
    /* None issued, every queued call's communicator told. (The sequence check's scratch was
     * once allocated apart and the check skipped, silently, without it: a group whose ranks'
     * calls differ then paired different operators.) */
    for (int i = 0; i < n; i++)
      fco_set_error(q[i].comm, FCO_ERR_OUT_OF_MEMORY,
                    "fco_group_end: out of host memory for the group's %d calls; none issued", n);
    free(done);
    free(batch);
    free(seen);
    free(kinds0);
    free(q);
    g_nrefused = 0;
    return FCO_ERR_OUT_OF_MEMORY; /* the message is in this thread's slot too */
  }
  /* One thread driving several ranks of a world: their call sequences must match (the same
   * operators in the same order), or a round would pair different operators (until session 55
   * split into batches that each waited for the other ranks until FCO_TIMEOUT_MS; an agree hook
   * could read another operator's arguments). Refused as a whole, nothing issued. (A world with
   * a refused call is cancelled below, with that call's message.) */
  for (int i = 0; i < n; i++)
    if (!seen[i] && q[i].comm->world && !refused_of(q[i].comm)) {
      const fco_result_t r = check_sequences(q, n, i, done, seen, kinds0);
      if (r != FCO_OK && first == FCO_OK) first = r;
    }
  free(seen);
  free(kinds0);
  /* Take rounds: per key (world or lone comm), the first not-yet-run op of each comm, in
   * queue order; ops of different kinds in one round are split into separate batches. */
  for (int start = 0; start < n; start++) {
    if (done[start]) continue;
    const void* key = group_key(&q[start]);
    int k = 0;
    for (int i = start; i < n; i++) {
      if (done[i] || group_key(&q[i]) != key || q[i].kind != q[start].kind) continue;
      int dup = 0;
      for (int j = 0; j < k; j++) dup |= batch[j].comm == q[i].comm;
      if (dup) continue;
      batch[k++] = q[i];
      done[i] = 1;
    }
    const refused_t* f = refused_of(batch[0].comm);
    fco_result_t r;
    if (f) { /* a rank of this world failed a call of the group: issue none of its ops */
      r = f->code;
      for (int i = 0; i < k; i++) {
        fco_comm_t c = batch[i].comm;
        if (c->rank == f->rank && !strcmp(c->last_error, f->msg)) continue; /* its own message */
        snprintf(c->last_error, FCO_ERRMSG_LEN,
                 "%s not issued: rank %d's call in this group failed: %.*s",
                 fco_op_name(batch[i].kind), f->rank, FCO_ERRMSG_LEN / 2, f->msg);
        c->last_plan[0] = '\0';
      }
    } else {
      r = fco_ops_execute(batch, k);
    }
    if (r != FCO_OK && first == FCO_OK) first = r;
  }
  g_nrefused = 0;
  free(done);
  free(batch);
  free(q);
  return refused != FCO_OK ? refused : first;
}
