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
 *    they complete before returning. Failures found on the device after the call returned
 *    (a peer that never signals, a bad index) are reported by fco_comm_get_async_error() and by
 *    every later call on that communicator, which must then be destroyed.
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
 * fco_config_init() first, then change fields. Zero / negative fields mean "default". */
typedef struct {
  uint32_t size;           /* sizeof(fco_config_t), set by fco_config_init (ABI check) */
  int32_t transport;       /* fco_transport_t; AUTO → env FCO_TRANSPORT, else by hardware  */
  int32_t timeout_ms;      /* bound on every wait; <= 0 → env FCO_TIMEOUT_MS, else 30000    */
  int32_t device;          /* fco_comm_init: CUDA device of this rank; < 0 → current device */
  int64_t max_workspace_bytes; /* cap on the symmetric workspace per rank; <= 0 → no cap   */
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

/* Human-readable name of a result code ("unknown result" for values outside the table). */
const char* fco_result_string(fco_result_t result);
/* Name of a dtype ("f32", "f16", "bf16") or NULL. Size in bytes, 0 when unknown. */
const char* fco_dtype_name(fco_dtype_t dtype);
size_t fco_dtype_size(fco_dtype_t dtype);
/* Name of a transport ("auto", "nccl", "local", "cpu") or NULL. */
const char* fco_transport_name(fco_transport_t transport);

/* Detailed message of the last failure on `comm` (or of this thread's last call that had no
 * valid communicator, when comm is NULL). Never NULL; "" when nothing failed. The string stays
 * valid until the next failing call on the same communicator / thread. */
const char* fco_last_error(fco_comm_t comm);

/* [OUT] id: a fresh bootstrap id. Called by ONE rank, then broadcast to the others out of band
 * (MPI_Bcast, torch.distributed, a file, fork). On a machine with a GPU it carries an NCCL
 * unique id. Not collective. */
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
 * fco_group_start()/fco_group_end() (or from one thread per rank, except on local). */
fco_result_t fco_comm_init_all(fco_comm_t* comms, int ndev, const int* devs,
                               const fco_config_t* cfg);

/* Free everything the communicator holds. NULL accepted. Not collective, but destroy every
 * rank's communicator: peers may still be reading a workspace being freed only if an
 * operation is still in flight, so the call first waits for this rank's work to finish. */
fco_result_t fco_comm_destroy(fco_comm_t comm);

/* [OUT] rank / size / transport actually used. */
fco_result_t fco_comm_rank(fco_comm_t comm, int* rank);
fco_result_t fco_comm_size(fco_comm_t comm, int* size);
fco_result_t fco_comm_transport(fco_comm_t comm, fco_transport_t* transport);

/* Error found asynchronously (on the device, or by a previous call): FCO_OK when none,
 * FCO_ERR_TIMEOUT when a peer did not signal within the bound, FCO_ERR_INVALID_ARGUMENT for bad
 * data found on the device. Does not wait for the stream. Message via fco_last_error. */
fco_result_t fco_comm_get_async_error(fco_comm_t comm);

/* Symmetric workspace (per rank, grown on demand). Operations grow it collectively when they
 * need more; growth allocates, so it cannot happen while a stream is being captured into a
 * CUDA graph: call fco_comm_reserve before capturing. Collective (same bytes on every rank);
 * on a communicator of fco_comm_init_all it reserves for every rank of that group at once.
 * [IN] bytes: data workspace bytes per rank to have at least. */
fco_result_t fco_comm_reserve(fco_comm_t comm, size_t bytes);
/* [OUT] bytes: data workspace bytes per rank held now. */
fco_result_t fco_comm_workspace_bytes(fco_comm_t comm, size_t* bytes);

/* Group calls (like ncclGroupStart/End), per thread, nestable. Between them, operations are
 * recorded; fco_group_end issues them together: on the local transport as one grid covering
 * every virtual rank, on nccl inside one ncclGroupStart/End, on cpu one thread per rank.
 * fco_group_end returns the first failure of the group's operations. */
fco_result_t fco_group_start(void);
fco_result_t fco_group_end(void);

/* ------------------------------------------------------------------------------------------ */
/* AllReduce (sum): out[i] = Σ_r in_r[i] on every rank. in == out allowed (in place).
 * [IN]  in, out  device pointers (host pointers on the cpu transport), 16-byte aligned for the
 *                fused impls (impl 1 falls back to a scalar path when they are not)
 * [IN]  count    elements, ≥ 1, the same on every rank
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
/* Name of an allreduce impl ("nccl" / "copy" / "oneshot" ...) or NULL when out of range. */
const char* fco_allreduce_impl_name(fco_comm_t comm, int impl);

/* ---- GEMV + AllReduce (src/ops/gemv_allreduce.c) ---------------------------------------- */

/* ---- Embedding bag + All-to-All (src/ops/embedding_alltoall.c) ------------------------- */

/* ---- GEMM + All-to-All (src/ops/gemm_alltoall.c) ---------------------------------------- */

#ifdef __cplusplus
}
#endif
#endif /* FCO_H_ */
