/*
 * fco.h — the only public header of libfco: fused compute + collective operators for GPUs.
 *
 * C99, no CUDA or NCCL headers needed: streams are `void*` (a cudaStream_t, or NULL for the
 * default stream; ignored on the cpu transport) and an adopted NCCL communicator is `void*`.
 *
 * Conventions (as nccl.h):
 *  - every function returns an fco_result_t; FCO_OK is 0. On failure `fco_last_error(comm)`
 *    gives the detailed message (per communicator; per thread for calls without one).
 *  - "collective" means every rank of the communicator must make the call, with the same
 *    arguments where noted; one thread driving several ranks wraps the per-rank calls in
 *    fco_group_start()/fco_group_end().
 *  - operations are asynchronous on GPU transports (enqueued on `stream`); on the cpu transport
 *    they complete before returning. A communicator's operations must run in the order they
 *    were called (one stream, or streams ordered by events): its device state (the epoch, the
 *    workspace halves, embedding impl 0's tile queue) belongs to the communicator; work meant
 *    to run at the same time on two streams takes a communicator each. Failures found on the
 *    device after the call returned (a peer that never signals, a bad index) are reported by
 *    fco_comm_get_async_error() and by every later operator call on that communicator
 *    (fco_comm_reserve and fco_mem_alloc refuse too once a poll has found it), which must then
 *    be destroyed.
 */
#ifndef FCO_H_
#define FCO_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FCO_VERSION_MAJOR 0
#define FCO_VERSION_MINOR 1
#define FCO_VERSION_PATCH 0
#define FCO_VERSION_CODE (FCO_VERSION_MAJOR * 10000 + FCO_VERSION_MINOR * 100 + FCO_VERSION_PATCH)

/* Result codes: one table makes the enum and the strings, so they cannot drift. */
#define FCO_RESULT_MAP(XX)                                                                       \
  XX(OK, 0, "success")                                                                           \
  XX(INVALID_ARGUMENT, 1, "invalid argument")                                                    \
  XX(INVALID_USAGE, 2, "invalid usage (call order, group or communicator state)")                \
  XX(UNSUPPORTED, 3, "unsupported (shape, dtype, transport or build)")                           \
  XX(OUT_OF_MEMORY, 4, "out of memory")                                                          \
  XX(CUDA, 5, "CUDA runtime error")                                                              \
  XX(NCCL, 6, "NCCL error")                                                                      \
  XX(SYSTEM, 7, "system call failed")                                                            \
  XX(TIMEOUT, 8, "a peer did not signal within FCO_TIMEOUT_MS")                                  \
  XX(INTERNAL, 9, "internal error (a bug in fco)")

typedef enum {
  FCO_OK = 0,
#define FCO_XX_ENUM_(name, code, str) FCO_ERR_##name = code,
  FCO_RESULT_MAP(FCO_XX_ENUM_)
#undef FCO_XX_ENUM_
  FCO_NUM_RESULTS
} fco_result_t;
/* (FCO_ERR_OK == FCO_OK == 0; use FCO_OK.) */

/* Element types. Arithmetic is fp32 for f16/bf16 inputs; outputs are in the input type. */
typedef enum {
  FCO_F32 = 0,
  FCO_F16 = 1,
  FCO_BF16 = 2,
  FCO_NUM_DTYPES
} fco_dtype_t;

/* How a rank reaches its peers. AUTO: nccl when the rank has a GPU, else cpu. */
typedef enum {
  FCO_TRANSPORT_AUTO = 0,
  FCO_TRANSPORT_NCCL = 1,  /* NCCL >= 2.28 symmetric windows, peers over NVLink          */
  FCO_TRANSPORT_LOCAL = 2, /* P virtual ranks on ONE GPU (testing every kernel on 1 GPU)  */
  FCO_TRANSPORT_CPU = 3,   /* ranks as processes or threads of one host, POSIX shm         */
  FCO_NUM_TRANSPORTS
} fco_transport_t;

/* Operator implementations (`impl` argument of every operator). */
#define FCO_IMPL_BASELINE 0 /* the unfused path users have today (compute + NCCL) */
#define FCO_IMPL_AUTO (-1)  /* fastest measured variant for the shape, never slower than 0 */

/* Communicator configuration. Plain fixed-width data (ctypes-friendly): call
 * fco_config_init() first, then change fields. Zero / negative fields mean "default", except:
 * size (0 is refused, so a zero-filled config fails with FCO_ERR_INVALID_ARGUMENT), transport
 * (0 is AUTO, negative is refused) and device (0 is GPU 0; only < 0 means the current one). */
typedef struct {
  uint32_t size;           /* sizeof(fco_config_t), set by fco_config_init (ABI check) */
  int32_t transport;       /* fco_transport_t; AUTO → env FCO_TRANSPORT, else by hardware  */
  int32_t timeout_ms;      /* bound on every wait; <= 0 → env FCO_TIMEOUT_MS, else 30000    */
  int32_t device;          /* fco_comm_init: CUDA device of this rank (0: GPU 0); < 0 → current */
  int64_t max_workspace_bytes; /* cap on the symmetric workspace per rank; <= 0 → no cap;
                                  the same on every rank (growth takes the largest size any
                                  rank asks: past a rank's cap it fails on every rank) */
  int32_t debug;           /* > 0 → log to stderr (also env FCO_DEBUG=1)                     */
  int32_t reserved[7];
} fco_config_t;

/* [OUT] cfg: defaults. Not collective. Returns FCO_ERR_INVALID_ARGUMENT if cfg is NULL. */
fco_result_t fco_config_init(fco_config_t* cfg);

/* Opaque communicator. */
typedef struct fco_comm* fco_comm_t;

/* Bootstrap token, made by one rank and given to all (like ncclUniqueId). */
#define FCO_UNIQUE_ID_BYTES 256
typedef struct {
  char internal[FCO_UNIQUE_ID_BYTES];
} fco_unique_id_t;

/* [OUT] version: FCO_VERSION_CODE of the libfco that is loaded (major·10000 + minor·100 +
 * patch), to compare with the header's FCO_VERSION_CODE a program was built with. Not
 * collective; FCO_ERR_INVALID_ARGUMENT when version is NULL. */
fco_result_t fco_get_version(int* version);

/* Human-readable name of a result code ("unknown result" for values outside the table). */
const char* fco_result_string(fco_result_t result);
/* Name of a dtype ("f32", "f16", "bf16") or NULL. Size in bytes, 0 when unknown. */
const char* fco_dtype_name(fco_dtype_t dtype);
size_t fco_dtype_size(fco_dtype_t dtype);
/* Name of a transport ("auto", "nccl", "local", "cpu") or NULL. */
const char* fco_transport_name(fco_transport_t transport);

