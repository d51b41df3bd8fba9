/*
 * cpu.c — the cpu transport: ranks are processes (fco_comm_init) or threads of one process
 * (fco_comm_init_all) of one host, over POSIX shared memory. Every rank, thread or process,
 * maps the segments itself, so both cases run the same code.
 *
 * Segments (named from the unique id's nonce; each name is unlinked as soon as every rank has
 * mapped it, so nothing is left in /dev/shm, also when a step fails):
 *   "/fco-<nonce>"         control: bootstrap words, per-rank call records, signal flags
 *   "/fco-<nonce>-w<gen>"  data workspace of generation gen: P · stride bytes, rank p's part at
 *                          p · stride; a new generation per collective growth
 *
 * Every collective (an op or a growth) starts with a record: each rank publishes what it is
 * about to do (op kind, impl, dtype, count; or growth bytes) under its sequence number `seq`,
 * then reads every peer's record for the same seq. Disagreement fails on every rank with
 * FCO_ERR_INVALID_ARGUMENT naming both values, before anything is written. This is also a
 * barrier: when any rank starts call seq, every rank has finished seq-1. seq is the epoch: the
 * value ops write into signal flags, so flags only grow and never need resetting.
 *
 * Giving up: a rank that abandons call seq on a timeout (in the record exchange, the growth's
 * acknowledgements or inside the operator) is unusable from then on (its sticky async error)
 * and sets FCO_CPU_GAVE_UP in its record word `posted` (after `why`: stage, code, the rank it
 * waited for, the first rank to give up). Every wait for that rank (a record, an ack, a signal)
 * watches the bit, so a peer that comes late to that call, or waits for the rank in it, fails at
 * once with its code, naming it, instead of waiting a second FCO_TIMEOUT_MS and blaming it for a
 * silence; such a peer gives up in turn (stage "peer"), so a third rank learns it too. Costs
 * nothing where the peer is there: the bit lives in the word already read; `why` is read only
 * once the bit is seen. (Without it the late peer passed the record exchange, since the record
 * was posted, and timed out in the ack or the operator, naming a rank that had long left.)
 * A rank destroyed (fco_comm_destroy) marks itself the same way (stage "destroyed",
 * FCO_ERR_INVALID_USAGE as a world's refusal of calls with a destroyed rank), at the call after
 * its last one: a peer still inside that last call completes it (all the rank stored for it came
 * before the bit), and the peers' next call fails at once, naming it (mark_destroyed).
 *
 * Threads of one process drive several ranks (a "world"): run/grow with n > 1 execute each
 * rank in its own thread (n-1 pthreads + the caller).
 *
 * Test hooks (not an API), as the local transport's, read at every op or growth:
 *   FCO_FAULT_SKIP_RANK=r  rank r returns FCO_OK from the op after its record (the agreement)
 *                          without running it — it neither writes nor signals — so its peers
 *                          time out inside the operator, in fco_cpu_wait, as if rank r had died
 *                          mid-call (a rank that never calls times out earlier, in the record
 *                          exchange; one destroyed after skipping ends their wait at once).
 *                          Used by tests/test_timeout.c and tests/test_peer_destroyed.c.
 *   FCO_FAULT_GROW_FAIL=r  rank r's workspace growth fails after its record as if /dev/shm were
 *                          full (FCO_ERR_OUT_OF_MEMORY, nothing mapped); its peers map theirs,
 *                          see its failure in the ack and report its code, naming it. Used by
 *                          tests/test_grow_fail.c.
 *   FCO_FAULT_GROW_STALL=r rank r's workspace growth maps its segment and then stalls for its
 *                          FCO_TIMEOUT_MS + 300 ms before it acks, as a rank whose mapping
 *                          hangs: its peers give up waiting for its ack (TIMEOUT, the gave-up
 *                          bit posted), and its next call reads their bit at once. Used by
 *                          tests/test_grow_fail.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/internal.h"
#include "../cpu/cpu.h"

/* ---- control segment layout ------------------------------------------------------------ */
enum { kRecGrow = 100 }; /* record kinds: fco_op_kind_t values, or a growth */

typedef struct {
  uint64_t seq;
  int32_t what;   /* fco_op_kind_t or kRecGrow */
  int32_t impl;
  int64_t shape[FCO_OP_SHAPE_MAX]; /* op: fco_op_t.shape, what every rank must agree on */
  uint64_t bytes; /* op: workspace needed; growth: workspace bytes per rank */
  /* growth: the kind of the operator call that needs it (its impl and shape above; compared
   * only to name the field when the bytes differ), or -1 for fco_comm_reserve */
  int32_t cause;
} rec_t;

typedef struct {
  /* seq of the last record published (release), | FCO_CPU_GAVE_UP once this rank gave up */
  _Alignas(128) _Atomic uint64_t posted;
  /* growth: seq once mapped; if not, | kAckFail | its fco_result_t << kAckCodeShift */
  _Atomic uint64_t ack;
  _Atomic uint64_t why;                   /* why it gave up (give_up), written before the bit */
  rec_t rec[2];                           /* by seq parity: a peer is at most one ahead   */
} rank_ctrl_t;

