/*
 * nccl.cu — the nccl transport: one GPU per rank, peers reached by load/store over NVLink
 * through NCCL >= 2.28 symmetric memory.
 *
 * Per rank: an NCCL communicator (made from the unique id, by ncclCommInitAll, or adopted),
 * a signal area (FCO_SIG_BYTES, zeroed, never grows) and a data workspace (grown collectively),
 * both ncclMemAlloc'd and registered with ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC),
 * a device communicator (ncclDevCommCreate; its lsaSize tells whether every rank is load/store
 * reachable), and the per-rank device state of gpu_common.h whose peer table a one-block
 * kernel fills with ncclGetLsaPointer(window, 0, p).
 *
 * Collectives over several comms driven by one thread (init_all) go inside
 * ncclGroupStart/End: window registration, ncclDevCommCreate and allreduces join NCCL groups;
 * window deregistration is local and never waits for peers, so it is issued ungrouped.
 * Setup and growth end with an "agree" allreduce (min of a per-rank ok flag): all ranks commit
 * or fail together, and it is the barrier after which peers may signal into our buffers.
 * Growth and fco_mem_alloc's slot agreement first pass the gate (src/cuda/gate.h), a kernel
 * bounded by FCO_TIMEOUT_MS: a rank whose peer never takes the step gets FCO_ERR_TIMEOUT
 * instead of waiting in NCCL forever, and ranks that grow together agree on one size.
 *
 * impl 0 = ncclAllReduce; impl 1 = fco_cuda_allreduce_oneshot over the peer table.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>
#include <nccl_device.h>

#include "../cuda/cuda_ops.h"
#include "../cuda/gate.h"
#include "gpu_common.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 28, 0)
#error "the nccl transport needs NCCL >= 2.28 (symmetric windows and the device API)"
#endif

/* Scratch ints a rank holds on the device: agree's [0]; sym_slots' free mask (one a slot) + ok;
 * then, at kGateResOff bytes, the gate's result. */
constexpr int kScratchInts = FCO_MAX_SYMMETRIC + 1;
constexpr size_t kGateResOff = (kScratchInts * sizeof(int) + 15) / 16 * 16;
constexpr size_t kScratchBytes = kGateResOff + sizeof(fco_gate_result_t);
/* The signal area: the signal rows (dev.h), then the gate's words (gate.h). */
constexpr size_t kSigAreaBytes = FCO_SIG_BYTES + FCO_GATE_BYTES;

typedef struct {
  fco_gpu_rank_t g;
  ncclComm_t nccl;
  int own_nccl;            /* 0: adopted (fco_comm_init_from_nccl), the caller destroys it */
  int* scratch;            /* kScratchBytes on the device: agree/barrier/slots, gate result */
  uint64_t gate_gen;       /* gates entered (gate.h)                                        */
  int gate_broken;         /* a gate failed: out of step with the peers for good            */
  void* sig;               /* ncclMemAlloc, kSigAreaBytes                                   */
  ncclWindow_t sig_win;
  ncclDevComm dev_comm;
  int have_dev_comm;
  void* ws;                /* ncclMemAlloc, comm->ws_bytes + the LL area (internal.h)      */
  ncclWindow_t ws_win;
  ncclWindow_t sym_win[FCO_MAX_SYMMETRIC]; /* fco_mem_alloc's buffers (comm->sym[k].ptr)   */
} nccl_rank_t;

static nccl_rank_t* nr(fco_comm_t c) { return (nccl_rank_t*)c->tp; }

static fco_result_t nccl_fail(fco_comm_t comm, ncclResult_t r, const char* call) {
  const char* last = ncclGetLastError(comm && comm->tp ? nr(comm)->nccl : NULL);
  int has_last = last && *last;
  if (comm)
    return fco_set_error(comm, FCO_ERR_NCCL, "rank %d (device %d): %s failed: %s%s%s",
                         comm->rank, comm->device, call, ncclGetErrorString(r),
                         has_last ? "; " : "", has_last ? last : "");
  return fco_set_error(NULL, FCO_ERR_NCCL, "%s failed: %s%s%s", call, ncclGetErrorString(r),
                       has_last ? "; " : "", has_last ? last : "");
}