/* Detailed message of the last failure on `comm`, or, when comm is NULL, of this thread's last
 * failing call of any kind (with a communicator or without a valid one: fco_comm_init's
 * failures are read there). Never NULL; "" when nothing failed. The string stays valid until
 * the next failing call on the same communicator / thread. */
const char* fco_last_error(fco_comm_t comm);

/* What the last successful operator call on `comm` ran: the operator and the impl after
 * FCO_IMPL_AUTO was resolved, "<op> impl <n>" (e.g. "gemv_allreduce impl 1"), to which a GPU
 * launcher may append detail (e.g. " kernel grouped wgmma kG=4 split=2 kMT=8 warps=8 PDL, 32
 * blocks/rank of 132 co-resident"; free text, not a stable format). Set when the call is issued
 * (inside fco_group_start/end: by fco_group_end, when the group issues it); on GPU transports
 * that is when it is enqueued, not when it has finished. "" before the first call, after any
 * call on it that failed (a bad argument, a failed launch; a failing fco_comm_reserve or
 * fco_mem_alloc too), and while the communicator holds an asynchronous error
 * (fco_comm_get_async_error), so it never describes a call that did not run. Not collective;
 * never NULL ("" for a NULL comm). The string stays valid until the next call on the same
 * communicator. */
const char* fco_last_plan(fco_comm_t comm);

/* [OUT] id: a fresh bootstrap id. Called by ONE rank, then broadcast to the others out of band
 * (MPI_Bcast, torch.distributed, a file, fork): its bytes are all there is, with no alignment
 * needed. It carries an NCCL unique id only where the nccl transport may run: a CUDA build, a
 * GPU on the machine and FCO_TRANSPORT unset, auto or nccl. Not collective. On failure the id
 * is all zero, which fco_comm_init refuses. */
fco_result_t fco_get_unique_id(fco_unique_id_t* id);

/* One process (or thread) per rank: the way torchrun and MPI users run.
 * [OUT] comm    new communicator
 * [IN]  nranks  1 ≤ nranks ≤ 64 (≤ 8 on GPU transports)
 * [IN]  rank    0 ≤ rank < nranks, distinct on every rank
 * [IN]  id      the same id on every rank (from fco_get_unique_id)
 * [IN]  cfg     NULL for defaults
 * Collective: blocks until every rank has joined (bounded by the timeout). On the nccl
 * transport it creates the NCCL communicator from the id on cfg->device. The local transport
 * is only available through fco_comm_init_all (or with nranks == 1). */
fco_result_t fco_comm_init(fco_comm_t* comm, int nranks, int rank, const fco_unique_id_t* id,
                           const fco_config_t* cfg);

/* Adopt an NCCL communicator the caller already has (rank, size and device are taken from it;
 * the caller keeps ownership and must destroy it after fco_comm_destroy). Collective over
 * nccl_comm. nccl transport only. */
fco_result_t fco_comm_init_from_nccl(fco_comm_t* comm, void* nccl_comm, const fco_config_t* cfg);

/* One process driving several ranks (like ncclCommInitAll).
 * [OUT] comms   array of ndev communicators; comms[i] has rank i
 * [IN]  ndev    number of ranks
 * [IN]  devs    CUDA device of each rank; NULL → 0..ndev-1 (nccl), all 0 (local); ignored (cpu)
 * [IN]  cfg     NULL for defaults. transport local: ndev virtual ranks on devs[0] (every devs[i]
 *               must be equal); cpu: ndev ranks as threads of this process.
 * Operations on these communicators are issued for all ranks inside one
 * fco_group_start()/fco_group_end() (or from one thread per rank, except on local). On nccl,
 * workspace growth and fco_mem_alloc act on every rank of the world at once: with one thread
 * per rank, first call fco_comm_reserve (enough for every call) and fco_mem_alloc from one
 * thread, so that no rank's call needs to grow the workspace. On failure comms[0..ndev) are
 * NULL (when 1 <= ndev <= 64). GPU transports: every call switches to each rank's device
 * inside and makes the caller's current device current again before it returns (as NCCL's
 * calls do) — when the process uses that device; a thread whose device had no context yet
 * (it reads device 0 before any CUDA call) is left on the last rank's device, so no context is
 * made on GPU 0 for a program that runs on other GPUs. */
fco_result_t fco_comm_init_all(fco_comm_t* comms, int ndev, const int* devs,
                               const fco_config_t* cfg);

/* Free everything the communicator holds. NULL accepted. Not collective, but destroy every
 * rank's communicator: peers may still be reading a workspace being freed only if an
 * operation is still in flight, so the call first waits for this rank's work to finish. In a
 * fco_comm_init_all group, operator calls on the ranks left are then refused
 * (FCO_ERR_INVALID_USAGE naming the destroyed rank): none could complete. On the cpu transport
 * the same holds for a rank of another process (or thread) that is still in use: a peer's next
 * collective call, or one already waiting for the destroyed rank, fails at once with
 * FCO_ERR_INVALID_USAGE (sticky, see fco_comm_get_async_error) naming it, instead of waiting
 * FCO_TIMEOUT_MS for it; a peer still finishing the rank's last call completes it. Destroying
 * every rank after its last call (the normal shutdown) reports nothing.
 * FCO_ERR_INVALID_USAGE (nothing freed) while a call on comm is queued in this thread's open
 * fco_group_start: call fco_group_end first. */
fco_result_t fco_comm_destroy(fco_comm_t comm);

/* [OUT] rank / size / transport actually used. */
fco_result_t fco_comm_rank(fco_comm_t comm, int* rank);
fco_result_t fco_comm_size(fco_comm_t comm, int* size);
fco_result_t fco_comm_transport(fco_comm_t comm, fco_transport_t* transport);

/* Error found asynchronously (on the device, or by a previous call): FCO_OK when none,
 * FCO_ERR_TIMEOUT when a peer did not signal within the bound, FCO_ERR_INVALID_ARGUMENT for bad
 * data found on the device, FCO_ERR_INVALID_USAGE when the communicator reached its call limit
 * (GPU transports: 2^32 − 2^24 calls, about 6 days at 8000 calls a second — its signal values
 * hold the call count in 32 bits; the calls up to there are correct: destroy it and create a
 * new one) or, on the cpu transport, when a peer rank was destroyed (fco_comm_destroy) while
 * this rank still called: no collective call can complete. Does not wait for the stream.
 * Message via fco_last_error. Every operator call polls the same record (one read of
 * host-mapped memory) and returns the error once it is there; fco_comm_reserve and
 * fco_mem_alloc do not poll but refuse once a poll has found it; queries (rank, size, workspace
 * bytes, fco_mem_find) and fco_mem_free ignore it. On the cpu transport a rank that gave up on a
 * call (its timeout) tells its peers so: a peer that comes to that call later, or waits for that
 * rank inside it, fails at once with the same FCO_ERR_TIMEOUT (sticky), its message naming the
 * rank that gave up, the call and why, instead of waiting FCO_TIMEOUT_MS more and blaming that
 * rank's silence; the peer then gives up in turn. A destroyed rank tells them the same way
 * (FCO_ERR_INVALID_USAGE, fco_comm_destroy). */