static const uint64_t kAckFail = 1ull << 63;
enum { kAckCodeShift = 48 };
/* An ack's seq bits: 2^48 collectives are about 9 years at one a microsecond. */
static const uint64_t kAckSeq = (1ull << kAckCodeShift) - 1;

/* Where a rank gave up (the `why` word's stage); kGaveUpDestroyed: fco_comm_destroy. */
enum {
  kGaveUpRecord = 1,
  kGaveUpGrowth = 2,
  kGaveUpOp = 3,
  kGaveUpPeer = 4,
  kGaveUpDestroyed = 5,
};

/* Bootstrap words; zero in a fresh segment. */
typedef struct {
  _Atomic uint64_t nranks_word; /* kValid | nranks << 8 | rank of the first joiner          */
  _Atomic uint64_t joined;      /* bit per rank                                              */
  _Atomic uint64_t abort;       /* first failure: kValid | kind << 32 | rank << 16 | value   */
} hdr_t;

static const uint64_t kValid = 1ull << 62;
enum { kAbortNranks = 1, kAbortDup = 2, kAbortTimeout = 3 };

typedef struct {
  _Alignas(4096) hdr_t hdr;
  _Alignas(4096) rank_ctrl_t rank[FCO_MAX_RANKS];
  _Alignas(4096) _Atomic uint64_t sig[FCO_MAX_RANKS][FCO_MAX_RANKS][FCO_CPU_SIG_SLOTS];
} ctrl_t;

/* Fixed, whatever nranks says, so ranks that disagree on nranks still map the same thing. */
#define CTRL_BYTES sizeof(ctrl_t)
/* Bytes touched with nranks ranks (signal rows of dst < nranks): reserved up front. */
#define CTRL_USED(nranks) \
  (offsetof(ctrl_t, sig) + (size_t)(nranks) * FCO_MAX_RANKS * FCO_CPU_SIG_SLOTS * sizeof(uint64_t))

/* ---- per-rank state ---------------------------------------------------------------------- */
typedef struct {
  uint64_t nonce;
  char name[48];      /* control segment name */
  int linked;         /* this rank created/opened `name` and has not unlinked it yet */
  int claimed;        /* this rank set its bit in `joined`: its rank_ctrl_t is its own */
  ctrl_t* ctrl;
  uint64_t seq;       /* collectives issued on this communicator (the epoch) */
  char* ws;           /* workspace mapping (every rank's part), NULL before the first growth */
  size_t ws_map, ws_stride;
  uint32_t gen;       /* workspace generation */
} cpu_rank_t;

static fco_result_t sys_error(fco_comm_t comm, int err, const char* what, const char* name) {
  fco_result_t code = err == ENOSPC || err == ENOMEM ? FCO_ERR_OUT_OF_MEMORY : FCO_ERR_SYSTEM;
  return fco_set_error(comm, code, "cpu transport: %s(%s) failed: %s%s", what, name,
                       strerror(err),
                       code == FCO_ERR_OUT_OF_MEMORY ? " (is /dev/shm large enough?)" : "");
}

/* Reserve tmpfs pages now: running out later would be SIGBUS on first touch, not an error. */
static int reserve_pages(int fd, size_t bytes) {
#ifdef __linux__
  if (bytes && fallocate(fd, 0, 0, (off_t)bytes) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)
    return errno;
#else
  (void)fd;
  (void)bytes;
#endif
  return 0;
}

/* Create-or-open `name`, size it to `size` (reserving `used` bytes), map it. */
static fco_result_t shm_map(fco_comm_t comm, const char* name, size_t size, size_t used,
                            void** out) {
  *out = NULL;
  int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
  if (fd < 0) return sys_error(comm, errno, "shm_open", name);
  int err = 0;
  const char* what = "ftruncate";
  if (ftruncate(fd, (off_t)size) != 0) err = errno;
  if (!err && (err = reserve_pages(fd, used)) != 0) what = "fallocate";
  void* p = MAP_FAILED;
  if (!err) {
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      err = errno;
      what = "mmap";
    }
  }
  close(fd);
  if (err) return sys_error(comm, err, what, name);
  *out = p;
  return FCO_OK;
}

static void shm_unlink_quiet(const char* name) { (void)shm_unlink(name); /* ENOENT: a peer did */ }

/* ---- running one function per rank in threads ------------------------------------------- */
typedef struct job {
  fco_comm_t comm;
  fco_op_t* op;
  size_t bytes;
  uint64_t nonce;
  fco_result_t (*fn)(struct job*);
  fco_result_t r;
  _Atomic int* gate; /* 0 wait, 1 go, -1 abandon (a thread could not be started) */
} job_t;

static void* job_thread(void* arg) {
  job_t* j = (job_t*)arg;
  int g;
  while ((g = atomic_load_explicit(j->gate, memory_order_acquire)) == 0) sched_yield();
  j->r = g > 0 ? j->fn(j) : FCO_ERR_SYSTEM;
  return NULL;
}

/* jobs[0] runs on the caller; returns the first failure in rank order, its message left in
 * the failing comm, in jobs[0]'s comm and in this thread's slot (fco_last_error(NULL)). */