#define NCCL_CHECK(comm, call)                                                \
  do {                                                                        \
    ncclResult_t fco_n_ = (call);                                             \
    if (fco_n_ != ncclSuccess) return nccl_fail((comm), fco_n_, #call);       \
  } while (0)

#define NCCL_CHECK_KEEP(comm, call, res)                                      \
  do {                                                                        \
    ncclResult_t fco_n_ = (call);                                             \
    if (fco_n_ != ncclSuccess && (res) == FCO_OK) (res) = nccl_fail((comm), fco_n_, #call); \
  } while (0)

/* Non-blocking communicators (e.g. adopted ones) answer ncclInProgress: wait until settled. */
static ncclResult_t settle(ncclComm_t const* ncs, int n, ncclResult_t r) {
  if (r != ncclInProgress) return r;
  for (int i = 0; i < n; i++) {
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) {
      ncclResult_t q = ncclCommGetAsyncError(ncs[i], &st);
      if (q != ncclSuccess) return q;
      if (st == ncclInProgress) sched_yield();
    }
    if (st != ncclSuccess) return st;
  }
  return ncclSuccess;
}

/* fn(i) for i < n: one call per comm this thread drives, inside one NCCL group when n > 1 (a
 * lone call needs none, and the baseline allreduce should not pay for one). The error names
 * the comm whose call failed, else comms[0]. */
template <class F>
static fco_result_t nccl_group(fco_comm_t* comms, int n, const char* what, F fn) {
  ncclComm_t ncs[FCO_MAX_GPU_RANKS];
  for (int i = 0; i < n; i++) ncs[i] = nr(comms[i])->nccl;
  if (n == 1) {
    ncclResult_t r = settle(ncs, 1, fn(0));
    return r == ncclSuccess ? FCO_OK : nccl_fail(comms[0], r, what);
  }
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return nccl_fail(comms[0], r, "ncclGroupStart");
  int bad = -1;
  for (int i = 0; i < n && bad < 0; i++) {
    r = fn(i);
    if (r != ncclSuccess && r != ncclInProgress) bad = i;
  }
  ncclResult_t e = ncclGroupEnd(); /* always: balances the group even after a failed call */
  if (bad < 0) r = settle(ncs, n, e);
  if (r != ncclSuccess) return nccl_fail(comms[bad < 0 ? 0 : bad], r, what);
  return FCO_OK;
}

fco_result_t fco_nccl_get_unique_id(void* nccl_id128) {
  static_assert(sizeof(ncclUniqueId) == 128, "fco_uid_t.nccl_id holds 128 bytes");
  ncclUniqueId id;
  NCCL_CHECK(NULL, ncclGetUniqueId(&id));
  memcpy(nccl_id128, &id, sizeof id);
  return FCO_OK;
}

/* Peer table: windows are per-communicator device structs, so only a kernel can turn them into
 * pointers. With lsaSize == nranks the LSA rank of peer p is p. */
__global__ void fill_peer_table_kernel(fco_dev_rank_t* dev, ncclWindow_t data_win,
                                       ncclWindow_t sig_win, int nranks) {
  int p = threadIdx.x;
  if (p >= nranks) return;
  dev->peer_data[p] = data_win ? ncclGetLsaPointer(data_win, 0, p) : nullptr;
  dev->peer_sig[p] = (uint64_t*)ncclGetLsaPointer(sig_win, 0, p);
}

static fco_result_t write_table(fco_comm_t comm) {
  nccl_rank_t* me = nr(comm);
  fco_dev_rank_t* t = &me->g.table;
  memset(t->peer_data, 0, sizeof t->peer_data);
  memset(t->peer_sig, 0, sizeof t->peer_sig);
  t->ws_bytes = comm->ws_bytes;
  FCO_CUDA_CHECK(comm, cudaSetDevice(comm->device));
  FCO_CHECK(fco_gpu_rank_write_table(comm, &me->g)); /* legacy stream, ordered before: */
  fill_peer_table_kernel<<<1, FCO_MAX_GPU_RANKS, 0, 0>>>(me->g.dev, me->ws_win, me->sig_win,
                                                         comm->nranks);
  FCO_CUDA_CHECK(comm, cudaGetLastError());
  FCO_CUDA_CHECK(comm, cudaDeviceSynchronize()); /* before any (non-blocking) user stream */
  return FCO_OK;
}

/* Collective: *all_ok = min over every rank of `ok` (this thread's comms all pass the same).
 * Also the barrier of setup and growth. Runs on the legacy stream of each device. */
static fco_result_t agree(fco_comm_t* comms, int n, int ok, int* all_ok) {
  for (int i = 0; i < n; i++) {
    FCO_CUDA_CHECK(comms[i], cudaSetDevice(comms[i]->device));
    FCO_CUDA_CHECK(comms[i], cudaMemcpy(nr(comms[i])->scratch, &ok, sizeof ok,
                                        cudaMemcpyHostToDevice));
  }
  auto min_ok = [&](int i) {
    nccl_rank_t* me = nr(comms[i]);
    return ncclAllReduce(me->scratch, me->scratch, 1, ncclInt32, ncclMin, me->nccl, 0);
  };
  FCO_CHECK(nccl_group(comms, n, "ncclAllReduce (agreement/barrier)", min_ok));
  *all_ok = 1;
  for (int i = 0; i < n; i++) {
    int v = 0;
    FCO_CUDA_CHECK(comms[i], cudaSetDevice(comms[i]->device));
    FCO_CUDA_CHECK(comms[i], cudaMemcpy(&v, nr(comms[i])->scratch, sizeof v,
                                        cudaMemcpyDeviceToHost));
    if (!v) *all_ok = 0;
  }
  return FCO_OK;
}

/* A collective step `what` over the n comms this thread drives needs every one of them. */
static fco_result_t all_alive(fco_comm_t* comms, int n, const char* what) {
  for (int i = 0; i < n; i++)
    if (!comms[i] || !comms[i]->tp)
      return fco_set_error(NULL, FCO_ERR_INVALID_USAGE,
                           "%s needs every rank driven by this thread, but rank %d was destroyed",
                           what, i);
  return FCO_OK;
}

/* A rank out of step with its peers' gates (gate.h) can take no collective step again: its
 * communicator keeps the error (every later call returns it) and enters no gate again. */
static fco_result_t gate_poison(fco_comm_t* comms, int n, fco_result_t code, const char* msg) {
  for (int i = 0; i < n; i++) {
    nr(comms[i])->gate_broken = 1;
    if (comms[i]->async_error == FCO_OK) {
      comms[i]->async_error = code;
      comms[i]->async_msg[0] = '\0'; /* fco_set_error below fills it */
    }
    fco_set_error(comms[i], code, "%s", msg);
  }
  return code;
}

/* The gate (gate.h) of a collective step `what` for the n comms this thread drives: every
 * rank's `value` in, *max_value = their maximum. Bounded by each comm's FCO_TIMEOUT_MS; a rank
 * missing (or out of step) fails the step on every rank, before any NCCL call, and leaves
 * these comms unusable. A world of one rank has no peer to wait for. */
static fco_result_t gate(fco_comm_t* comms, int n, const char* what, uint64_t value,
                         uint64_t* max_value) {
  *max_value = value;
  FCO_CHECK(all_alive(comms, n, what));
  if (comms[0]->nranks == 1) return FCO_OK;
  char err[FCO_ERRMSG_LEN] = "";
  char msg[FCO_ERRMSG_LEN];
  for (int i = 0; i < n; i++)
    if (nr(comms[i])->gate_broken) { /* its peers give up on it within their bound */
      snprintf(msg, sizeof msg, "rank %d: %s: an earlier collective step of this communicator "
               "timed out; it is unusable: destroy it", comms[i]->rank, what);
      return gate_poison(comms, n, FCO_ERR_INVALID_USAGE, msg);
    }
  /* A capture in progress: the step would fail past the gate, its peers waiting in NCCL
   * (review rev62). Refused before counting in, not sticky (the peers give up on this rank
   * within their bound). */
  for (int i = 0; i < n; i++)
    if (fco_gpu_capturing(comms[i], NULL)) {
      snprintf(msg, sizeof msg, "rank %d: %s: a stream of device %d is being captured into a "
               "CUDA graph; take this step before capturing", comms[i]->rank, what,
               comms[i]->device);
      for (int j = 0; j < n; j++) fco_set_error(comms[j], FCO_ERR_INVALID_USAGE, "%s", msg);
      return FCO_ERR_INVALID_USAGE;
    }
  fco_result_t r = FCO_OK;
  /* Launch every comm's gate before waiting for any (one thread may drive all ranks), on the
   * per-thread default stream: not behind the user's streams' work, which may wait for the
   * very peers this gate waits for. */
  for (int i = 0; i < n && r == FCO_OK; i++) {
    nccl_rank_t* me = nr(comms[i]);
    cudaError_t ce = cudaSetDevice(comms[i]->device);
    if (ce != cudaSuccess) {
      snprintf(err, sizeof err, "cudaSetDevice: %s", cudaGetErrorString(ce));
      r = FCO_ERR_CUDA;
      break;
    }
    const uint64_t ns = (uint64_t)comms[i]->cfg.timeout_ms * 1000000ull;
    r = fco_cuda_gate(me->g.dev, ++me->gate_gen, value, ns,
                      (fco_gate_result_t*)((char*)me->scratch + kGateResOff), cudaStreamPerThread,
                      err);
  }
  fco_gate_result_t res[FCO_MAX_GPU_RANKS];
  for (int i = 0; i < n && r == FCO_OK; i++) {
    cudaError_t ce = cudaSetDevice(comms[i]->device);
    if (ce == cudaSuccess)
      ce = cudaMemcpyAsync(&res[i], (char*)nr(comms[i])->scratch + kGateResOff, sizeof res[i],
                           cudaMemcpyDeviceToHost, cudaStreamPerThread);
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(cudaStreamPerThread);
    if (ce != cudaSuccess) {
      snprintf(err, sizeof err, "the gate's kernel: %s", cudaGetErrorString(ce));
      r = FCO_ERR_CUDA;
    }
  }
  if (r != FCO_OK) {
    snprintf(msg, sizeof msg, "rank %d: %s: entering the collective step failed (%.300s); the "
             "communicator is unusable: destroy it", comms[0]->rank, what, err);
    return gate_poison(comms, n, r, msg);
  }
  for (int i = 0; i < n; i++) {
    const fco_gate_result_t* g = &res[i];
    const unsigned long long gen = nr(comms[i])->gate_gen;
    if (g->decided >> 2 != gen) {
      snprintf(msg, sizeof msg, "rank %d: %s: the ranks are out of step (collective step %llu "
               "here, %llu decided: an earlier one timed out elsewhere); the communicator is "
               "unusable: destroy it", comms[i]->rank, what, gen,
               (unsigned long long)(g->decided >> 2));
      return gate_poison(comms, n, FCO_ERR_INVALID_USAGE, msg);
    }
    if (!g->went) {
      if (g->missing >= 0)
        snprintf(msg, sizeof msg, "rank %d: %s: rank %d did not take this collective step "
                 "within FCO_TIMEOUT_MS = %d ms (every rank must: its call may have needed no "
                 "growth, or been refused, or it is gone); the communicator is unusable: destroy "
                 "it", comms[i]->rank, what, g->missing, comms[i]->cfg.timeout_ms);
      else
        snprintf(msg, sizeof msg, "rank %d: %s: this rank came to the collective step after a "
                 "peer had given up on it (FCO_TIMEOUT_MS = %d ms); the communicator is "
                 "unusable: destroy it", comms[i]->rank, what, comms[i]->cfg.timeout_ms);
      return gate_poison(comms, n, FCO_ERR_TIMEOUT, msg);
    }
    if (g->missing >= 0) { /* its count came and its words did not: never expected */
      snprintf(msg, sizeof msg, "rank %d: %s: rank %d's gate words did not arrive; the "
               "communicator is unusable: destroy it", comms[i]->rank, what, g->missing);
      return gate_poison(comms, n, FCO_ERR_INTERNAL, msg);
    }
    /* Growth passes its size (> 0), fco_mem_alloc 0: every rank saw every value, so all
     * tell alike when ranks took different steps (their NCCL calls would not match: a hang). */
    if ((g->min_value == 0) != (g->max_value == 0)) {
      snprintf(msg, sizeof msg, "rank %d: %s: another rank took a different collective step "
               "(a workspace growth against an fco_mem_alloc: the ranks' calls differ); the "
               "communicator is unusable: destroy it", comms[i]->rank, what);
      return gate_poison(comms, n, FCO_ERR_INVALID_USAGE, msg);
    }
    if (g->max_value > *max_value) *max_value = g->max_value;
  }
  return FCO_OK;
}

/* sym_slots (internal.h): every rank's free-slot mask and ok ANDed, one ncclAllReduce (min of
 * 0 / 1 per slot, then ok) on the legacy stream, as agree; through the gate first. */
static fco_result_t nccl_sym_slots(fco_comm_t comm, unsigned free_mask, int ok,
                                   unsigned* all_free, int* all_ok) {
  nccl_rank_t* me = nr(comm);
  uint64_t unused = 0;
  FCO_CHECK(gate(&comm, 1, "fco_mem_alloc", 0, &unused));
  int v[kScratchInts];
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) v[k] = (int)(free_mask >> k & 1u);
  v[FCO_MAX_SYMMETRIC] = ok ? 1 : 0;
  FCO_CUDA_CHECK(comm, cudaSetDevice(comm->device));
  FCO_CUDA_CHECK(comm, cudaMemcpy(me->scratch, v, sizeof v, cudaMemcpyHostToDevice));
  auto slots = [&](int) {
    return ncclAllReduce(me->scratch, me->scratch, kScratchInts, ncclInt32, ncclMin, me->nccl, 0);
  };
  FCO_CHECK(nccl_group(&comm, 1, "ncclAllReduce (fco_mem_alloc's slot)", slots));
  FCO_CUDA_CHECK(comm, cudaMemcpy(v, me->scratch, sizeof v, cudaMemcpyDeviceToHost));
  *all_free = 0;
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) *all_free |= (unsigned)(v[k] != 0) << k;
  *all_ok = v[FCO_MAX_SYMMETRIC] != 0;
  return FCO_OK;
}

