/*
 * internal.h — what every layer of libfco shares: the communicator, the operation record that
 * travels from src/ops through the group queue to a transport, the transport interface, and the
 * error/logging helpers. Plain C; included by .c and .cu files.
 *
 * Flow of one call:  fco_allreduce (src/ops: checks, impl choice, workspace need)
 *   → fco_op_submit (src/core/group.c: run now, or queue until fco_group_end)
 *   → fco_ops_execute: grows the workspace collectively, then transport->run(ops, n)
 *   → the transport hands peer tables to a backend (src/cuda kernels or src/cpu).
 */
#ifndef FCO_INTERNAL_H_
#define FCO_INTERNAL_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fco.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FCO_MAX_RANKS 64     /* cpu transport */
/* FCO_MAX_GPU_RANKS (8: nccl, one NVLink domain, and local transports) is in fco.h */
#define FCO_ERRMSG_LEN 512
/* fco_last_plan: "<op> impl <n>" written by the core, then the GPU launcher's detail. */
#define FCO_PLAN_LEN 256
#define FCO_DEFAULT_TIMEOUT_MS 30000

typedef struct fco_transport_ops fco_transport_ops_t;

/* Ranks created together by fco_comm_init_all in this process. */
typedef struct fco_world {
  int n;
  fco_comm_t comms[FCO_MAX_RANKS];
  int live;      /* communicators not yet destroyed; the last destroy frees the world */
  void* shared;  /* transport state shared by the world (owned by the transport)     */
  uint64_t sym_seq; /* collective fco_mem_alloc calls made for the whole world (sym.c)   */
} fco_world_t;

/* A symmetric buffer slot of a rank (src/core/sym.c, fco_mem_alloc). Slot k of every rank
 * comes from the same collective allocation, so a rank announcing "my out is in slot k at
 * offset o" is enough for a peer to store there (its table: peer p's slot k). */
typedef enum { FCO_SYM_FREE = 0, FCO_SYM_PENDING = 1, FCO_SYM_TAKEN = 2 } fco_sym_state_t;
typedef struct {
  void* ptr;    /* this rank's buffer                                                    */
  size_t bytes;
  int state;    /* fco_sym_state_t; PENDING: allocated by a world peer's call, not handed out */
  uint64_t seq; /* PENDING: the world's allocation number (the oldest is taken first)      */
} fco_sym_t;

struct fco_comm {
  int rank, nranks;
  int device;                 /* CUDA device; -1 on the cpu transport                   */
  fco_transport_t transport;  /* never AUTO                                              */
  fco_config_t cfg;           /* resolved: timeout_ms > 0, debug from env too           */
  const fco_transport_ops_t* tops;
  void* tp;                   /* transport-private state of this rank                   */
  fco_world_t* world;         /* NULL when created by fco_comm_init / init_from_nccl    */
  size_t ws_bytes;            /* data workspace bytes per rank held now                 */
  /* During a growth that an operator call needs (execute() in group.c): that call, so a
   * transport that agrees on growth across ranks can name the field that differs (cpu); NULL
   * for fco_comm_reserve. */
  const struct fco_op* grow_cause;
  void* dev_state;            /* GPU transports: this rank's fco_dev_rank_t (device memory) */
  fco_result_t async_error;   /* sticky: once set, every later call returns it          */
  char last_error[FCO_ERRMSG_LEN];
  /* The message of the failure that set async_error (its first fco_set_error, or the poll's),
   * repeated by every call it refuses (fco_async_refuse): last_error alone could hold an
   * unrelated later failure by then. */
  char async_msg[FCO_ERRMSG_LEN];
  /* fco_last_plan: what the last call submitted on this comm ran ("" before any, and after a
   * failure). Written by fco_ops_execute before transport->run, appended by GPU launchers
   * (fco_plan_append through fco_gpu_launch_t.plan), cleared by fco_set_error(comm, ...). */
  char last_plan[FCO_PLAN_LEN];
  fco_sym_t sym[FCO_MAX_SYMMETRIC];
  /* GPU transports: device array [FCO_MAX_SYMMETRIC][FCO_MAX_GPU_RANKS] of peer p's slot k
   * as this rank sees it (NULL where none); allocated by the transport's first sym_alloc. */
  void** sym_dev;
};