static fco_result_t run_jobs(job_t* jobs, int n) {
  if (n == 1) return jobs[0].fn(&jobs[0]);
  _Atomic int gate = 0;
  pthread_t th[FCO_MAX_RANKS];
  int started = 1, err = 0;
  for (int i = 0; i < n; i++) jobs[i].gate = &gate;
  for (int i = 1; i < n && !err; i++) {
    err = pthread_create(&th[i], NULL, job_thread, &jobs[i]);
    if (!err) started++;
  }
  atomic_store_explicit(&gate, err ? -1 : 1, memory_order_release);
  if (!err) jobs[0].r = jobs[0].fn(&jobs[0]);
  for (int i = 1; i < started; i++) pthread_join(th[i], NULL);
  if (err)
    return fco_set_error(jobs[0].comm, FCO_ERR_SYSTEM,
                         "cpu transport: pthread_create for rank %d failed: %s", started,
                         strerror(err));
  for (int i = 0; i < n; i++) {
    if (jobs[i].r == FCO_OK) continue;
    char msg[FCO_ERRMSG_LEN];
    memcpy(msg, jobs[i].comm->last_error, sizeof msg);
    fco_set_error(jobs[0].comm, jobs[i].r, "%s", msg);
    fco_set_error(jobs[i].comm, jobs[i].r, "%s", msg); /* also this thread's slot */
    return jobs[i].r;
  }
  return FCO_OK;
}

/* ---- bootstrap --------------------------------------------------------------------------- */
static uint64_t make_nonce(void) {
  static _Atomic uint64_t counter;
  uint64_t x = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &x, sizeof x) != (ssize_t)sizeof x) x = 0;
    close(fd);
  }
  x ^= fco_cpu_now_ns() * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 32) ^
       atomic_fetch_add(&counter, 1) * 0xbf58476d1ce4e5b9ull;
  return x ? x : 1;
}

static void set_abort(hdr_t* h, int kind, int rank, int value) {
  uint64_t want = kValid | (uint64_t)kind << 32 | (uint64_t)rank << 16 | (uint64_t)(value & 0xffff);
  uint64_t zero = 0;
  atomic_compare_exchange_strong(&h->abort, &zero, want); /* the first failure wins */
}

static fco_result_t abort_error(fco_comm_t comm, uint64_t a) {
  int kind = (int)((a >> 32) & 0xff), rank = (int)((a >> 16) & 0xffff), value = (int)(a & 0xffff);
  switch (kind) {
    case kAbortNranks:
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "fco_comm_init: nranks mismatch: rank %d joined with nranks %d, this "
                           "rank (%d) has nranks %d (every rank must pass the same nranks)",
                           rank, value, comm->rank, comm->nranks);
    case kAbortDup:
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "fco_comm_init: rank %d was claimed by two callers with the same id "
                           "(every rank number must be used once)", rank);
    default:
      return fco_set_error(comm, FCO_ERR_TIMEOUT,
                           "fco_comm_init: rank %d gave up waiting for the others to join (timeout "
                           "%d ms)", rank, comm->cfg.timeout_ms);
  }
}

/* Join the control segment of `nonce` as comm->rank; returns once all nranks joined. */
static fco_result_t join(fco_comm_t comm, uint64_t nonce) {
  cpu_rank_t* tp = (cpu_rank_t*)calloc(1, sizeof *tp);
  if (!tp) return fco_set_error(comm, FCO_ERR_OUT_OF_MEMORY, "cpu transport: out of memory");
  comm->tp = tp;
  comm->device = -1;
  tp->nonce = nonce;
  snprintf(tp->name, sizeof tp->name, "/fco-%016llx", (unsigned long long)nonce);
  int me = comm->rank, P = comm->nranks;
  void* map;
  tp->linked = 1; /* shm_map may create it even when it fails later */
  fco_result_t r = shm_map(comm, tp->name, CTRL_BYTES, CTRL_USED(P), &map);
  if (r != FCO_OK) goto fail;
  tp->ctrl = (ctrl_t*)map;
  hdr_t* h = &tp->ctrl->hdr;

  uint64_t mine = kValid | (uint64_t)P << 8 | (uint64_t)me, first = 0;
  if (!atomic_compare_exchange_strong(&h->nranks_word, &first, mine) &&
      (int)((first >> 8) & 0xff) != P) {
    set_abort(h, kAbortNranks, me, P);
    r = fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                      "fco_comm_init: nranks mismatch: this rank (%d) has nranks %d, but rank %d "
                      "joined first with nranks %d (every rank must pass the same nranks)",
                      me, P, (int)(first & 0xff), (int)((first >> 8) & 0xff));
    goto fail;
  }
  uint64_t bit = 1ull << me, all = P == 64 ? ~0ull : (1ull << P) - 1;
  if (atomic_fetch_or(&h->joined, bit) & bit) {
    set_abort(h, kAbortDup, me, 0);
    r = fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                      "fco_comm_init: rank %d was already taken by another caller with the same "
                      "id (every rank number must be used once)", me);
    goto fail;
  }
  tp->claimed = 1;
  fco_cpu_backoff_t b;
  fco_cpu_backoff_init(&b, comm->cfg.timeout_ms);
  /* the deadline is read before the loads (fco_cpu_await's order): a rank that joins just as
   * the deadline passes has joined */
  for (int expired = 0;; expired = fco_cpu_backoff(&b)) {
    uint64_t a = atomic_load_explicit(&h->abort, memory_order_acquire);
    if (a) {
      r = abort_error(comm, a);
      goto fail;
    }
    uint64_t j = atomic_load_explicit(&h->joined, memory_order_acquire);
    if ((j & all) == all) break;
    if (expired) {
      set_abort(h, kAbortTimeout, me, 0);
      char missing[160] = "";
      size_t len = 0;
      for (int p = 0; p < P && len < sizeof missing - 16; p++)
        if (!(j & (1ull << p)))
          len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? " " : "", p);
      r = fco_set_error(comm, FCO_ERR_TIMEOUT,
                        "fco_comm_init: only %d of %d ranks joined within %d ms (missing ranks: "
                        "%s%s); every rank must call fco_comm_init with the same id",
                        __builtin_popcountll(j & all), P, comm->cfg.timeout_ms, missing,
                        len >= sizeof missing - 16 ? " ..." : "");
      goto fail;
    }
  }
  shm_unlink_quiet(tp->name); /* everyone has mapped it */
  tp->linked = 0;
  return FCO_OK;