/* Local allocations of one rank; the scratch first, so a later failure can still be agreed on. */
static fco_result_t alloc_rank(fco_comm_t comm) {
  nccl_rank_t* me = nr(comm);
  FCO_CUDA_CHECK(comm, cudaSetDevice(comm->device));
  int* scratch = NULL; /* stored only on success: a failed call leaves it unspecified */
  void* sig = NULL;
  FCO_CUDA_CHECK(comm, cudaMalloc((void**)&scratch, kScratchBytes));
  me->scratch = scratch;
  FCO_CHECK(fco_gpu_rank_create(comm, &me->g));
  char err[FCO_ERRMSG_LEN] = "";
  if (fco_cuda_gate_preload(err) != FCO_OK)
    return fco_set_error(comm, FCO_ERR_CUDA, "rank %d: %s", comm->rank, err);
  NCCL_CHECK(comm, ncclMemAlloc(&sig, kSigAreaBytes));
  me->sig = sig;
  /* Zeroed before registration; peers signal only after the final agree (a barrier). */
  FCO_CUDA_CHECK(comm, cudaMemset(me->sig, 0, kSigAreaBytes));
  return FCO_OK;
}

/* Everything after the NCCL communicators exist, for the n comms this thread drives. */
static fco_result_t setup(fco_comm_t* comms, int n) {
  fco_result_t r = FCO_OK;
  int ok = 1, all_ok = 0;
  for (int i = 0; i < n; i++) {
    fco_result_t x = alloc_rank(comms[i]);
    if (x == FCO_OK) continue;
    if (!nr(comms[i])->scratch) return x; /* cannot even take part in the agreement */
    if (r == FCO_OK) r = x;
    ok = 0;
  }
  FCO_CHECK(agree(comms, n, ok, &all_ok));
  if (!all_ok)
    return r != FCO_OK ? r
                       : fco_set_error(comms[0], FCO_ERR_OUT_OF_MEMORY,
                                       "rank %d: another rank could not allocate its buffers (see "
                                       "its error)", comms[0]->rank);

  auto reg_sig = [&](int i) {
    nccl_rank_t* me = nr(comms[i]);
    return ncclCommWindowRegister(me->nccl, me->sig, kSigAreaBytes, &me->sig_win,
                                  NCCL_WIN_COLL_SYMMETRIC);
  };
  FCO_CHECK(nccl_group(comms, n, "ncclCommWindowRegister (signal area)", reg_sig));
  for (int i = 0; i < n; i++)
    if (!nr(comms[i])->sig_win) /* NCCL answers success and no window when unsupported */
      return fco_set_error(comms[i], FCO_ERR_UNSUPPORTED,
                           "rank %d: NCCL has no symmetric memory on this communicator "
                           "(ncclCommWindowRegister gave no window): the nccl transport needs "
                           "CUDA VMM and load/store (NVLink/P2P) access between all ranks",
                           comms[i]->rank);

  /* 2.28 has no NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER: zero = no barriers, no GIN, no multimem.
   * The struct is copied by NCCL at the call; keep it alive until the group ends anyway. */
  ncclDevCommRequirements reqs[FCO_MAX_GPU_RANKS];
  memset(reqs, 0, sizeof reqs);
  auto create = [&](int i) {
    nccl_rank_t* me = nr(comms[i]);
    return ncclDevCommCreate(me->nccl, &reqs[i], &me->dev_comm);
  };
  FCO_CHECK(nccl_group(comms, n, "ncclDevCommCreate", create));
  for (int i = 0; i < n; i++) nr(comms[i])->have_dev_comm = 1;
  for (int i = 0; i < n; i++) {
    nccl_rank_t* me = nr(comms[i]);
    if (me->dev_comm.lsaSize != comms[i]->nranks)
      return fco_set_error(comms[i], FCO_ERR_UNSUPPORTED,
                           "rank %d: only %d of the %d ranks are load/store accessible (NCCL LSA "
                           "team); the nccl transport needs all ranks in one NVLink domain "
                           "(multi-node is a later transport)", comms[i]->rank,
                           me->dev_comm.lsaSize, comms[i]->nranks);
  }

  for (int i = 0; i < n; i++) {
    fco_result_t x = write_table(comms[i]);
    if (x != FCO_OK && r == FCO_OK) r = x;
    if (x != FCO_OK) ok = 0;
  }
  FCO_CHECK(agree(comms, n, ok, &all_ok));
  if (!all_ok)
    return r != FCO_OK ? r
                       : fco_set_error(comms[0], FCO_ERR_CUDA,
                                       "rank %d: another rank failed to build its peer table (see "
                                       "its error)", comms[0]->rank);
  return FCO_OK;
}