/* Slot k of a TAKEN symmetric buffer of comm holding [p, p + bytes), its offset in *off;
 * -1 when none (src/core/sym.c). */
int fco_sym_find(fco_comm_t comm, const void* p, size_t bytes, size_t* off);
/* Free every symmetric buffer comm still holds (called by the transports' destroy, device
 * idle); returns the first failure. */
fco_result_t fco_sym_free_all(fco_comm_t comm);

/* Layout of fco_unique_id_t. */
#define FCO_UID_MAGIC 0x31434f46u /* "FCO1" */
typedef struct {
  uint32_t magic;
  uint32_t has_nccl;      /* nccl_id is valid (made on a host with CUDA + a GPU)  */
  uint64_t nonce;         /* random; names the cpu transport's shared memory      */
  char nccl_id[128];      /* ncclUniqueId                                         */
} fco_uid_t;

/* fco_unique_id_t's bytes have no alignment (a char array, and callers embed it anywhere: a
 * struct member, a received buffer), so fco_uid_t is copied in and out, never accessed in place
 * (a cast pointer was a misaligned access: UBSan, session 50). */
static inline fco_uid_t fco_uid_read(const fco_unique_id_t* id) {
  fco_uid_t u;
  memcpy(&u, id->internal, sizeof u);
  return u;
}
static inline void fco_uid_write(fco_unique_id_t* id, const fco_uid_t* u) {
  memcpy(id->internal, u, sizeof *u);
}

/* nccl transport: fill a ncclUniqueId (FCO_HAVE_CUDA builds). */
fco_result_t fco_nccl_get_unique_id(void* nccl_id128);

/* ---- operation records --------------------------------------------------------------- */
typedef enum {
  FCO_OP_ALLREDUCE = 1,
  FCO_OP_GEMV_ALLREDUCE = 2,
  FCO_OP_EMBEDDING_ALLTOALL = 3,
  FCO_OP_GEMM_ALLTOALL = 4,
  FCO_OP_EXTERNAL = 5, /* kernels outside libfco (fco.triton) recording into the async error */
  FCO_NUM_OP_KINDS
} fco_op_kind_t;

#define FCO_OP_SHAPE_MAX 8   /* values every rank must agree on (count, dtype, M, N, ...) */
#define FCO_OP_ARGS_BYTES 512

typedef struct {
  const void* in;
  void* out;
  size_t count;
  fco_dtype_t dtype;
} fco_allreduce_args_t;

typedef struct fco_op {
  fco_op_kind_t kind;
  fco_comm_t comm;
  int impl;          /* resolved, never FCO_IMPL_AUTO */
  int impl_auto;     /* the caller passed FCO_IMPL_AUTO (impl holds the op layer's choice) */
  void* stream;      /* cudaStream_t or NULL */
  size_t ws_bytes;   /* data workspace this op needs per rank */
  /* What all ranks must agree on, named by the op's registry entry (fco_op_info_t);
   * compared across ranks by the transports (same group on local/nccl, shared memory on cpu). */
  int64_t shape[FCO_OP_SHAPE_MAX];
  union {
    fco_allreduce_args_t allreduce;
    /* Other ops keep their argument struct in src/ops/<op>.h and store it here
     * (static_assert(sizeof(args) <= FCO_OP_ARGS_BYTES)). */
    unsigned char raw[FCO_OP_ARGS_BYTES];
    void* align_;
  } u;
} fco_op_t;