fail:
  if (tp->linked) shm_unlink_quiet(tp->name);
  tp->linked = 0;
  return r;
}

static fco_result_t cpu_init_rank(fco_comm_t comm, const fco_unique_id_t* id, void* nccl_comm) {
  if (nccl_comm || !id)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "cpu transport: needs a unique id (it cannot adopt an NCCL communicator)");
  return join(comm, fco_uid_read(id).nonce);
}

static fco_result_t join_job(job_t* j) { return join(j->comm, j->nonce); }

static fco_result_t cpu_init_all(fco_comm_t* comms, int n, const int* devs) {
  (void)devs;
  job_t jobs[FCO_MAX_RANKS];
  uint64_t nonce = make_nonce();
  for (int i = 0; i < n; i++)
    jobs[i] = (job_t){.comm = comms[i], .nonce = nonce, .fn = join_job};
  return run_jobs(jobs, n);
}

/* ---- giving up (the file comment) --------------------------------------------------------- */
static _Atomic uint64_t* posted_of(fco_comm_t comm, int p) {
  return &((cpu_rank_t*)comm->tp)->ctrl->rank[p].posted;
}

/* `why` (stage, code, origin, waited), then the bit at call `at` in this rank's record word
 * (release: a peer that sees the bit sees `why`) — unless the bit is there already. */
static void post_gone(fco_comm_t comm, int stage, int waited, int origin, fco_result_t code,
                      uint64_t at) {
  rank_ctrl_t* mine = &((cpu_rank_t*)comm->tp)->ctrl->rank[comm->rank];
  if (atomic_load_explicit(&mine->posted, memory_order_relaxed) & FCO_CPU_GAVE_UP) return;
  const uint64_t why = (uint64_t)stage << 48 | (uint64_t)(code & 0xff) << 32 |
                       (uint64_t)(origin & 0xffff) << 16 | (uint64_t)(waited & 0xffff);
  atomic_store_explicit(&mine->why, why, memory_order_relaxed);
  atomic_store_explicit(&mine->posted, at | FCO_CPU_GAVE_UP, memory_order_release);
}

/* This rank abandons its current call (tp->seq) for good: the sticky error `code`, then `why`
 * and the bit for the peers (release: a peer that sees the bit sees `why`). waited: the rank it
 * waited for (-1: none known); origin: the first rank to give up (this one, or one before it).
 * Once only. */
static void give_up(fco_comm_t comm, int stage, int waited, int origin, fco_result_t code) {
  comm->async_error = code;
  post_gone(comm, stage, waited, origin, code, ((cpu_rank_t*)comm->tp)->seq);
}

/* Rank p's record word `v` holds the bit: this rank gives up too, with p's code, and says why
 * (`what`, call seq: this rank's call). */