fco_result_t fco_comm_get_async_error(fco_comm_t comm);

/* Symmetric workspace (per rank, grown on demand). Operations grow it collectively when they
 * need more; growth allocates, so it cannot happen while a stream is being captured into a
 * CUDA graph: call fco_comm_reserve before capturing. While a capture is in progress
 * fco_comm_reserve (and a call that must grow: always when its own stream is the captured
 * one) is refused, FCO_ERR_INVALID_USAGE, not sticky, where the device's default streams tell
 * it (a global-mode capture on a blocking stream, or a capture of the per-thread default
 * stream; a capture on a non-blocking stream, torch's included, cannot be told: the growth
 * then fails in CUDA and breaks it — fco's Python layer asks torch instead). GPU transports
 * allocate, past the data workspace, an LL area of min(data bytes, 16 MiB) per rank
 * (src/core/internal.h, rule 3: the LL one-shot of fco_gemv_allreduce), not counted by
 * max_workspace_bytes or fco_comm_workspace_bytes. Collective (same bytes on every rank);
 * on a communicator of fco_comm_init_all it reserves for every rank of that group at once
 * (refused, with that rank's code, while any of them holds an asynchronous error), so
 * one thread calls it for the group, never the ranks' threads of a world driven one thread per
 * rank (they would grow each other's workspace at once). On nccl such a world calls it from one
 * thread before the ranks' threads issue calls (its ops grow every rank of the world together,
 * so a call that must grow it would touch the other ranks' communicators from several threads);
 * on cpu it is never needed (no graphs are captured; its ops grow the workspace themselves).
 * On nccl a growth (here or inside an operator call) and fco_mem_alloc first pass a gate
 * bounded by FCO_TIMEOUT_MS (src/cuda/gate.h) before their NCCL all-reduces: ranks that grow
 * together take the largest size any of them asks; a rank whose peer does not take the step
 * within the bound (its call needed no growth — a shape that differs between ranks —, was
 * refused on the host, or the peer is gone) gets FCO_ERR_TIMEOUT naming that peer, and the
 * communicator is unusable from then on (a sticky error: destroy it), where it used to wait in
 * NCCL forever. A peer that arrives after the others gave up finds the step abandoned. A
 * growth on one rank taking the step with an fco_mem_alloc on another fails on both
 * (FCO_ERR_INVALID_USAGE, sticky: their calls differ).
 * A CUDA graph captured before a growth (a later call with a larger shape, or a larger
 * fco_comm_reserve) may be replayed after it, also between and back to back with calls on the
 * grown workspace: a GPU transport keeps a workspace that a captured call used (and its window
 * on nccl) until fco_comm_destroy instead of freeing it at the growth — the graph's host-
 * launched work (staging copies, NCCL calls, cuBLAS scratch) keeps its address, its kernels
 * reach the grown one through the peer table as their peers do. A workspace no captured call
 * used is freed at the growth; FCO_DEBUG=1 logs the bytes kept. So each growth after a capture
 * holds the old workspace's memory until destroy (such a growth at least doubles the
 * workspace, so all that is kept stays below the final size): reserve, before the first
 * capture, what every later call needs, and nothing is kept.
 * A growth (here or inside an operator call) that fails on one rank fails on every rank, not
 * sticky, and leaves every rank alike: on cpu no rank's workspace changes, and every peer
 * returns that rank's code (e.g. FCO_ERR_OUT_OF_MEMORY when /dev/shm is full) with a message
 * naming it; on the GPU transports every rank is left without a workspace (the old one freed
 * before the new one is allocated), which the next call grows again.
 * [IN] bytes: data workspace bytes per rank to have at least, ≤ 2^50 (FCO_ERR_OUT_OF_MEMORY
 *             above). */
fco_result_t fco_comm_reserve(fco_comm_t comm, size_t bytes);
/* [OUT] bytes: data workspace bytes per rank held now. */
fco_result_t fco_comm_workspace_bytes(fco_comm_t comm, size_t* bytes);

/* Device state of this rank, for kernels written outside libfco (fco.triton): the device
 * pointer of the rank's peer table + epoch + async error record (src/cuda/dev.h,
 * fco_dev_rank_t), valid and fixed until fco_comm_destroy (workspace growth rewrites its
 * contents, never moves it). [OUT] dev_state, bytes (its size), version
 * (FCO_DEVICE_STATE_VERSION: the layout of dev.h). Not collective. FCO_ERR_UNSUPPORTED on the
 * cpu transport. */
#define FCO_DEVICE_STATE_VERSION 1
fco_result_t fco_comm_device_state(fco_comm_t comm, void** dev_state, size_t* bytes,
                                   uint32_t* version);