/* ---- operator registry (src/ops/registry.c): one entry per op kind -------------------- */
typedef struct {
  fco_op_kind_t kind;
  const char* name;                            /* "allreduce" → fco_allreduce            */
  const char* shape_names[FCO_OP_SHAPE_MAX];   /* names of shape[i]; NULL ends the list   */
  int num_impls;                               /* impls 0..num_impls-1                    */
  const char* baseline_name[FCO_NUM_TRANSPORTS]; /* impl 0 per transport ("nccl", ...)    */
  const char* impl_names[8];                   /* impl i >= 1: impl_names[i]              */
  /* Optional: revise the AUTO choices of a batch that holds every rank's call (execute() in
   * src/core/group.c, before the workspace is sized), with values no single rank has. It must
   * leave every rank with the same impl; NULL: the op layer's per-rank choice stands. */
  void (*agree)(fco_op_t* ops, int n);
} fco_op_info_t;

const fco_op_info_t* fco_op_info(fco_op_kind_t kind); /* NULL for unknown kinds */
void fco_gemv_ar_agree(fco_op_t* ops, int n);         /* src/ops/gemv_allreduce.c */
void fco_ga_agree(fco_op_t* ops, int n);              /* src/ops/gemm_alltoall.c  */
const char* fco_op_name(fco_op_kind_t kind);          /* "?" for unknown kinds  */
const char* fco_op_impl_name(fco_op_kind_t kind, fco_transport_t t, int impl);
/* fco_allreduce's AUTO choice for a message of `bytes` (1 one-shot, 0 NCCL/copy); also used by
 * ops that end in an all-reduce (src/ops/allreduce.c: the rule and its measurements). */
int fco_allreduce_auto_impl(fco_comm_t comm, size_t bytes);
/* fco_gemv_allreduce's AUTO choice from the shape alone, before fco_gemv_ar_agree revises a local
 * batch (src/ops/gemv_allreduce.c: the rule and its measurements). */
int fco_gemv_ar_auto_impl(fco_comm_t comm, size_t M, size_t N, fco_dtype_t dtype);

/* "fco_allreduce(count=4096, dtype=bf16, impl=1 oneshot)" */
void fco_op_describe(const fco_op_t* op, char* buf, size_t len);
/* Do two ranks' ops agree (kind, impl, shape)? If not: FCO_ERR_INVALID_ARGUMENT with a message
 * on a->comm naming both ranks and the first differing field. */
fco_result_t fco_op_check_same(const fco_op_t* a, const fco_op_t* b);
/* The same with the ranks given (a peer's record as an op: cpu, its comm is not the peer's). */
fco_result_t fco_op_check_same_at(const fco_op_t* a, int ra, const fco_op_t* b, int rb);