static fco_result_t gave_up_error(fco_comm_t comm, const char* what, uint64_t seq, int p,
                                  uint64_t v) {
  cpu_rank_t* tp = (cpu_rank_t*)comm->tp;
  /* after the acquire load that saw the bit, which `why` was written before */
  const uint64_t why = atomic_load_explicit(&tp->ctrl->rank[p].why, memory_order_acquire);
  const int stage = (int)(why >> 48 & 0xff), origin = (int)(why >> 16 & 0xffff);
  const int waited = (int)(why & 0xffff) < comm->nranks ? (int)(why & 0xffff) : -1;
  fco_result_t code = (fco_result_t)(why >> 32 & 0xff);
  if (code <= FCO_OK || code >= FCO_NUM_RESULTS) code = FCO_ERR_TIMEOUT;
  const int first = stage == kGaveUpPeer && origin < comm->nranks ? origin : p;
  give_up(comm, kGaveUpPeer, p, first, code);
  /* A destroyed rank behind it: p itself, or the first to give up, whose words p read (acquire)
   * before its own bit, so they are visible here too. */
  int gone = stage == kGaveUpDestroyed ? p : -1;
  uint64_t gone_v = v;
  if (stage == kGaveUpPeer && first != p) {
    const rank_ctrl_t* f = &tp->ctrl->rank[first];
    if ((atomic_load_explicit(&f->why, memory_order_acquire) >> 48 & 0xff) == kGaveUpDestroyed) {
      gone = first;
      gone_v = atomic_load_explicit(&f->posted, memory_order_acquire);
    }
  }
  if (gone >= 0) {
    /* its bit is at the call after its last one (mark_destroyed) */
    const uint64_t last = (gone_v & ~FCO_CPU_GAVE_UP) - 1;
    char after[48], via[64] = "";
    if (last) snprintf(after, sizeof after, "after its call %llu", (unsigned long long)last);
    else snprintf(after, sizeof after, "before its first call");
    if (gone != p) snprintf(via, sizeof via, " (rank %d gave up because of it)", p);
    return fco_set_error(comm, code,
                         "%s (call %llu): rank %d was destroyed (fco_comm_destroy) %s%s, and "
                         "takes part in no further call; the communicator is unusable, destroy it",
                         what, (unsigned long long)seq, gone, after, via);
  }
  char call[40], whom[40], reason[160];
  const uint64_t at = v & ~FCO_CPU_GAVE_UP;
  if (at == seq) snprintf(call, sizeof call, "this call");
  else snprintf(call, sizeof call, "call %llu", (unsigned long long)at);
  snprintf(whom, sizeof whom, "rank %d%s", waited, waited == comm->rank ? " (this rank)" : "");
  switch (stage) {
    case kGaveUpRecord:
      snprintf(reason, sizeof reason, "after waiting for the matching call of %s until its "
               "timeout", whom);
      break;
    case kGaveUpGrowth:
      snprintf(reason, sizeof reason, "after waiting for %s to map the new workspace until its "
               "timeout", whom);
      break;
    case kGaveUpOp:
      if (waited >= 0)
        snprintf(reason, sizeof reason, "after waiting inside the operator for %s's signal until "
                 "its timeout", whom);
      else
        snprintf(reason, sizeof reason, "inside the operator");
      break;
    default:
      if (first == waited || waited < 0)
        snprintf(reason, sizeof reason, "because rank %d had given up", first);
      else
        snprintf(reason, sizeof reason, "because %s had (the first to give up: rank %d)", whom,
                 first);
      break;
  }
  return fco_set_error(comm, code,
                       "%s (call %llu): rank %d gave up on %s %s%s%s%s, and takes part in no "
                       "further call; the communicator is unusable, destroy it",
                       what, (unsigned long long)seq, p, call, reason,
                       code == FCO_ERR_TIMEOUT ? "" : " (", /* a code other than the usual */
                       code == FCO_ERR_TIMEOUT ? "" : fco_result_string(code),
                       code == FCO_ERR_TIMEOUT ? "" : ")");
}

/* ---- records: agreement + barrier at the start of every collective ----------------------- */
/* A record as an op (for the registry's describe / check_same), so messages name fields. */
static fco_op_t rec_op(const rec_t* r, fco_comm_t comm) {
  fco_op_t op;
  memset(&op, 0, sizeof op);
  op.kind = (fco_op_kind_t)r->what;
  op.impl = r->impl;
  op.comm = comm;
  memcpy(op.shape, r->shape, sizeof op.shape);
  return op;
}

static void describe(const rec_t* r, fco_comm_t comm, char* buf, size_t len) {
  if (r->what == kRecGrow) {
    snprintf(buf, len, "grows the workspace to %llu bytes per rank", (unsigned long long)r->bytes);
  } else {
    fco_op_t op = rec_op(r, comm);
    char d[160];
    fco_op_describe(&op, d, sizeof d);
    snprintf(buf, len, "called %s", d);
  }
}

static int rec_equal(const rec_t* a, const rec_t* b) {
  if (a->what == kRecGrow) return b->what == kRecGrow && a->bytes == b->bytes;
  return a->what == b->what && a->impl == b->impl &&
         !memcmp(a->shape, b->shape, sizeof a->shape) && a->bytes == b->bytes;
}

/* The operator call behind a record (an op's own, or the one a growth is for): 0 when none. */
static int rec_call(const rec_t* r, fco_comm_t comm, fco_op_t* op) {
  if (r->what == kRecGrow && r->cause < 0) return 0;
  rec_t v = *r;
  if (r->what == kRecGrow) v.what = r->cause;
  *op = rec_op(&v, comm);
  return 1;
}