/* Symmetric buffers: device memory of this rank that the peers of comm can store into over
 * NVLink (nccl: ncclMemAlloc + a symmetric NCCL window; local: cudaMalloc on the one GPU; cpu:
 * ordinary host memory). An operator output (`out`) that lies inside such a buffer is written by
 * the peers in place: no staging in the workspace and no landing copy (fco_gemm_alltoall impls
 * 1 and 2, fco_embedding_alltoall's fused lean kernel; other operators and the cpu transport
 * treat it as ordinary memory). Ranks may
 * differ: each rank announces in every call whether its own output is symmetric.
 * fco_mem_alloc is collective: every rank calls it with the same bytes, in the same order of
 * fco_mem_alloc calls; on a communicator of fco_comm_init_all on the GPU transports the first
 * rank's call allocates the buffer of every rank of that group and each other rank's call of the
 * same order returns its own (the same bytes are checked; the slots are not locked, so a world
 * driven one thread per rank makes its fco_mem_alloc calls from one thread); on cpu each rank's
 * call allocates its own (bytes not compared). At most FCO_MAX_SYMMETRIC buffers live a
 * communicator. On the GPU transports one call takes the same slot on every rank
 * (fco_mem_find), the lowest free on all of them (on cpu each rank's lowest free one: no peer
 * stores into it): ranks driven one per process or thread on nccl agree on it through an NCCL
 * all-reduce (so after a rank freed a buffer its peers kept, the next allocation skips that
 * slot everywhere); none free on every rank is FCO_ERR_INVALID_USAGE on every rank, and so,
 * for such ranks on nccl, is a call another rank refused (bytes 0, an async error): its peers
 * return instead of waiting for it. A rank that never calls: its peers' calls return
 * FCO_ERR_TIMEOUT after FCO_TIMEOUT_MS (the gate of fco_comm_reserve above; sticky).
 * Allocation synchronises the device; not while a stream is being captured: refused
 * (FCO_ERR_INVALID_USAGE, not sticky) where the device's default streams tell a capture (as
 * fco_comm_reserve's). A call that takes the step while a peer's call grows the workspace (the
 * gate sees both in one step) is FCO_ERR_INVALID_USAGE on both, sticky. Zero-filled.
 * [IN] bytes ≥ 1   [OUT] ptr: this rank's buffer (device pointer; host pointer on cpu)
 * fco_mem_free is local (it synchronises this rank's device): free a buffer only when no call
 * of any rank still writes into it; fco_comm_destroy frees the buffers left. Free a slot on
 * every rank alike: a rank that freed its buffer of a slot can no longer store into its peers'
 * buffers of that slot, so it stages their rows instead and they land them (a copy more, same
 * result: fco_embedding_alltoall, fco_gemm_alltoall's impls 1 and 2 and fco.triton's
 * gemm_alltoall; docs/gemm_alltoall.md). */
#define FCO_MAX_SYMMETRIC 16
#define FCO_MAX_GPU_RANKS 8 /* ranks of a communicator on the nccl and local transports */
fco_result_t fco_mem_alloc(fco_comm_t comm, size_t bytes, void** ptr);
fco_result_t fco_mem_free(fco_comm_t comm, void* ptr);
/* Which symmetric buffer of comm holds [ptr, ptr + bytes), for kernels written outside libfco
 * (fco.triton) that store into peers' outputs as the C operators do. Not collective.
 * [OUT] slot: its slot k (0..FCO_MAX_SYMMETRIC−1; the same on every rank for buffers of the
 *       same collective fco_mem_alloc call), −1 when no buffer of comm holds the whole range
 * [OUT] offset: ptr's byte offset in that buffer (0 when slot is −1)
 * [OUT] peer_table: NULL, or the device address of this rank's table of every rank's buffers
 *       as this rank's kernels address them: void* [FCO_MAX_SYMMETRIC][FCO_MAX_GPU_RANKS], entry
 *       [k][p] = rank p's buffer k (NULL where p has none); NULL on the cpu transport, whose
 *       buffers peers cannot store into. Valid until fco_comm_destroy; entries change with
 *       fco_mem_alloc / fco_mem_free. Any of slot, offset, peer_table may be NULL. */
fco_result_t fco_mem_find(fco_comm_t comm, const void* ptr, size_t bytes, int* slot,
                          size_t* offset, void** peer_table);

/* Group calls (like ncclGroupStart/End), per thread, nestable. Between them, operations are
 * recorded; fco_group_end issues them together: on the local transport as one grid covering
 * every virtual rank, on nccl inside one ncclGroupStart/End, on cpu one thread per rank.
 * When one thread drives several ranks of a fco_comm_init_all world in a group, each rank's
 * calls must be the same operators in the same order (else none of that world's calls is
 * issued: FCO_ERR_INVALID_ARGUMENT naming both ranks' calls). Calls on different
 * communicators (or worlds) in one group run in the order they were queued, as NCCL's fused
 * kernels would too: keep that order the same on every rank (threads that queue two worlds in
 * opposite orders wait for each other until FCO_TIMEOUT_MS).
 * fco_group_end returns the first failure of the group's operations, an operator call that a
 * rank's own argument checks refused included (it returned that code, was not issued, and its
 * message stays in fco_last_error(NULL) unless a later failure replaced it). When one thread
 * drives several ranks of a fco_comm_init_all world in a group, fco_group_end then issues none
 * of that world's calls of the group: they fail with the refused operator call's code, each
 * rank's fco_last_error naming it, and the communicators stay usable. A query, fco_mem_* or
 * fco_comm_reserve failing inside a group cancels nothing. Otherwise (one thread or process per
 * rank) the peers' calls run without the refused one and, like an NCCL collective missing a
 * rank, wait for it until FCO_TIMEOUT_MS (FCO_ERR_TIMEOUT; the communicators are then
 * unusable). Checks that need every rank's arguments (shapes that differ, fco_gemm_alltoall's
 * counts) report on every rank; bad embedding indices / offsets only on the rank holding them.
 * FCO_ERR_OUT_OF_MEMORY when fco_group_end cannot get host memory for its bookkeeping: none of
 * the group's calls is issued, and each queued call's communicator holds the message. */
fco_result_t fco_group_start(void);
fco_result_t fco_group_end(void);

/* ------------------------------------------------------------------------------------------ */
/* AllReduce (sum): out[i] = Σ_r in_r[i] on every rank. in == out allowed (in place).
 * [IN]  in, out  device pointers (host pointers on the cpu transport), aligned to the element
 *                size (GPU transports), 16-byte aligned for the fused impls (impl 1 falls back
 *                to a scalar path when they are not)
 * [IN]  count    elements, 1 ≤ count ≤ 2^40, the same on every rank
 * [IN]  dtype    FCO_F32, FCO_F16 or FCO_BF16, the same on every rank
 * [IN]  impl     0 = ncclAllReduce (local transport: copy-based reduction; cpu: shared-memory
 *                copy then reduce), 1 = one-shot over the peer table (each block pushes its slice
 *                to every peer, signals, then reduces what arrived), FCO_IMPL_AUTO
 * [IN]  stream   cudaStream_t or NULL
 * Sums in fp32 in rank order 0..P-1, so every rank gets bit-identical results.
 * Workspace per rank: impl 1 and cpu impl 0: 2 · P · roundup(count · dtype size, 256) bytes;
 * local impl 0: roundup(count · dtype size, 256); nccl impl 0: none. */
#define FCO_ALLREDUCE_NUM_IMPLS 2
fco_result_t fco_allreduce(fco_comm_t comm, const void* in, void* out, size_t count,
                           fco_dtype_t dtype, int impl, void* stream);
/* [OUT] bytes: data workspace fco_allreduce needs per rank on this communicator for these
 * arguments (FCO_IMPL_AUTO resolved as the call would). Not collective. */