/* ---- transport interface --------------------------------------------------------------- */
struct fco_transport_ops {
  const char* name;
  /* 1: the ranks of a world are driven by one thread, so workspace growth always covers the
   * whole world (local, nccl). 0: each rank grows on its own; several threads (or one thread
   * through a group) may drive a world's ranks (cpu). */
  int world_grows_together;
  /* One rank joins through `id` (fco_comm_init), or adopts `nccl_comm` when non-NULL.
   * comm->rank/nranks/cfg/device are set before (init_from_nccl: the transport sets them). */
  fco_result_t (*init_rank)(fco_comm_t comm, const fco_unique_id_t* id, void* nccl_comm);
  /* All ranks of a world at once (fco_comm_init_all); comms[i]->rank == i, world is set. */
  fco_result_t (*init_all)(fco_comm_t* comms, int n, const int* devs);
  /* Wait for this rank's work, free its state (and the world's shared state when
   * comm->world && comm->world->live == 1). Must tolerate a partly initialised comm. */
  fco_result_t (*destroy)(fco_comm_t comm);
  /* Collective growth of the data workspace to >= bytes for the ranks this thread drives
   * (n == 1, or all ranks of a world); sets comm->ws_bytes. Never called while capturing. */
  fco_result_t (*grow)(fco_comm_t* comms, int n, size_t bytes);
  /* Issue ops[0..n) (same kind, one per distinct comm, all of one world when n > 1). */
  fco_result_t (*run)(fco_op_t* ops, int n);
  /* Poll the device-side async error word without waiting; FCO_OK when none. */
  fco_result_t (*poll_error)(fco_comm_t comm);
  /* Is `stream` being captured into a CUDA graph (then growth is impossible)? NULL asks the
   * device's default streams (legacy and per-thread): a capture that growth or fco_mem_alloc
   * would break, as far as they tell (a global-mode capture on a blocking stream, a capture of
   * the per-thread stream). */
  int (*capturing)(fco_comm_t comm, void* stream);
  /* Collective: slot k (FREE on every comm given) of comms[0..n) (n == 1, or all ranks of a
   * world) gets a zeroed buffer of `bytes` each: sets sym[k].ptr/bytes (not the state) and the
   * peer tables. On failure no comm holds slot k. */
  fco_result_t (*sym_alloc)(fco_comm_t* comms, int n, int k, size_t bytes);
  /* Local: free slot k of comm (after its device is idle); clears its table row k. */
  fco_result_t (*sym_free)(fco_comm_t comm, int k);
  /* Collective, for a rank allocating alone (n == 1 in sym_alloc: one thread or process per
   * rank): *all_free = the AND of every rank's free_mask (bit k: slot k FREE), so that one
   * fco_mem_alloc takes the same slot on every rank even after a rank freed a buffer its
   * peers kept; *all_ok = the AND of every rank's ok (0: that rank refused its call, and
   * takes part only so that its peers do not wait). NULL where buffers are not mapped (cpu)
   * or every rank allocates together. */
  fco_result_t (*sym_slots)(fco_comm_t comm, unsigned free_mask, int ok, unsigned* all_free,
                            int* all_ok);
};

extern const fco_transport_ops_t fco_transport_cpu;
extern const fco_transport_ops_t fco_transport_local; /* FCO_HAVE_CUDA builds only */
extern const fco_transport_ops_t fco_transport_nccl;  /* FCO_HAVE_CUDA builds only */

/* ---- core services (src/core) ---------------------------------------------------------- */
/* Record an error on comm (or this thread when comm is NULL), log it under FCO_DEBUG, return
 * code. The message should name the argument and the value. */