/* Publish this rank's record for the next collective, then check every peer's. */
static fco_result_t agree(fco_comm_t comm, rec_t rec, const char* what) {
  cpu_rank_t* tp = (cpu_rank_t*)comm->tp;
  ctrl_t* ctrl = tp->ctrl;
  int me = comm->rank, P = comm->nranks;
  uint64_t seq = ++tp->seq;
  rec.seq = seq;
  ctrl->rank[me].rec[seq & 1] = rec;
  atomic_store_explicit(&ctrl->rank[me].posted, seq, memory_order_release);
  /* Every peer's record, all watched at once: a peer that gave up on this call or an earlier one
   * ends the wait whichever peer is still missing. A peer's bit with a later call (it is ahead
   * of us and gave up there) leaves its record of this call valid. Where every record is there,
   * one acquire load each, as before; the clock is read only once one is missing, and the
   * deadline before the loads (fco_cpu_await's order). */
  uint64_t missing = (P == 64 ? ~0ull : (1ull << P) - 1) & ~(1ull << me);
  fco_cpu_backoff_t bo;
  for (int expired = 0, waiting = 0;;) {
    int late = -1; /* the first peer still missing, and its word */
    uint64_t late_v = 0;
    for (uint64_t m = missing; m; m &= m - 1) {
      const int p = __builtin_ctzll(m);
      const uint64_t v = atomic_load_explicit(&ctrl->rank[p].posted, memory_order_acquire);
      if ((v & FCO_CPU_GAVE_UP) && (v & ~FCO_CPU_GAVE_UP) <= seq)
        return gave_up_error(comm, what, seq, p, v);
      if ((v & ~FCO_CPU_GAVE_UP) >= seq) {
        missing &= ~(1ull << p);
      } else if (late < 0) {
        late = p;
        late_v = v;
      }
    }
    if (!missing) break;
    if (expired) {
      give_up(comm, kGaveUpRecord, late, me, FCO_ERR_TIMEOUT);
      return fco_set_error(comm, FCO_ERR_TIMEOUT,
                           "%s (call %llu): rank %d did not make the matching call within %d ms "
                           "(it is at call %llu); the communicator is unusable, destroy it",
                           what, (unsigned long long)seq, late, comm->cfg.timeout_ms,
                           (unsigned long long)late_v);
    }
    if (!waiting) {
      fco_cpu_backoff_init(&bo, comm->cfg.timeout_ms);
      waiting = 1;
    }
    expired = fco_cpu_backoff(&bo);
  }
  for (int p = 0; p < P; p++) {
    if (p == me) continue;
    const rec_t* theirs = &ctrl->rank[p].rec[seq & 1];
    if (theirs->seq != seq)
      return fco_set_error(comm, FCO_ERR_INTERNAL,
                           "%s (call %llu): rank %d's record is for call %llu", what,
                           (unsigned long long)seq, p, (unsigned long long)theirs->seq);
    if (!rec_equal(&rec, theirs)) {
      /* the field that differs, when both records come from operator calls (also through a
       * growth one of them needs: with a thread or process per rank, each rank grows for its
       * own call before the calls are compared; until session 55 that said "arguments or
       * fco_comm_reserve bytes differ" without naming the field) */
      fco_op_t mine_op, their_op;
      char a[200], b[200];
      describe(&rec, comm, a, sizeof a);
      describe(theirs, comm, b, sizeof b);
      if (rec_call(&rec, comm, &mine_op) && rec_call(theirs, comm, &their_op) &&
          fco_op_check_same_at(&mine_op, me, &their_op, p) != FCO_OK) {
        char field[FCO_ERRMSG_LEN];
        memcpy(field, comm->last_error, sizeof field);
        return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%.240s; rank %d %s, rank %d %s",
                             field, me, a, p, b);
      }
      /* ranks named by number, not "this rank": a world's group gives every rank the first
       * failure's message (src/core/group.c) */
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: arguments differ across ranks: rank %d %s, rank %d %s%s",
                           what, me, a, p, b,
                           rec.what != theirs->what || (rec.what == kRecGrow && rec.cause < 0) ||
                                   (theirs->what == kRecGrow && theirs->cause < 0)
                               ? " (operation arguments or fco_comm_reserve bytes differ)"
                               : "");
    }
  }
  return FCO_OK;
}