fco_result_t fco_allreduce_workspace(fco_comm_t comm, size_t count, fco_dtype_t dtype, int impl,
                                     size_t* bytes);
/* Name of an allreduce impl ("nccl" / "copy" / "oneshot" ...) or NULL when out of range;
 * "auto" for FCO_IMPL_AUTO. */
const char* fco_allreduce_impl_name(fco_comm_t comm, int impl);

/* ---- GEMV + AllReduce (src/ops/gemv_allreduce.c) ---------------------------------------- */
/* The row-parallel linear of tensor-parallel decode: rank r holds x_r [M, K_r] and
 * W_r [N, K_r] (row-major, the layout of a torch Linear weight); every rank receives
 *   y [M, N] = Σ_r x_r · W_r^T (+ bias, added once).
 * [IN]  x      device pointer (host pointer on cpu), M·K elements, row-major, contiguous
 * [IN]  w      N·K elements, row-major (row n = output column n), contiguous
 * [IN]  bias   N elements or NULL; NULL or not must be the same on every rank, and so must its
 *              values (a replicated bias: each impl adds one rank's copy — on GPUs impls 0 and
 *              3 rank 0's, impl 1 each rank its own, impl 2 each column's owner's; cpu: each
 *              rank its own, every impl (the reference) —, so copies that differ give
 *              impl-dependent results)
 * [OUT] y      M·N elements, row-major; must not overlap x, w or bias
 * [IN]  M      1..FCO_GEMV_ALLREDUCE_MAX_M (64), the same on every rank; larger M returns
 *              FCO_ERR_UNSUPPORTED (use a GEMM, then fco_allreduce)
 * [IN]  N      1 ≤ N < 2^31 − 2^16, the same on every rank
 * [IN]  K      1 ≤ K < 2^31 (N · K ≤ 2^40), this rank's slice of the reduction dimension (may
 *              differ across ranks)
 * [IN]  dtype  FCO_F32, FCO_F16 or FCO_BF16, the same on every rank; fp32 accumulation,
 *              y in dtype. Pointers must be aligned to the element size; rows that are not
 *              16-byte aligned take a slower scalar path in the fused impls.
 * [IN]  impl   one of
 *                0  cuBLAS GEMM (fp32 compute) into y, then ncclAllReduce in place (local
 *                   transport: the copy all-reduce; cpu: the reference)
 *                1  fused one-shot: each 16-column tile's fp32 partial is pushed to every peer
 *                   as soon as it is computed; every rank sums all tiles in rank order
 *                   (bit-identical on all ranks). Its variants on GPUs (their knobs in
 *                   docs/gemv_allreduce.md):
 *                   - M ≤ 16: the partials travel as LL words {value, flag} polled by the
 *                     receiver (no fence, no flag) where a rank pushes ≤ 2 MiB of them (on local
 *                     not above 4 ranks, nor at M 9..16 in bf16 / f16 except at 2 ranks with
 *                     N ≤ 4096: the grouped tile below instead; FCO_GEMV_AR_LL=1: wherever they
 *                     fit, =0: never); bf16 / f16 partials travel there rounded to the dtype, two a
 *                     word (half the bytes; impl 0's precision, which rounds y before its
 *                     all-reduce; still the same bits on every rank), FCO_GEMV_LL_FP32=1 sends
 *                     fp32 words (the plain one-shot's bits);
 *                   - M ≤ 16 where N ≤ 32·SMs: blocks (LL or not) of 8 warps instead of 4
 *                     (another fp32 order of K, the same bits on every rank; FCO_GEMV_WIDE=0
 *                     turns it off);
 *                   - M 9..64 in bf16 / f16 (not with LL): groups of 128 columns share x through
 *                     shared memory (TMA-fed wgmma; groups of 64 where those keep more SMs
 *                     streaming W; FCO_GEMV_GROUP_TMA=4 / 8 forces either, at M 1..8 too; =0:
 *                     below M 33 the one-tile kernels, at M 33..64 groups of 64 or 32 on the
 *                     cp.async tile). Where the groups leave SMs idle a group's K is split over
 *                     up to 4 blocks of the rank (a cluster, the slices handed over in shared
 *                     memory; a block with several groups takes them as rounds of one TMA ring,
 *                     FCO_GEMV_ROUNDS; a pair's two blocks finalise half the group each,
 *                     FCO_GEMV_PAIR_FIN; also FCO_GEMV_GROUP, FCO_GEMV_SPLIT). Their partials
 *                     are pushed rounded to the dtype as the LL words', FCO_GEMV_GROUP_FP32=1
 *                     pushes fp32 ones.
 *                2  fused two-phase: tile t is reduced by one owner rank, which pushes the
 *                   result to every peer (for large M·N; at M 33..64 in bf16 / f16 on impl 1's
 *                   groups, each block computing the groups owned elsewhere first)
 *                3  unfused: cuBLAS GEMM into y, then fco's one-shot all-reduce (fco_allreduce
 *                   impl 1) in place: for M where the fused tiles lose to cuBLAS but fco's
 *                   all-reduce still beats NCCL's (cpu: the reference)
 *                FCO_IMPL_AUTO  the rule and its measurements: src/ops/gemv_allreduce.c
 *              The fused impls are launched with programmatic dependent launch (sm_90: the next
 *              call's blocks prefetch their W into L2 while this call ends; FCO_GEMV_PDL=0
 *              turns it off). They let a next kernel that is itself launched with programmatic
 *              stream serialization start early: such a kernel must call
 *              cudaGridDependencySynchronize() before it reads y (the PDL contract).
 * [IN]  stream cudaStream_t or NULL
 * Collective. Workspace per rank, T = ceil(N/16), S = roundup(T·16·M·4, 256),
 * Sg = roundup(T·16·M·esize, 256): impl 1: 2·P·S (on GPUs at M 33..64 in bf16 / f16 with
 * N ≤ 10240 also 2·3·roundup(ceil(T/8)·8·16·M·4, 256) for split groups; for M ≤ 16 the LL
 * words: docs/gemv_allreduce.md); impl 2: 2·(P·S + Sg) (and the same split area as impl 1);
 * impl 3 (P > 1): 2·P·roundup(M·N·esize, 256); impl 0: none (nccl), roundup(M·N·esize, 256)
 * (local); cpu: 2·P·roundup(M·N·4, 256). impls 0 and 3 use a cuBLAS
 * handle per device and a cuBLAS workspace per (device, stream), made at the first eager call
 * on that stream: make one eager call on the stream you will capture before capturing a CUDA
 * graph (a capture on a stream without one runs cuBLAS without a workspace, maybe slower; before
 * any eager call on the device it returns FCO_ERR_INVALID_USAGE; graphs captured on one stream
 * share its workspace: replay them one at a time, as PyTorch's cuBLAS workspaces require). That
 * setup allocates in relaxed capture mode (as fco_gemm_alltoall's impls 0 / 2 copy the counts
 * and synchronize without counts_host): another thread's capture in progress (global mode,
 * torch.cuda.graph's default, included) neither refuses it nor is broken by it. With
 * env FCO_CHECK_ARGS=1 the fused kernels also compare (M, N, dtype, bias, impl) across ranks on
 * the device before moving data, and report a mismatch as FCO_ERR_INVALID_ARGUMENT through
 * fco_comm_get_async_error (the local and cpu transports compare them on the host at every
 * call). */