fco_result_t fco_set_error(fco_comm_t comm, fco_result_t code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Debug log to stderr when FCO_DEBUG / cfg.debug is set (never stdout). */
void fco_log(fco_comm_t comm, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int fco_debug_enabled(fco_comm_t comm);
/* Append printf-formatted text to plan (a comm's last_plan, FCO_PLAN_LEN bytes, NUL-terminated),
 * truncated to fit; no-op when plan is NULL. Callable from .c and .cu files (host only). */
void fco_plan_append(char* plan, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Environment helpers: integer env var or default (a value that is not an integer is said on
 * stderr once and ignored). */
long long fco_env_int(const char* name, long long dflt);
/* A string knob: the index of the env var's value in choices (NULL-terminated; compared without
 * case, trailing blanks ignored), or dflt when unset or empty. Any other value is said on stderr
 * once per name ("is not one of a, b, c: ignored, as if unset") and gives dflt. */
int fco_env_choice(const char* name, const char* const* choices, int dflt);
/* An on/off knob: "1" on, "0" off (trailing blanks ignored), dflt when unset or empty; any other
 * value is said on stderr once per name ("is not 0 (off) or 1 (on): ignored, as if unset") and
 * gives dflt. */
int fco_env_flag(const char* name, int dflt);

/* Submit an op (group.c): queued while a group is open, else executed now. */
fco_result_t fco_op_submit(const fco_op_t* op);
/* An operator call's result r (its public entry returns fco_op_call_result(comm, r)): a failure
 * while this thread has a group open, on a rank of a fco_comm_init_all world, makes
 * fco_group_end issue none of that world's queued ops and fail them with comm's message
 * (group.c), instead of leaving the peers of a refused call to wait for it until
 * FCO_TIMEOUT_MS. Only operator calls: a query, fco_mem_* or fco_comm_reserve that fails inside
 * a group cancels nothing (until session 54 every fco_set_error on a comm did). */
fco_result_t fco_op_call_result(fco_comm_t comm, fco_result_t r);
/* comm->async_error, after polling the transport's device-side record when it is still OK
 * (src/core/comm.c; fco_comm_get_async_error and every submitted call use it). */
fco_result_t fco_comm_poll_async(fco_comm_t comm);
/* A call `fn` refused because comm holds an asynchronous error: sets the message (naming fn and
 * the earlier failure) and returns comm->async_error. */
fco_result_t fco_async_refuse(fco_comm_t comm, const char* fn);
/* Grow (collectively) and run ops of one comm or one world. */
fco_result_t fco_ops_execute(fco_op_t* ops, int n);
/* Whether this thread's open group has a call on comm queued (fco_comm_destroy refuses then). */
int fco_group_holds(fco_comm_t comm);

/* Has the build CUDA support / does this process see a GPU? */
int fco_have_cuda(void);
int fco_gpu_count(void);
/* The calling thread's current CUDA device when t is a GPU transport (-1 otherwise, or when
 * none can be read), and making it current again (dev < 0: nothing). Every public call that
 * may switch devices brackets its work with them. */
int fco_device_save(fco_transport_t t);
void fco_device_restore(int dev);

static inline size_t fco_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* A capture in progress that a collective setup step (growth, fco_mem_alloc) would break, as
 * far as the device's default streams tell (capturing(comm, NULL)); never on cpu. */
static inline int fco_capturing_device(fco_comm_t comm) {
  return comm->tops->capturing && comm->tops->capturing(comm, NULL);
}

/* The same over the group a setup step acts on (every live rank of comm's fco_comm_init_all
 * world, or comm alone): the device whose default streams tell a capture, or -1 for none. */
static inline int fco_capturing_group(fco_comm_t comm) {
  const int n = comm->world ? comm->world->n : 1;
  for (int i = 0; i < n; i++) {
    const fco_comm_t q = comm->world ? comm->world->comms[i] : comm;
    if (q && fco_capturing_device(q)) return q->device;
  }
  return -1;
}

/* Workspace rule, every operator on every transport (so any sequence of different ops and
 * sizes is safe): (1) all data a peer writes into this rank's workspace during the call with
 * epoch e lies in half (e & 1): bytes [(e & 1)·H, (e & 1)·H + H) with H = fco_ws_half_bytes(
 * ws_bytes), whatever the op or size (so an op needs 2× its per-call bytes); (2) in every call,
 * every rank waits for at least one signal that every peer raises during that same call before
 * the call completes. Then a peer can be at most one call ahead, and by (1) it writes the other
 * half: it cannot overwrite data of a call this rank is still reading. */
#ifdef __CUDACC__
#define FCO_HOST_DEVICE __host__ __device__
#else
#define FCO_HOST_DEVICE
#endif
static inline FCO_HOST_DEVICE size_t fco_ws_half_bytes(size_t ws_bytes) {
  return (ws_bytes / 2) & ~(size_t)255;
}

/* LL area (GPU transports; used by fco_gemv_allreduce impl 1 with FCO_GEMV_AR_LL=1 and by the
 * fused lean kernel of fco_embedding_alltoall, below). Every
 * rank's workspace allocation holds, past its ws_bytes of data workspace, L =
 * fco_ws_ll_bytes(ws_bytes) more bytes at [O, O + L), O = fco_ws_ll_offset(ws_bytes). It is
 * outside the workspace rule above: ws_bytes and fco_ws_half_bytes do not include it, and no
 * op, Triton kernel or user kernel may write there except through LL words:
 *   (3) only LL words are ever stored in the LL area: 64-bit words {low 32: data, high 32:
 *   fco_ll_flag(e)}, each written by one single-copy-atomic 64-bit store (st .u64 or .v2.u64:
 *   the PTX model makes each 64-bit element atomic), no fence, no separate signal; the receiver
 *   polls the words until their flags are its call's. The transport zeroes the area at every
 *   (re)allocation (flag 0, which fco_ll_flag never gives). The call with epoch e stores only
 *   into LL half (e & 1): [O + (e & 1)·LH, O + (e & 1)·LH + LH), LH = fco_ws_ll_half_bytes(
 *   ws_bytes), whatever the op or size.
 * So a word a call reads carries this call's flag only if a peer stored it in this call: else
 * it is 0 or the flag of an earlier LL call of the same parity, equal only if e − e' is a
 * multiple of 2^32 − 1 with no LL store to that word in between (the one residual risk: flags
 * have 32 bits). Rule (2) still holds: an LL receiver waits for every word its peers store to
 * it in the call, and those words are signals raised in that call; so a peer is at most one
 * call ahead and stores into the other LL half. Every LL user must use fco_ll_flag (else stale
 * words of one op could carry another op's current flag). Size: ws_bytes, at most
 * FCO_WS_LL_MAX_BYTES; allocated (and zeroed) even when no LL op runs.
 * The embedding's fused lean kernel (src/cuda/embedding_alltoall_fused_lean.cu, "Symmetric
 * outs") uses word s of the half: {1, flag}, "source s stored my rows straight into my
 * symmetric out in this call", stored before s's counter signal and read once after it (not
 * polled: a staging source stores none). Its rule (2) is the kernel's presence wait. Not a
 * signal slot: a peer's next call (any op) may rewrite those before the word is read. */
#define FCO_WS_LL_MAX_BYTES ((size_t)16 << 20)
static inline FCO_HOST_DEVICE size_t fco_ws_ll_bytes(size_t ws_bytes) {
  return (ws_bytes < FCO_WS_LL_MAX_BYTES ? ws_bytes : FCO_WS_LL_MAX_BYTES) & ~(size_t)255;
}
static inline FCO_HOST_DEVICE size_t fco_ws_ll_half_bytes(size_t ws_bytes) {
  return (fco_ws_ll_bytes(ws_bytes) / 2) & ~(size_t)255;
}
static inline FCO_HOST_DEVICE size_t fco_ws_ll_offset(size_t ws_bytes) {
  return (ws_bytes + 255) & ~(size_t)255; /* ws_bytes need not be (cfg.max_workspace_bytes) */
}
/* Bytes a GPU transport allocates for a data workspace of ws_bytes (the LL area included). */
static inline FCO_HOST_DEVICE size_t fco_ws_alloc_bytes(size_t ws_bytes) {
  return fco_ws_ll_offset(ws_bytes) + fco_ws_ll_bytes(ws_bytes);
}
/* The flag of the call with epoch e: 1 + e mod (2^32 − 1), never 0 (a zeroed word). */
static inline FCO_HOST_DEVICE uint32_t fco_ll_flag(uint64_t e) {
  return (uint32_t)(e % 0xffffffffull) + 1u;
}

/* Propagate an error upward, logging the frame (as NCCL's NCCLCHECK). */
#define FCO_CHECK(call)                                                                   \
  do {                                                                                    \
    fco_result_t fco_r_ = (call);                                                         \
    if (fco_r_ != FCO_OK) {                                                               \
      fco_log(NULL, "%s:%d -> %d (%s)", __FILE__, __LINE__, (int)fco_r_,                  \
              fco_result_string(fco_r_));                                                 \
      return fco_r_;                                                                      \
    }                                                                                     \
  } while (0)

#define FCO_CHECK_GOTO(call, res, label)                                                  \
  do {                                                                                    \
    (res) = (call);                                                                       \
    if ((res) != FCO_OK) {                                                                \
      fco_log(NULL, "%s:%d -> %d (%s)", __FILE__, __LINE__, (int)(res),                   \
              fco_result_string(res));                                                    \
      goto label;                                                                         \
    }                                                                                     \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif /* FCO_INTERNAL_H_ */