/* ---- workspace growth --------------------------------------------------------------------- */
static fco_result_t grow_rank(fco_comm_t comm, size_t bytes) {
  cpu_rank_t* tp = (cpu_rank_t*)comm->tp;
  if (comm->async_error != FCO_OK)
    return fco_async_refuse(comm, "cpu transport: workspace growth");
  if (!tp || !tp->ctrl)
    return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                         "cpu transport: communicator not initialised");
  int me = comm->rank, P = comm->nranks;
  rec_t rec = {.what = kRecGrow, .bytes = bytes, .cause = -1};
  const fco_op_t* why = comm->grow_cause;
  if (why) {
    rec.cause = why->kind;
    rec.impl = why->impl;
    memcpy(rec.shape, why->shape, sizeof rec.shape);
  }
  FCO_CHECK(agree(comm, rec, "workspace growth"));
  uint64_t seq = tp->seq;
  ctrl_t* ctrl = tp->ctrl;
  char name[64];
  snprintf(name, sizeof name, "%s-w%u", tp->name, tp->gen + 1);
  size_t stride = fco_round_up(bytes, 4096), total = stride * (size_t)P;
  void* map = NULL;
  fco_result_t r = FCO_OK;
  /* ftruncate takes an off_t: a total past INT64_MAX was an EINVAL (FCO_ERR_SYSTEM) before
   * session 55. */
  if (stride < bytes || total / (size_t)P != stride || total > (size_t)INT64_MAX)
    r = fco_set_error(comm, FCO_ERR_OUT_OF_MEMORY,
                      "workspace growth: %zu bytes per rank x %d ranks overflows", bytes, P);
  else if (P > 1 && fco_env_int("FCO_FAULT_GROW_FAIL", -1) == me) /* test hook: file comment */
    r = fco_set_error(comm, FCO_ERR_OUT_OF_MEMORY,
                      "workspace growth: FCO_FAULT_GROW_FAIL=%d: rank %d fails to map %s (as if "
                      "/dev/shm were full)", me, me, name);
  else /* one reservation serves all: nobody touches the pages before every rank acked */
    r = shm_map(comm, name, total, me == 0 ? total : 0, &map);
  if (r == FCO_OK && P > 1 && fco_env_int("FCO_FAULT_GROW_STALL", -1) == me) { /* test hook */
    const long long ns = ((long long)comm->cfg.timeout_ms + 300) * 1000000LL;
    struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  /* a failure carries its code, so the peers report it rather than a generic one */
  const uint64_t fail = r != FCO_OK ? kAckFail | (uint64_t)(r & 0x7f) << kAckCodeShift : 0;
  atomic_store_explicit(&ctrl->rank[me].ack, seq | fail, memory_order_release);
  /* Wait until every rank has mapped (or failed): only then may the name go. A rank that gave
   * up meanwhile acks nothing: its bit ends the wait. */
  for (int p = 0; p < P && r == FCO_OK; p++) {
    uint64_t a;
    const int w = fco_cpu_await_or_gone(&ctrl->rank[p].ack, kAckSeq, seq, posted_of(comm, p),
                                        comm->cfg.timeout_ms, &a);
    if (w == 2) {
      r = gave_up_error(comm, "workspace growth", seq, p,
                        atomic_load_explicit(posted_of(comm, p), memory_order_acquire));
      break;
    }
    if (w) {
      give_up(comm, kGaveUpGrowth, p, me, FCO_ERR_TIMEOUT);
      r = fco_set_error(comm, FCO_ERR_TIMEOUT,
                        "workspace growth (call %llu): rank %d did not map %s within %d ms; the "
                        "communicator is unusable, destroy it",
                        (unsigned long long)seq, p, name, comm->cfg.timeout_ms);
      break;
    }
    if (a & kAckFail) {
      fco_result_t code = (fco_result_t)(a >> kAckCodeShift & 0x7f);
      if (code <= FCO_OK || code >= FCO_NUM_RESULTS) code = FCO_ERR_SYSTEM;
      r = fco_set_error(comm, code,
                        "workspace growth to %zu bytes per rank failed on rank %d: %s (see its "
                        "fco_last_error)", bytes, p, fco_result_string(code));
    }
  }
  shm_unlink_quiet(name);
  if (r != FCO_OK) {
    if (map) munmap(map, total);
    return r;
  }
  /* Our old mapping is ours alone: peers reach the old segment through their own mappings,
   * and every rank has finished the calls that used it (agree() was a barrier). */
  if (tp->ws) munmap(tp->ws, tp->ws_map);
  tp->ws = (char*)map;
  tp->ws_map = total;
  tp->ws_stride = stride;
  tp->gen++;
  comm->ws_bytes = bytes;
  fco_log(comm, "cpu workspace generation %u: %zu bytes per rank", tp->gen, bytes);
  return FCO_OK;
}

static fco_result_t grow_job(job_t* j) { return grow_rank(j->comm, j->bytes); }

static fco_result_t cpu_grow(fco_comm_t* comms, int n, size_t bytes) {
  job_t jobs[FCO_MAX_RANKS];
  if (bytes == 0) return FCO_OK;
  for (int i = 0; i < n; i++) {
    if (!comms[i]) { /* (comm.c refuses this first; the message goes to a live rank) */
      fco_comm_t live = NULL;
      for (int k = 0; k < n && !live; k++) live = comms[k];
      return fco_set_error(live, FCO_ERR_INVALID_USAGE,
                           "workspace growth needs every rank of the world, rank %d was destroyed",
                           i);
    }
    jobs[i] = (job_t){.comm = comms[i], .bytes = bytes, .fn = grow_job};
  }
  return run_jobs(jobs, n);
}

/* ---- operations --------------------------------------------------------------------------- */
static fco_result_t run_rank(fco_op_t* op) {
  fco_comm_t comm = op->comm;
  cpu_rank_t* tp = (cpu_rank_t*)comm->tp;
  if (comm->async_error != FCO_OK) return fco_async_refuse(comm, fco_op_name(op->kind));
  if (op->ws_bytes > comm->ws_bytes || (op->ws_bytes && !tp->ws))
    return fco_set_error(comm, FCO_ERR_INTERNAL,
                         "cpu transport: op needs %zu bytes of workspace, %zu held", op->ws_bytes,
                         comm->ws_bytes);
  rec_t rec = {.what = op->kind, .impl = op->impl, .bytes = op->ws_bytes, .cause = -1};
  memcpy(rec.shape, op->shape, sizeof rec.shape);
  char what[48];
  snprintf(what, sizeof what, "fco_%s", fco_op_name(op->kind));
  FCO_CHECK(agree(comm, rec, what));
  if (comm->nranks > 1 && fco_env_int("FCO_FAULT_SKIP_RANK", -1) == comm->rank) {
    fco_log(comm, "cpu: FCO_FAULT_SKIP_RANK=%d: rank %d skips %s after its record", comm->rank,
            comm->rank, what);
    return FCO_OK;
  }
  fco_cpu_peers_t t;
  t.comm = comm;
  t.rank = comm->rank;
  t.nranks = comm->nranks;
  t.epoch = tp->seq;
  for (int p = 0; p < comm->nranks; p++) /* no workspace (one rank): NULL, not NULL + 0 (UB) */
    t.peer_data[p] = tp->ws ? tp->ws + (size_t)p * tp->ws_stride : NULL;
  t.ws_bytes = comm->ws_bytes;
  t.sig = &tp->ctrl->sig[0][0][0];
  t.timeout_ms = comm->cfg.timeout_ms;
  t.gone = &tp->ctrl->rank[0].posted; /* the waits watch each peer's bit (file comment) */
  t.gone_stride = sizeof(rank_ctrl_t) / sizeof(uint64_t);
  fco_cpu_stop_t stop = {.peer = -1, .gone = 0};
  t.stop = &stop;
  const fco_result_t r = fco_cpu_run(&t, op);
  if (r == FCO_OK || comm->async_error == FCO_OK) return r;
  if (stop.gone && stop.peer >= 0) { /* the wait's message, with the peer's reason: */
    comm->async_msg[0] = '\0';
    return gave_up_error(comm, what, tp->seq, stop.peer,
                         atomic_load_explicit(posted_of(comm, stop.peer), memory_order_acquire));
  }
  give_up(comm, kGaveUpOp, stop.peer, comm->rank, comm->async_error);
  return r;
}