#define FCO_GEMV_ALLREDUCE_NUM_IMPLS 4
#define FCO_GEMV_ALLREDUCE_MAX_M 64
fco_result_t fco_gemv_allreduce(fco_comm_t comm, const void* x, const void* w, const void* bias,
                                void* y, size_t M, size_t N, size_t K, fco_dtype_t dtype,
                                int impl, void* stream);
/* [OUT] bytes: data workspace fco_gemv_allreduce needs per rank for these arguments
 * (FCO_IMPL_AUTO resolved as the call would from this rank's arguments; where the local
 * transport's batch then revises it to impl 0, that needs less). Not collective. */
fco_result_t fco_gemv_allreduce_workspace(fco_comm_t comm, size_t M, size_t N, size_t K,
                                          fco_dtype_t dtype, int impl, size_t* bytes);
/* Name of a gemv_allreduce impl ("cublas_nccl", "oneshot", "twophase", ...) or NULL when out
 * of range; "auto" for FCO_IMPL_AUTO. */
const char* fco_gemv_allreduce_impl_name(fco_comm_t comm, int impl);

/* ---- Embedding bag + All-to-All (src/ops/embedding_alltoall.c) ------------------------- */
/* DLRM's model-parallel embedding lookup followed by the All-to-All that hands every sample's
 * pooled vectors to the rank that owns the sample (TorchRec table-wise sharding): exactly what
 * a pooled lookup (F.embedding_bag per table), all_to_all_single and a permute produce.
 *
 * Sharding: P ranks; T tables with global ids in rank order: rank r owns the T_r tables
 * toff_r .. toff_r + T_r - 1, toff_r = Σ_{q<r} T_q (T_r may be 0 and differ per rank). One
 * dimension D for every table. The global batch B = Σ_s b_s is split into per-rank batch
 * sizes: rank s owns samples bstart_s .. bstart_s + b_s - 1, bstart_s = Σ_{q<s} b_q.
 *
 * Input on rank r (its local tables over the whole global batch):
 *   weight   [Σ_t rows_t, D] of dtype: the T_r local tables packed one after the other
 *            (table t starts at row Σ_{t'<t} rows_t'), row-major, rows D elements apart
 *   offsets  [T_r·B + 1], CSR, table-major: bag (t, b) of local table t and global sample b
 *            is indices[offsets[t·B + b] .. offsets[t·B + b + 1])
 *   indices  [num_indices] rows of table t, 0 ≤ index < rows_t
 *   per_sample_weights  [num_indices] floats or NULL (all 1)
 * Output on rank s: out [b_s, T, D] of dtype, sample-major, tables in global order:
 *   out[i][toff_r + t][:] = pool over bag (t, bstart_s + i) of rank r of w_k · weight_r[t][idx_k][:]
 *   pooling sum: Σ_k; mean: Σ_k / n with n = the bag's length; an empty bag gives zeros.
 * Accumulation is fp32 in bag order; the result is rounded once to dtype.
 *
 * Bad data is found on the device: an index outside its table (index < 0 or ≥ rows_t) is
 * skipped, a bag whose offsets decrease or leave [0, num_indices] is treated as empty; nothing
 * is read outside the inputs or written outside out. It is reported as
 * FCO_ERR_INVALID_ARGUMENT naming the global table id and the position (in indices, or in
 * offsets; with several bad entries, one of them — which one is not specified: the kernels'
 * order of work decides) on the rank holding it — by the call on the cpu transport, by
 * fco_comm_get_async_error (and every later operator call) on GPU transports, where the
 * communicator must then be destroyed.
 *
 * [IN]  comm              communicator; collective (every rank calls, in one group when one
 *                         thread drives several ranks)
 * [IN]  weight            device pointer (host on cpu), aligned to the dtype size; NULL only
 *                         when T_r == 0 or every local table has 0 rows. 16-byte alignment
 *                         (and D·dtype size a multiple of 16) selects the vector path on
 *                         GPUs; anything else is correct, slower.
 * [IN]  table_rows        host array [T_r]: 0 ≤ rows_t ≤ 2^40 of each local table; NULL when
 *                         T_r == 0
 * [IN]  tables_per_rank   host array [P]: T_q ≥ 0, T = Σ T_q with 1 ≤ T ≤ FCO_EMBEDDING_MAX_TABLES
 * [IN]  batch_per_rank    host array [P]: b_q ≥ 0, B = Σ b_q with 1 ≤ B < 2^31
 * [IN]  dim               D, 1 ≤ D ≤ FCO_EMBEDDING_MAX_DIM
 * [IN]  dtype             FCO_F32, FCO_F16 or FCO_BF16: of the tables and of out
 * [IN]  offsets, indices  device pointers (host on cpu) of index_type, aligned to its size;
 *                         offsets may be NULL only when T_r == 0, indices only when
 *                         num_indices == 0
 * [IN]  num_indices       elements of indices (and of per_sample_weights), 0..2^40
 * [IN]  index_type        FCO_EMB_INDEX_I32 or FCO_EMB_INDEX_I64 (offsets and indices)
 * [IN]  per_sample_weights  device pointer (host on cpu) to floats, 4-byte aligned, or NULL
 * [IN]  pooling           FCO_EMB_POOL_SUM or FCO_EMB_POOL_MEAN
 * [OUT] out               device pointer (host on cpu) [b_s, T, D], aligned to the dtype size;
 *                         NULL only when b_s == 0. Must not overlap the inputs. Inside a
 *                         symmetric buffer (fco_mem_alloc) and 16-byte aligned, the fused lean
 *                         kernel's peers store into it directly (no landing copy; otherwise it
 *                         is landed as any out); FCO_EA_DIRECT=0 turns that off.
 * [IN]  impl              0 = pooled-lookup kernel into a send buffer [B, T_r, D], the
 *                         All-to-All (grouped ncclSend/ncclRecv on nccl; copies between virtual
 *                         ranks on local; shared memory on cpu), then a permute kernel into out;
 *                         1 = fused: a persistent kernel whose blocks pool (table, sample chunk)
 *                         tiles and store each pooled vector once (blocks on part of the SMs take
 *                         remote tiles first, the others local ones), straight
 *                         over NVLink into the destination's symmetric workspace, laid out as its
 *                         out; per-source arrival counters (epoch-tagged) tell the destination
 *                         which sample groups are complete, and it lands them into out;
 *                         FCO_IMPL_AUTO (1 with P > 1 on GPUs; 0, the lookup alone, for one
 *                         rank on a GPU; rule in src/ops/embedding_alltoall.c)
 * [IN]  stream            cudaStream_t or NULL
 * Every rank must agree on T, D, B, dtype, pooling, tables_per_rank and batch_per_rank
 * (checked: FCO_ERR_INVALID_ARGUMENT naming the field); index_type, num_indices and whether
 * weights are given are per rank. The host arrays (table_rows, tables_per_rank, batch_per_rank)
 * are read while the call (or, inside a group, fco_group_end) runs and may be reused after it
 * returns; GPU kernels take their values by value, so a captured CUDA graph replays with the
 * values of capture time and needs no host-to-device copy.
 * Workspace per rank, with R = roundup(max_s b_s · T · D · size, 256) and
 * S = roundup(max_q T_q · B · D · size, 256): none when P == 1; impl 0: S + R on GPUs, S on
 * cpu; impl 1: 2·R on GPUs (two halves alternating with the epoch), R on cpu. */