static fco_result_t new_rank_state(fco_comm_t comm) {
  nccl_rank_t* me = (nccl_rank_t*)calloc(1, sizeof *me);
  if (!me) return fco_set_error(comm, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  comm->tp = me;
  return FCO_OK;
}

static fco_result_t nccl_init_rank(fco_comm_t comm, const fco_unique_id_t* id, void* nccl_comm) {
  FCO_CHECK(new_rank_state(comm));
  nccl_rank_t* me = nr(comm);
  if (nccl_comm) {
    ncclComm_t nc = (ncclComm_t)nccl_comm;
    int n = 0, rank = 0, dev = -1;
    NCCL_CHECK(comm, ncclCommCount(nc, &n));
    NCCL_CHECK(comm, ncclCommUserRank(nc, &rank));
    NCCL_CHECK(comm, ncclCommCuDevice(nc, &dev));
    comm->nranks = n;
    comm->rank = rank;
    comm->device = dev;
    if (n > FCO_MAX_GPU_RANKS)
      return fco_set_error(comm, FCO_ERR_UNSUPPORTED,
                           "the adopted NCCL communicator has %d ranks; the nccl transport "
                           "supports at most %d (one NVLink domain)", n, FCO_MAX_GPU_RANKS);
    FCO_CHECK(fco_gpu_use_device(comm, dev));
    me->nccl = nc; /* adopted: never destroyed here */
  } else {
    int dev = comm->cfg.device;
    if (dev < 0) FCO_CUDA_CHECK(comm, cudaGetDevice(&dev));
    FCO_CHECK(fco_gpu_use_device(comm, dev));
    comm->device = dev;
    if (comm->nranks > FCO_MAX_GPU_RANKS)
      return fco_set_error(comm, FCO_ERR_UNSUPPORTED, "nranks %d > %d on the nccl transport",
                           comm->nranks, FCO_MAX_GPU_RANKS);
    ncclUniqueId uid;
    memcpy(&uid, id->internal + offsetof(fco_uid_t, nccl_id), sizeof uid); /* unaligned bytes */
    ncclComm_t nc = NULL;
    NCCL_CHECK(comm, ncclCommInitRank(&nc, comm->nranks, uid, comm->rank));
    me->nccl = nc;
    me->own_nccl = 1;
  }
  return setup(&comm, 1);
}

static fco_result_t nccl_init_all(fco_comm_t* comms, int n, const int* devs) {
  fco_result_t r = FCO_OK;
  int count = 0;
  ncclComm_t ncs[FCO_MAX_GPU_RANKS];
  FCO_CUDA_CHECK_GOTO(comms[0], cudaGetDeviceCount(&count), r, fail);
  for (int i = 0; i < n; i++) {
    if (comms[i]->device >= count) {
      r = fco_set_error(comms[0], FCO_ERR_INVALID_ARGUMENT,
                        "fco_comm_init_all: rank %d needs CUDA device %d but %d are visible (for "
                        "several ranks on one GPU use the local transport)", i, comms[i]->device,
                        count);
      goto fail;
    }
    FCO_CHECK_GOTO(new_rank_state(comms[i]), r, fail);
  }
  {
    ncclResult_t x = ncclCommInitAll(ncs, n, devs);
    if (x != ncclSuccess) {
      r = nccl_fail(comms[0], x, "ncclCommInitAll");
      goto fail;
    }
  }
  for (int i = 0; i < n; i++) {
    nr(comms[i])->nccl = ncs[i];
    nr(comms[i])->own_nccl = 1;
  }
  FCO_CHECK_GOTO(setup(comms, n), r, fail);
  return FCO_OK;
fail:
  fco_gpu_share_error(comms, n); /* comm.c reports comms[0]'s message */
  return r;
}

/* Local release of the data workspace (window deregistration does not wait for peers). */
static fco_result_t release_ws(fco_comm_t comm) {
  fco_result_t r = FCO_OK;
  nccl_rank_t* me = nr(comm);
  if (me->ws_win) NCCL_CHECK_KEEP(comm, ncclCommWindowDeregister(me->nccl, me->ws_win), r);
  me->ws_win = NULL;
  if (me->ws) NCCL_CHECK_KEEP(comm, ncclMemFree(me->ws), r);
  me->ws = NULL;
  comm->ws_bytes = 0;
  return r;
}

/* Before a growth allocates: the old workspace is released, or kept with its window while a
 * graph may use it (gpu_common.h: a captured call used it). A kept window stays registered: a
 * captured NCCL call may have been set up for it. */
static fco_result_t retire_ws(fco_comm_t comm) {
  nccl_rank_t* me = nr(comm);
  int keep = 0;
  FCO_CHECK(fco_gpu_keep_need(comm, &me->g.keep, &keep));
  if (!keep || !me->ws) {
    fco_gpu_keep_add(&me->g.keep, NULL, NULL); /* the new one starts unmarked */
    return release_ws(comm);
  }
  const size_t bytes = fco_ws_alloc_bytes(comm->ws_bytes);
  fco_gpu_keep_add(&me->g.keep, me->ws, (void*)me->ws_win);
  fco_log(comm, "nccl: rank %d keeps %zu bytes of workspace a CUDA graph captured until destroy",
          comm->rank, bytes);
  me->ws = NULL;
  me->ws_win = NULL;
  comm->ws_bytes = 0;
  return FCO_OK;
}

/* The kept workspaces (fco_comm_destroy). */
static fco_result_t release_kept(fco_comm_t comm) {
  fco_result_t r = FCO_OK;
  nccl_rank_t* me = nr(comm);
  for (int i = 0; i < me->g.keep.n; i++) {
    const fco_gpu_kept_ws_t k = me->g.keep.v[i];
    if (k.win) NCCL_CHECK_KEEP(comm, ncclCommWindowDeregister(me->nccl, (ncclWindow_t)k.win), r);
    NCCL_CHECK_KEEP(comm, ncclMemFree(k.ptr), r);
  }
  fco_gpu_keep_clear(&me->g.keep);
  return r;
}

/* The collective shape of workspace growth and fco_mem_alloc, over every rank (this thread: n
 * comms): alloc(c) on each (the buffer stored in the rank's state), agree, register every
 * rank's buffer in one NCCL group (reg(i)), post(c) on each (window check, peer table), agree
 * again — so all ranks end with the new buffer or, on any failure anywhere, all without it:
 * undo(c) on every comm, the first failure's message on all. `what` names the buffer. */
template <class Alloc, class Reg, class Post, class Undo>
static fco_result_t collective_register(fco_comm_t* comms, int n, const char* what, Alloc alloc,
                                        Reg reg, Post post, Undo undo) {
  fco_result_t r = FCO_OK;
  int ok = 1, all_ok = 0;
  char call[96];
  snprintf(call, sizeof call, "allocating the %s", what);
  FCO_CHECK(all_alive(comms, n, call));
  for (int i = 0; i < n && ok; i++) {
    fco_comm_t c = comms[i];
    fco_result_t x = FCO_OK;
    FCO_CUDA_CHECK_KEEP(c, cudaSetDevice(c->device), x);
    /* Work in flight may use the old buffers. Peers' in-flight writes into our old ones stay
     * valid: their mapping keeps the memory alive until they drop it too. */
    if (x == FCO_OK) FCO_CUDA_CHECK_KEEP(c, cudaDeviceSynchronize(), x);
    if (x == FCO_OK) x = alloc(c);
    if (x != FCO_OK) {
      r = x;
      ok = 0;
    }
  }
  FCO_CHECK_GOTO(agree(comms, n, ok, &all_ok), r, fail);
  if (!all_ok) {
    if (r == FCO_OK)
      r = fco_set_error(comms[0], FCO_ERR_OUT_OF_MEMORY,
                        "rank %d: another rank could not allocate its %s (see its error)",
                        comms[0]->rank, what);
    goto fail;
  }
  snprintf(call, sizeof call, "ncclCommWindowRegister (%s)", what);
  FCO_CHECK_GOTO(nccl_group(comms, n, call, reg), r, fail);
  for (int i = 0; i < n; i++) {
    fco_result_t x = post(comms[i]);
    if (x != FCO_OK) {
      if (r == FCO_OK) r = x;
      ok = 0;
    }
  }
  FCO_CHECK_GOTO(agree(comms, n, ok, &all_ok), r, fail);
  if (!all_ok) {
    if (r == FCO_OK)
      r = fco_set_error(comms[0], FCO_ERR_CUDA,
                        "rank %d: another rank failed to register its %s (see its error)",
                        comms[0]->rank, what);
    goto fail;
  }
  return FCO_OK;
fail: {
  char msg[FCO_ERRMSG_LEN];
  memcpy(msg, fco_last_error(NULL), sizeof msg);
  for (int i = 0; i < n; i++) {
    (void)cudaSetDevice(comms[i]->device);
    (void)cudaDeviceSynchronize();
    (void)undo(comms[i]);
  }
  (void)cudaGetLastError();
  fco_set_error(NULL, r, "%s", msg);
  fco_gpu_share_error(comms, n);
  return r;
}
}

/* Workspace growth: every rank quiesces its device, drops its old workspace (keeps it for a
 * graph after a captured call: retire_ws), allocates the new one (+ the LL area, zeroed before
 * any peer can reach it: the agreements are the barrier; src/core/internal.h), registers it
 * and rebuilds its table. */
static fco_result_t nccl_grow(fco_comm_t* comms, int n, size_t bytes) {
  /* Every rank's size in, the largest out: ranks whose needs (or captures: gpu_common.h)
   * differ grow to one size. */
  uint64_t most = 0;
  for (int i = 0; i < n; i++) {
    const uint64_t t = fco_gpu_ws_target(comms[i], &nr(comms[i])->g.keep, bytes);
    if (t > most) most = t;
  }
  FCO_CHECK(gate(comms, n, "workspace growth", most, &most));
  const size_t target = (size_t)most;
  auto alloc = [&](fco_comm_t c) {
    const long long cap = c->cfg.max_workspace_bytes;
    if (cap > 0 && target > (size_t)cap) /* another rank needs more than this one may hold */
      return fco_set_error(c, FCO_ERR_OUT_OF_MEMORY,
                           "rank %d: another rank grows the workspace to %zu bytes per rank, "
                           "over this rank's cfg.max_workspace_bytes = %lld",
                           c->rank, target, cap);
    fco_result_t x = retire_ws(c);
    void* ws = NULL; /* stored only on success: a failed call leaves it unspecified */
    if (x == FCO_OK) {
      ncclResult_t a = ncclMemAlloc(&ws, fco_ws_alloc_bytes(target));
      if (a != ncclSuccess) return nccl_fail(c, a, "ncclMemAlloc (data workspace)");
      nr(c)->ws = ws;
      FCO_CUDA_CHECK_KEEP(c, cudaMemset((char*)ws + fco_ws_ll_offset(target), 0,
                                        fco_ws_ll_bytes(target)), x);
      /* cudaMemset is asynchronous: the zeros land before a peer can store LL words here. */
      if (x == FCO_OK) FCO_CUDA_CHECK_KEEP(c, cudaDeviceSynchronize(), x);
    }
    return x;
  };
  auto reg = [&](int i) {
    nccl_rank_t* me = nr(comms[i]);
    return ncclCommWindowRegister(me->nccl, me->ws, fco_ws_alloc_bytes(target), &me->ws_win,
                                  NCCL_WIN_COLL_SYMMETRIC);
  };
  auto post = [&](fco_comm_t c) {
    if (!nr(c)->ws_win)
      return fco_set_error(c, FCO_ERR_UNSUPPORTED,
                           "rank %d: ncclCommWindowRegister gave no window for the workspace",
                           c->rank);
    c->ws_bytes = target;
    return write_table(c);
  };
  auto undo = [&](fco_comm_t c) { /* consistently no workspace on every rank */
    if (retire_ws(c) != FCO_OK) (void)release_ws(c); /* a kept one stays kept */
    return write_table(c);
  };
  fco_result_t r = collective_register(comms, n, "data workspace", alloc, reg, post, undo);
  if (r == FCO_OK)
    fco_log(comms[0], "nccl: workspace %zu bytes per rank (%zu needed)", target, bytes);
  return r;
}

/* Symmetric buffers (fco_mem_alloc): ncclMemAlloc + a symmetric window each, row k of the
 * table from the window's LSA pointers (as the workspace's). */
__global__ void fill_sym_row_kernel(void** row, ncclWindow_t win, int nranks) {
  const int p = threadIdx.x;
  if (p < nranks) row[p] = ncclGetLsaPointer(win, 0, p);
}

/* Local release of slot k (deregistration does not wait for peers). */
static fco_result_t release_sym(fco_comm_t comm, int k) {
  fco_result_t r = FCO_OK;
  nccl_rank_t* me = nr(comm);
  if (me->sym_win[k]) NCCL_CHECK_KEEP(comm, ncclCommWindowDeregister(me->nccl, me->sym_win[k]), r);
  me->sym_win[k] = NULL;
  if (comm->sym[k].ptr) NCCL_CHECK_KEEP(comm, ncclMemFree(comm->sym[k].ptr), r);
  comm->sym[k].ptr = NULL;
  fco_result_t x = fco_gpu_sym_row(comm, k, NULL, 0);
  return r == FCO_OK ? x : r;
}

static fco_result_t nccl_sym_free(fco_comm_t comm, int k) {
  fco_result_t r = FCO_OK;
  FCO_CUDA_CHECK_KEEP(comm, cudaSetDevice(comm->device), r);
  FCO_CUDA_CHECK_KEEP(comm, cudaDeviceSynchronize(), r);
  fco_result_t x = release_sym(comm, k);
  return r == FCO_OK ? x : r;
}

/* Collective (collective_register): slot k of every rank gets a zeroed buffer and its row. */
static fco_result_t nccl_sym_alloc(fco_comm_t* comms, int n, int k, size_t bytes) {
  auto alloc = [&](fco_comm_t c) {
    void* p = NULL;
    ncclResult_t a = ncclMemAlloc(&p, bytes);
    if (a != ncclSuccess) return nccl_fail(c, a, "ncclMemAlloc (fco_mem_alloc)");
    c->sym[k].ptr = p;
    fco_result_t x = FCO_OK;
    FCO_CUDA_CHECK_KEEP(c, cudaMemset(p, 0, bytes), x);
    if (x == FCO_OK) FCO_CUDA_CHECK_KEEP(c, cudaDeviceSynchronize(), x);
    return x;
  };
  auto reg = [&](int i) {
    return ncclCommWindowRegister(nr(comms[i])->nccl, comms[i]->sym[k].ptr, bytes,
                                  &nr(comms[i])->sym_win[k], NCCL_WIN_COLL_SYMMETRIC);
  };
  auto post = [&](fco_comm_t c) {
    if (!nr(c)->sym_win[k])
      return fco_set_error(c, FCO_ERR_UNSUPPORTED,
                           "rank %d: ncclCommWindowRegister gave no window for fco_mem_alloc",
                           c->rank);
    fco_result_t x = FCO_OK;
    FCO_CUDA_CHECK_KEEP(c, cudaSetDevice(c->device), x);
    if (x != FCO_OK) return x;
    fill_sym_row_kernel<<<1, FCO_MAX_GPU_RANKS>>>(c->sym_dev + (size_t)k * FCO_MAX_GPU_RANKS,
                                                  nr(c)->sym_win[k], c->nranks);
    FCO_CUDA_CHECK_KEEP(c, cudaGetLastError(), x);
    if (x == FCO_OK) FCO_CUDA_CHECK_KEEP(c, cudaDeviceSynchronize(), x);
    return x;
  };
  auto undo = [&](fco_comm_t c) { return release_sym(c, k); };
  return collective_register(comms, n, "symmetric buffer", alloc, reg, post, undo);
}

static fco_result_t nccl_run(fco_op_t* ops, int n) {
  for (int i = 1; i < n; i++) FCO_CHECK(fco_op_check_same(&ops[0], &ops[i]));
  /* One launch per GPU: ranks are on different devices, so their spinning kernels run side by
   * side and the host never waits between launches. Several ranks in one thread: NCCL calls
   * (baselines) are grouped so they do not wait for each other; a lone rank needs no group. */
  ncclComm_t ncs[FCO_MAX_GPU_RANKS];
  fco_gpu_launch_t ls[FCO_MAX_GPU_RANKS]; /* kept for fco_cuda_run_after_group */
  for (int i = 0; i < n; i++) {
    fco_comm_t c = ops[i].comm;
    fco_gpu_launch_t& l = ls[i];
    ncs[i] = nr(c)->nccl;
    memset(&l, 0, sizeof l);
    l.transport = FCO_TRANSPORT_NCCL;
    l.num_local = 1;
    l.nranks = c->nranks;
    l.stream = ops[i].stream;
    l.plan = c->last_plan;
    l.r[0].op = &ops[i];
    l.r[0].dev = nr(c)->g.dev;
    l.r[0].ws = nr(c)->ws;
    l.r[0].nccl_comm = nr(c)->nccl;
  }
  if (n > 1) {
    /* Refusals that look at every rank, before any rank's NCCL call is queued (cuda_ops.h). */
    char err[FCO_ERRMSG_LEN];
    err[0] = '\0';
    fco_result_t x = fco_cuda_check_batch(ls, n, err);
    if (x != FCO_OK) {
      char d[160];
      fco_op_describe(&ops[0], d, sizeof d);
      return fco_set_error(ops[0].comm, x, "%s: %s", d, err[0] ? err : "refused");
    }
    ncclResult_t e = ncclGroupStart();
    if (e != ncclSuccess) return nccl_fail(ops[0].comm, e, "ncclGroupStart");
  }
  fco_result_t first = FCO_OK;
  int failed = 0; /* the rank whose launch failed (the group is cancelled through its comm) */
  for (int i = 0; i < n && first == FCO_OK; i++) {
    fco_comm_t c = ops[i].comm;
    fco_gpu_launch_t& l = ls[i];
    failed = i;
    cudaError_t ce = cudaSetDevice(c->device);
    if (ce != cudaSuccess) {
      first = fco_cuda_fail(c, ce, "cudaSetDevice", __FILE__, __LINE__);
      break;
    }
    fco_gpu_keep_note(&nr(c)->g.keep, ops[i].stream); /* a graph's call: growth keeps the ws */
    char err[FCO_ERRMSG_LEN];
    err[0] = '\0';
    int mid_call = 0;
    l.mid_call = &mid_call;
    fco_result_t x = fco_cuda_run(&l, err);
    l.mid_call = NULL; /* ls[i] lives on for fco_cuda_run_after_group */
    if (x != FCO_OK) {
      char d[160];
      fco_op_describe(&ops[i], d, sizeof d);
      first = fco_set_error(c, x, "rank %d: %s: %s", c->rank, d, err[0] ? err : "launch failed");
      if (mid_call) fco_gpu_mid_call_failed(c, x);
    }
  }
  if (n > 1 && first != FCO_OK) {
    /* A rank failed after the ranks before it queued their NCCL calls (impl 0's send / recv):
     * ending the group would start those without their peers' (a hang). An NCCL call that
     * fails its argument check inside a group makes ncclGroupEnd fail and drop everything
     * queued in it: a send to peer -1. fco_cuda_check_batch refuses bad arguments before
     * anything is queued; this is for failures no check foresees (a launch, cuBLAS), and a
     * group dropped before its first send to a peer was set up can leave NCCL's connection
     * to it half made (audit56 R1: the world's next call may hang in NCCL). */
    const ncclResult_t x = ncclSend(nr(ops[failed].comm)->ws, 1, ncclInt8, -1, ncs[failed],
                                    (cudaStream_t)ops[failed].stream);
    (void)x; /* ncclInvalidArgument, by design */
  }
  ncclResult_t e = n > 1 ? ncclGroupEnd() : ncclSuccess; /* always balances the group */
  e = settle(ncs, n, e);
  if (e != ncclSuccess && first == FCO_OK) first = nccl_fail(ops[0].comm, e, fco_op_name(ops[0].kind));
  /* Work that must follow the NCCL calls just issued (e.g. a permute after send/recv). */
  for (int i = 0; i < n && first == FCO_OK; i++) {
    fco_comm_t c = ops[i].comm;
    cudaError_t ce = cudaSetDevice(c->device);
    if (ce != cudaSuccess) {
      first = fco_cuda_fail(c, ce, "cudaSetDevice", __FILE__, __LINE__);
      break;
    }
    char err[FCO_ERRMSG_LEN];
    err[0] = '\0';
    fco_result_t x = fco_cuda_run_after_group(&ls[i], err);
    if (x != FCO_OK) {
      char d[160];
      fco_op_describe(&ops[i], d, sizeof d);
      first = fco_set_error(c, x, "rank %d: %s: %s", c->rank, d, err[0] ? err : "launch failed");
    }
  }
  return first;
}

static fco_result_t nccl_destroy(fco_comm_t comm) {
  nccl_rank_t* me = nr(comm);
  if (!me) return FCO_OK;
  fco_result_t r = FCO_OK;
  /* Our kernels' waits are bounded, so the sync ends even after a timeout. Whether a kernel
   * failed is read after it (before session 55 it was read first: a timeout recorded during
   * the sync still led to ncclCommDestroy, which may wait for a peer that is gone). */
  const volatile fco_async_err_t* e = me->g.err_host;
  if (comm->device >= 0) {
    FCO_CUDA_CHECK_KEEP(comm, cudaSetDevice(comm->device), r);
    FCO_CUDA_CHECK_KEEP(comm, cudaDeviceSynchronize(), r);
  }
  const int failed = comm->async_error != FCO_OK || (e && e->code != 0) || r != FCO_OK;
  /* Reverse order of allocation. */
  fco_result_t x = fco_sym_free_all(comm);
  if (r == FCO_OK) r = x;
  x = release_ws(comm);
  if (r == FCO_OK) r = x;
  x = release_kept(comm);
  if (r == FCO_OK) r = x;
  if (me->have_dev_comm) NCCL_CHECK_KEEP(comm, ncclDevCommDestroy(me->nccl, &me->dev_comm), r);
  me->have_dev_comm = 0;
  if (me->sig_win) NCCL_CHECK_KEEP(comm, ncclCommWindowDeregister(me->nccl, me->sig_win), r);
  me->sig_win = NULL;
  if (me->sig) NCCL_CHECK_KEEP(comm, ncclMemFree(me->sig), r);
  me->sig = NULL;
  x = fco_gpu_rank_destroy(comm, &me->g);
  if (r == FCO_OK) r = x;
  if (me->scratch) FCO_CUDA_CHECK_KEEP(comm, cudaFree(me->scratch), r);
  me->scratch = NULL;
  if (me->nccl && me->own_nccl) {
    /* After a device-side failure a peer may be gone: abort instead of a destroy that may wait. */
    if (failed) NCCL_CHECK_KEEP(comm, ncclCommAbort(me->nccl), r);
    else NCCL_CHECK_KEEP(comm, ncclCommDestroy(me->nccl), r);
  }
  me->nccl = NULL;
  free(me);
  comm->tp = NULL;
  return r;
}

static fco_result_t nccl_poll_error(fco_comm_t comm) {
  return comm->tp ? fco_gpu_poll_error(comm, &nr(comm)->g) : FCO_OK;
}

extern "C" const fco_transport_ops_t fco_transport_nccl = {
    /* name */ "nccl",
    /* world_grows_together */ 1,
    /* init_rank */ nccl_init_rank,
    /* init_all */ nccl_init_all,
    /* destroy */ nccl_destroy,
    /* grow */ nccl_grow,
    /* run */ nccl_run,
    /* poll_error */ nccl_poll_error,
    /* capturing */ fco_gpu_capturing,
    /* sym_alloc */ nccl_sym_alloc,
    /* sym_free */ nccl_sym_free,
    /* sym_slots */ nccl_sym_slots,
};