static fco_result_t run_job(job_t* j) { return run_rank(j->op); }

static fco_result_t cpu_run(fco_op_t* ops, int n) {
  job_t jobs[FCO_MAX_RANKS];
  for (int i = 0; i < n; i++) jobs[i] = (job_t){.comm = ops[i].comm, .op = &ops[i], .fn = run_job};
  return run_jobs(jobs, n);
}

/* ---- the rest ---------------------------------------------------------------------------- */
/* Symmetric buffers: ordinary host memory (the CPU operators stage and copy anyway). */
static fco_result_t cpu_sym_alloc(fco_comm_t* comms, int n, int k, size_t bytes) {
  for (int i = 0; i < n; i++) {
    void* p = NULL;
    if (posix_memalign(&p, 256, bytes) != 0 || !p) {
      for (int j = 0; j < i; j++) {
        free(comms[j]->sym[k].ptr);
        comms[j]->sym[k].ptr = NULL;
      }
      return fco_set_error(comms[i], FCO_ERR_OUT_OF_MEMORY,
                           "fco_mem_alloc: %zu bytes of host memory", bytes);
    }
    memset(p, 0, bytes);
    comms[i]->sym[k].ptr = p;
  }
  return FCO_OK;
}

static fco_result_t cpu_sym_free(fco_comm_t comm, int k) {
  free(comm->sym[k].ptr);
  comm->sym[k].ptr = NULL;
  return FCO_OK;
}

/* A destroyed rank makes no call after its last one, S = tp->seq: its bit at S + 1 (the file
 * comment), unless it gave up already. Everything it stored for calls up to S (records, acks,
 * signals) came before, so a peer still inside call S completes it (a wait re-reads the value
 * after the bit); a peer's call S + 1 or later fails at once, also one already waiting in the
 * record exchange. FCO_ERR_INVALID_USAGE, as a world refuses calls with a destroyed rank
 * (src/core/group.c). Only a rank that claimed its slot in the join marks it. */
static void mark_destroyed(fco_comm_t comm) {
  cpu_rank_t* tp = (cpu_rank_t*)comm->tp;
  if (!tp->claimed || !tp->ctrl || comm->nranks < 2) return;
  post_gone(comm, kGaveUpDestroyed, -1, comm->rank, FCO_ERR_INVALID_USAGE, tp->seq + 1);
}

static fco_result_t cpu_destroy(fco_comm_t comm) {
  cpu_rank_t* tp = (cpu_rank_t*)comm->tp;
  (void)fco_sym_free_all(comm);
  if (tp) {
    /* Ops are synchronous, so nothing is in flight; peers keep the segments alive through
     * their own mappings. No barrier: destroy must never hang. */
    mark_destroyed(comm);
    if (tp->ws) munmap(tp->ws, tp->ws_map);
    if (tp->ctrl) munmap(tp->ctrl, CTRL_BYTES);
    if (tp->linked) shm_unlink_quiet(tp->name);
    free(tp);
    comm->tp = NULL;
  }
  /* (an atomic read: the world's other ranks may be destroyed by their own threads) */
  if (comm->world && __atomic_load_n(&comm->world->live, __ATOMIC_ACQUIRE) == 1) {
    free(comm->world->shared); /* unused by this transport today */
    comm->world->shared = NULL;
  }
  return FCO_OK;
}

static fco_result_t cpu_poll_error(fco_comm_t comm) { return comm->async_error; }

static int cpu_capturing(fco_comm_t comm, void* stream) {
  (void)comm;
  (void)stream;
  return 0;
}

const fco_transport_ops_t fco_transport_cpu = {
    .name = "cpu",
    .world_grows_together = 0,
    .init_rank = cpu_init_rank,
    .init_all = cpu_init_all,
    .destroy = cpu_destroy,
    .grow = cpu_grow,
    .run = cpu_run,
    .poll_error = cpu_poll_error,
    .capturing = cpu_capturing,
    .sym_alloc = cpu_sym_alloc,
    .sym_free = cpu_sym_free,
};