typedef enum {
  FCO_EMB_POOL_SUM = 0,
  FCO_EMB_POOL_MEAN = 1,
  FCO_EMB_NUM_POOLINGS
} fco_emb_pooling_t;

typedef enum {
  FCO_EMB_INDEX_I32 = 0,
  FCO_EMB_INDEX_I64 = 1,
  FCO_EMB_NUM_INDEX_TYPES
} fco_emb_index_t;

#define FCO_EMBEDDING_ALLTOALL_NUM_IMPLS 2
#define FCO_EMBEDDING_MAX_TABLES 1024 /* T, all ranks together (GPU kernels take rows by value) */
#define FCO_EMBEDDING_MAX_DIM 65536

fco_result_t fco_embedding_alltoall(fco_comm_t comm, const void* weight, const int64_t* table_rows,
                                    const int32_t* tables_per_rank, const int64_t* batch_per_rank,
                                    int64_t dim, fco_dtype_t dtype, const void* offsets,
                                    const void* indices, int64_t num_indices,
                                    fco_emb_index_t index_type, const float* per_sample_weights,
                                    fco_emb_pooling_t pooling, void* out, int impl, void* stream);
/* [OUT] bytes: data workspace fco_embedding_alltoall needs per rank on this communicator for
 * these arguments (FCO_IMPL_AUTO resolved as the call would). Not collective. */
fco_result_t fco_embedding_alltoall_workspace(fco_comm_t comm, const int32_t* tables_per_rank,
                                              const int64_t* batch_per_rank, int64_t dim,
                                              fco_dtype_t dtype, int impl, size_t* bytes);
/* Name of an impl ("nccl" / "copy" / "fused") or NULL when out of range;
 * "auto" for FCO_IMPL_AUTO. */
const char* fco_embedding_alltoall_impl_name(fco_comm_t comm, int impl);

/* ---- GEMM + All-to-All (src/ops/gemm_alltoall.c) ---------------------------------------- */
/* MoE expert down-projection + combine: a grouped GEMM, then every output row goes back to the
 * rank its token came from (exactly: grouped GEMM, permute, all_to_all_single).
 *
 * Rank r hosts E_r = num_experts local experts (E_r may differ across ranks).
 * [IN]  a          device (host on cpu) [a_rows, K] activations; rows grouped by local expert,
 *                  then by source rank: expert 0's rows from rank 0, from rank 1, ..., then
 *                  expert 1's, ...
 * [IN]  a_rows     rows allocated in `a` (capacity, ≥ Σ counts), 0..2^31-1; the SAME on every
 *                  rank
 * [IN]  w          device (host on cpu) weights of the local experts as ONE packed tensor:
 *                  [E_r, K, N] (FCO_W_KN: Y = A·W_e) or [E_r, N, K] (FCO_W_NK: torch Linear
 *                  weight, Y = A·W_eᵀ)
 * [IN]  w_layout   FCO_W_KN or FCO_W_NK, the same on every rank
 * [IN]  num_experts E_r, 1..FCO_GEMM_ALLTOALL_MAX_EXPERTS
 * [IN]  counts     DEVICE (host on cpu) int32 [E_r][P]: counts[e][s] rows of local expert e
 *                  came from rank s. Read on the device only (fused impls): a call can be
 *                  captured in a CUDA graph and replayed with new counts.
 * [IN]  counts_host NULL, or a host copy of `counts` (a hint: impls 0 and 2 size their cuBLAS
 *                  GEMMs from it without a device→host copy; it must hold the same values:
 *                  impls 0 and 2 compare on the device, a difference is
 *                  FCO_ERR_INVALID_ARGUMENT on every rank, nothing written — impl 0 at one
 *                  rank reports it but out holds the GEMMs of counts_host's sizes)
 * [IN]  recv_rows_host NULL, or host int32 [P]: rows this rank receives from each rank s
 *                  (Σ_e counts_s[e][me]: the input splits of the dispatch all-to-all); used by
 *                  impl 0 on the nccl transport. Both hints are read when the call runs: inside
 *                  fco_group_start/end they must stay valid (and unchanged) until
 *                  fco_group_end returns.
 * [OUT] out        device (host on cpu) [out_rows, N]: rows from rank 0 (its expert 0's,
 *                  expert 1's, ...), then from rank 1, ...; row order kept. Rows past
 *                  Σ_r Σ_e counts_r[e][me] are not written. Inside a symmetric buffer
 *                  (fco_mem_alloc, all out_rows × N of it), impls 1 and 2 have the peers store
 *                  into it directly (no staging, no landing copy); FCO_GA_DIRECT=0 turns that off.
 * [IN]  out_rows   rows allocated in `out` (capacity), 0..2^31-1; the SAME on every rank.
 *                  Nothing is ever written past it: counts that need more (or negative counts,
 *                  or counts whose sum exceeds a_rows) make every rank write nothing and report
 *                  FCO_ERR_INVALID_ARGUMENT (device-side for fused impls: from
 *                  fco_comm_get_async_error / the next operator call). With hints, a rank whose
 *                  counts_host (negative, sum over a_rows) or recv_rows_host (negative, sum over
 *                  out_rows) shows it refuses its call on the host: nothing is issued there,
 *                  and its peers are handled as for any argument one rank alone refuses
 *                  (fco_group_start: in a one-thread group, none issued; else they time out).
 *                  Except impl 0 on nccl with recv_rows_host and one rank per process or
 *                  thread: its peers' ncclSend / ncclRecv with a rank that refused never
 *                  complete (NCCL's waits are not bounded by FCO_TIMEOUT_MS): the job hangs.
 *                  Check the counts before such calls, or pass no recv_rows_host (the totals'
 *                  ncclAllGather then carries every rank's validity and every rank refuses).
 * [IN]  k, n       GEMM sizes, 1 ≤ k, n < 2^31, the same on every rank; a_rows · k, a_rows · n,
 *                  out_rows · n and E_r · k · n ≤ 2^40 elements. out must not overlap a, w,
 *                  counts or the host hints.
 * [IN]  dtype      FCO_F32, FCO_F16 or FCO_BF16 (fp32 accumulation)
 * [IN]  impl       0 = cuBLAS GEMM per expert + all-to-all (nccl: pack + grouped
 *                  ncclSend/ncclRecv; local: copy kernel; cpu: reference),
 *                  1 = fused persistent tensor-core GEMM whose blocks push each finished tile to
 *                  its destination and signal it ("tiles"),
 *                  2 = cuBLAS GEMM in row chunks, each chunk pushed while the next computes
 *                  ("chunks"), FCO_IMPL_AUTO (rule in src/ops/gemm_alltoall.c)
 * [IN]  stream     cudaStream_t or NULL
 * Host synchronisation: impl 1 never. Impls 0 and 2 without counts_host copy counts to the host
 * and synchronise `stream` (what the unfused path does today), so they cannot be captured
 * (FCO_ERR_INVALID_USAGE while capturing); impl 0 on nccl also needs recv_rows_host, or else
 * a communicator of fco_comm_init / fco_comm_init_from_nccl (it then exchanges the totals with
 * ncclAllGather and synchronises): on a fco_comm_init_all world (P > 1), even one driven one
 * thread per rank, explicit impl 0 without it is refused (FCO_ERR_INVALID_USAGE).
 * Impls 0 and 2 keep cuBLAS state as fco_gemv_allreduce's impl 0 does (a handle per device, a
 * workspace per (device, stream): warm up on the stream you will capture). Impl 2 pushes on an
 * internal stream forked from and joined back to `stream` within the call, one per `stream` (up
 * to 8 a thread and device, then the least recently used is handed over): calls of two
 * communicators on two streams do not wait for each other. A thread that ends gives its push
 * streams back (the main thread's stay until the process exits). A failure after the fork
 * still joins it back, so a capture that holds the failed call can end; one after impl 2 queued
 * its exchange kernel (a push or finish launch failing) leaves the call half done on the device,
 * so the communicator keeps that error (every later call returns it: destroy it).
 * With hints, captured graphs keep the hinted sizes: replays with other counts need impl 1
 * (impls 0 and 2 compare the device counts with the captured ones and report a difference as
 * FCO_ERR_INVALID_ARGUMENT). AUTO (the same on every rank: on local, ranks whose E_r or hints
 * differ agree on one choice; rule and measurements in src/ops/gemm_alltoall.c and
 * docs/gemm_alltoall.md "AUTO"): impl 1 only for bf16/f16 with k, n multiples of 8, and then
 * - P > 1 on nccl: where k ≤ 2048 (fine-grained MoE: the GEMM is bound by reading W);
 * - P > 1 on local: where k ≤ 2048, a_rows / E_r · n < 2^20 and, above two ranks,
 *   a_rows ≤ 2048 (the virtual ranks share one GPU's SMs);
 * - P = 1 (impl 0 writes `out` directly: nothing to exchange): never where counts_host shows
 *   balanced routing with rows · n ≤ 2^21 (impl 0 runs one batched GEMM); at k ≤ 2048 where
 *   the mean rows an expert · n < 2^21 and no expert's rows · n > 2^23 (counts_host when
 *   given, else the mean of a_rows); at k > 2048 where no expert has more than 256 rows.
 * Otherwise impl 2 first on nccl at P > 1, impl 0 first elsewhere, then the other of the two,
 * then impl 1 (the one impl that captures without counts_host). On the cpu transport: 1.
 * AUTO reads each rank's hints and whether its stream is capturing: with one process per rank
 * (nccl), pass the hints (both or neither) and capture alike on every rank, or name the impl —
 * ranks that choose impls 1 and 2 differently (or the Triton operator beside impl 2) are found
 * from the headers: every rank reports FCO_ERR_INVALID_USAGE (a Triton rank
 * FCO_ERR_INVALID_ARGUMENT) and writes nothing; impl 0 beside a fused impl is not detected
 * (FCO_ERR_TIMEOUT, or a hang in NCCL).
 * Accuracy: bf16/f16 with fp32 accumulation; f32 is computed in fp32 (FFMA in impl 1).
 * Collective: every rank calls it (one group on fco_comm_init_all worlds). */
#define FCO_GEMM_ALLTOALL_NUM_IMPLS 3
#define FCO_GEMM_ALLTOALL_MAX_EXPERTS 256
#define FCO_W_KN 0 /* w is [E, K, N] */
#define FCO_W_NK 1 /* w is [E, N, K] (torch Linear weight layout) */
fco_result_t fco_gemm_alltoall(fco_comm_t comm, const void* a, int64_t a_rows, const void* w,
                               int w_layout, int num_experts, const int32_t* counts,
                               const int32_t* counts_host, const int32_t* recv_rows_host,
                               void* out, int64_t out_rows, int64_t k, int64_t n,
                               fco_dtype_t dtype, int impl, void* stream);
/* [OUT] bytes: data workspace fco_gemm_alltoall needs per rank for these arguments
 * (FCO_IMPL_AUTO: the most any impl it may pick needs). Not collective. */
fco_result_t fco_gemm_alltoall_workspace(fco_comm_t comm, int64_t a_rows, int64_t out_rows,
                                         int64_t k, int64_t n, fco_dtype_t dtype, int impl,
                                         size_t* bytes);
/* Name of an impl ("nccl" / "copy" / "ref" / "tiles" / "chunks") or NULL when out of range;
 * "auto" for FCO_IMPL_AUTO. */
const char* fco_gemm_alltoall_impl_name(fco_comm_t comm, int impl);

#ifdef __cplusplus
}
#endif
#endif /* FCO_H_ */
