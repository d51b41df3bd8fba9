/*
 * comm.c — communicator lifecycle: configuration, unique ids, init (one rank per process,
 * adopted NCCL communicator, several ranks in one process), destroy, queries, async errors,
 * workspace reservation. Transport-specific work is delegated through fco_transport_ops_t.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../cuda/dev.h" /* fco_dev_rank_t: plain C, also in CPU-only builds */

fco_result_t fco_config_init(fco_config_t* cfg) {
  if (!cfg) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "fco_config_init: cfg is NULL");
  memset(cfg, 0, sizeof *cfg);
  cfg->size = (uint32_t)sizeof *cfg;
  cfg->transport = FCO_TRANSPORT_AUTO;
  cfg->device = -1;
  return FCO_OK;
}

static fco_result_t transport_from_env(fco_transport_t* t) {
  const char* v = getenv("FCO_TRANSPORT");
  *t = FCO_TRANSPORT_AUTO;
  if (!v || !*v || !strcasecmp(v, "auto")) return FCO_OK;
  for (int i = 1; i < FCO_NUM_TRANSPORTS; i++)
    if (!strcasecmp(v, fco_transport_name((fco_transport_t)i))) {
      *t = (fco_transport_t)i;
      return FCO_OK;
    }
  return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                       "FCO_TRANSPORT='%s' is not one of auto, nccl, local, cpu", v);
}

/* Resolve cfg (NULL = defaults) into out: transport never AUTO, timeout > 0. */
static fco_result_t resolve_config(const fco_config_t* in, fco_config_t* out) {
  fco_config_init(out);
  if (in) {
    if (in->size != sizeof *in)
      return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                           "config size %u != %zu: initialise it with fco_config_init()",
                           (unsigned)in->size, sizeof *in);
    *out = *in;
  }
  if (out->transport < 0 || out->transport >= FCO_NUM_TRANSPORTS)
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "cfg.transport %d is not an fco_transport_t",
                         (int)out->transport);
  if (out->transport == FCO_TRANSPORT_AUTO) {
    fco_transport_t t;
    FCO_CHECK(transport_from_env(&t));
    if (t == FCO_TRANSPORT_AUTO) t = fco_gpu_count() > 0 ? FCO_TRANSPORT_NCCL : FCO_TRANSPORT_CPU;
    out->transport = t;
  }
  if (out->timeout_ms <= 0) {
    long long ms = fco_env_int("FCO_TIMEOUT_MS", FCO_DEFAULT_TIMEOUT_MS);
    out->timeout_ms = (int32_t)(ms > 0 && ms < (1LL << 30) ? ms : FCO_DEFAULT_TIMEOUT_MS);
  }
  if (fco_env_flag("FCO_DEBUG", 0)) out->debug = 1;
  if (out->transport != FCO_TRANSPORT_CPU && !fco_have_cuda())
    return fco_set_error(NULL, FCO_ERR_UNSUPPORTED,
                         "transport '%s' needs CUDA, but libfco was built without it (CPU-only "
                         "build); use FCO_TRANSPORT=cpu or rebuild with nvcc",
                         fco_transport_name((fco_transport_t)out->transport));
  return FCO_OK;
}

static const fco_transport_ops_t* transport_ops(fco_transport_t t) {
  switch (t) {
    case FCO_TRANSPORT_CPU: return &fco_transport_cpu;
#ifdef FCO_HAVE_CUDA
    case FCO_TRANSPORT_LOCAL: return &fco_transport_local;
    case FCO_TRANSPORT_NCCL: return &fco_transport_nccl;
#endif
    default: return NULL;
  }
}

static uint64_t random_nonce(void) {
  uint64_t x = 0;
  int fd = open("/dev/urandom", O_RDONLY);
  if (fd >= 0) {
    if (read(fd, &x, sizeof x) != (ssize_t)sizeof x) x = 0;
    close(fd);
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  x ^= ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
  return x ? x : 1;
}

_Static_assert(sizeof(fco_uid_t) <= FCO_UNIQUE_ID_BYTES, "fco_uid_t fits fco_unique_id_t");

fco_result_t fco_get_unique_id(fco_unique_id_t* id) {
  if (!id) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "fco_get_unique_id: id is NULL");
  memset(id, 0, sizeof *id);
  fco_uid_t u;
  memset(&u, 0, sizeof u);
  u.magic = FCO_UID_MAGIC;
  u.nonce = random_nonce();
  fco_transport_t t;
  FCO_CHECK(transport_from_env(&t));
#ifdef FCO_HAVE_CUDA
  /* An NCCL id costs a bootstrap listener; make one only where the nccl transport may run. */
  if ((t == FCO_TRANSPORT_AUTO || t == FCO_TRANSPORT_NCCL) && fco_gpu_count() > 0) {
    FCO_CHECK(fco_nccl_get_unique_id(u.nccl_id));
    u.has_nccl = 1;
  }
#endif
  fco_uid_write(id, &u); /* a failed call leaves the id all zero: fco_comm_init refuses it */
  return FCO_OK;
}

static fco_result_t comm_alloc(fco_comm_t* out, int nranks, int rank, const fco_config_t* cfg) {
  fco_comm_t c = (fco_comm_t)calloc(1, sizeof *c);
  if (!c) return fco_set_error(NULL, FCO_ERR_OUT_OF_MEMORY, "cannot allocate a communicator");
  c->nranks = nranks;
  c->rank = rank;
  c->cfg = *cfg;
  c->transport = (fco_transport_t)cfg->transport;
  c->device = cfg->device;
  c->tops = transport_ops(c->transport);
  *out = c;
  return FCO_OK;
}

/* Free a comm whose transport init failed (keeping its message for fco_last_error(NULL)). */
static fco_result_t comm_fail(fco_comm_t c, fco_result_t r) {
  fco_set_error(NULL, r, "%s", c->last_error);
  if (c->tops) c->tops->destroy(c);
  free(c);
  return r;
}

static int max_ranks(fco_transport_t t) {
  return t == FCO_TRANSPORT_CPU ? FCO_MAX_RANKS : FCO_MAX_GPU_RANKS;
}

fco_result_t fco_comm_init(fco_comm_t* comm, int nranks, int rank, const fco_unique_id_t* id,
                           const fco_config_t* cfg_in) {
  if (!comm) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "fco_comm_init: comm is NULL");
  *comm = NULL;
  if (!id) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "fco_comm_init: id is NULL");
  const fco_uid_t uid = fco_uid_read(id), *u = &uid;
  if (u->magic != FCO_UID_MAGIC)
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                         "fco_comm_init: id was not made by fco_get_unique_id");
  fco_config_t cfg;
  FCO_CHECK(resolve_config(cfg_in, &cfg));
  fco_transport_t t = (fco_transport_t)cfg.transport;
  if (nranks < 1 || nranks > max_ranks(t))
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                         "fco_comm_init: nranks %d out of range [1, %d] for transport %s", nranks,
                         max_ranks(t), fco_transport_name(t));
  if (rank < 0 || rank >= nranks)
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                         "fco_comm_init: rank %d out of range [0, %d)", rank, nranks);
  if (t == FCO_TRANSPORT_LOCAL && nranks > 1)
    return fco_set_error(NULL, FCO_ERR_UNSUPPORTED,
                         "the local transport runs all virtual ranks in one process: create them "
                         "with fco_comm_init_all (nranks %d given to fco_comm_init)", nranks);
  if (t == FCO_TRANSPORT_NCCL && !u->has_nccl)
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                         "fco_comm_init: transport nccl, but the id holds no NCCL id (it was made "
                         "where no GPU was visible, or with FCO_TRANSPORT=cpu/local)");
  fco_comm_t c;
  FCO_CHECK(comm_alloc(&c, nranks, rank, &cfg));
  const int dev = fco_device_save(t);
  fco_result_t r = c->tops->init_rank(c, id, NULL);
  if (r != FCO_OK) r = comm_fail(c, r);
  fco_device_restore(dev);
  if (r != FCO_OK) return r;
  fco_log(c, "init: transport %s, device %d", fco_transport_name(c->transport), c->device);
  *comm = c;
  return FCO_OK;
}

fco_result_t fco_comm_init_from_nccl(fco_comm_t* comm, void* nccl_comm, const fco_config_t* cfg_in) {
  if (!comm)
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "fco_comm_init_from_nccl: comm is NULL");
  *comm = NULL;
  if (!nccl_comm)
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                         "fco_comm_init_from_nccl: nccl_comm is NULL");
  fco_config_t cfg;
  fco_config_t tmp;
  if (cfg_in) {
    tmp = *cfg_in;
  } else {
    fco_config_init(&tmp);
  }
  if (tmp.size == sizeof tmp && tmp.transport == FCO_TRANSPORT_AUTO) tmp.transport = FCO_TRANSPORT_NCCL;
  FCO_CHECK(resolve_config(&tmp, &cfg));
  if (cfg.transport != FCO_TRANSPORT_NCCL)
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                         "fco_comm_init_from_nccl: transport must be nccl, not %s",
                         fco_transport_name((fco_transport_t)cfg.transport));
  fco_comm_t c;
  FCO_CHECK(comm_alloc(&c, 0, 0, &cfg));
  const int dev = fco_device_save(c->transport);
  fco_result_t r = c->tops->init_rank(c, NULL, nccl_comm);
  if (r != FCO_OK) r = comm_fail(c, r);
  fco_device_restore(dev);
  if (r != FCO_OK) return r;
  *comm = c;
  return FCO_OK;
}

fco_result_t fco_comm_init_all(fco_comm_t* comms, int ndev, const int* devs,
                               const fco_config_t* cfg_in) {
  if (!comms) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "fco_comm_init_all: comms is NULL");
  /* comms[] is NULL on every failure, as fco_comm_init's *comm (until session 55 a refused
   * config or transport left the caller's values there). */
  for (int i = 0; i < ndev && i < FCO_MAX_RANKS; i++) comms[i] = NULL;
  fco_config_t cfg;
  FCO_CHECK(resolve_config(cfg_in, &cfg));
  fco_transport_t t = (fco_transport_t)cfg.transport;
  if (ndev < 1 || ndev > max_ranks(t))
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                         "fco_comm_init_all: ndev %d out of range [1, %d] for transport %s", ndev,
                         max_ranks(t), fco_transport_name(t));
  for (int i = 0; i < ndev; i++) comms[i] = NULL;
  if (devs && t != FCO_TRANSPORT_CPU) {
    for (int i = 0; i < ndev; i++) {
      if (devs[i] < 0)
        return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "fco_comm_init_all: devs[%d] = %d",
                             i, devs[i]);
      if (t == FCO_TRANSPORT_LOCAL && devs[i] != devs[0])
        return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                             "fco_comm_init_all: the local transport puts every virtual rank on "
                             "one GPU, but devs[%d] = %d != devs[0] = %d", i, devs[i], devs[0]);
      for (int j = 0; j < i && t == FCO_TRANSPORT_NCCL; j++)
        if (devs[j] == devs[i])
          return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT,
                               "fco_comm_init_all: devs[%d] and devs[%d] are both device %d (nccl "
                               "needs one GPU per rank; use the local transport instead)", j, i,
                               devs[i]);
    }
  }
  fco_world_t* w = (fco_world_t*)calloc(1, sizeof *w);
  if (!w) return fco_set_error(NULL, FCO_ERR_OUT_OF_MEMORY, "cannot allocate a world");
  w->n = ndev;
  fco_result_t r = FCO_OK;
  for (int i = 0; i < ndev; i++) {
    r = comm_alloc(&w->comms[i], ndev, i, &cfg);
    if (r != FCO_OK) break;
    w->comms[i]->world = w;
    w->comms[i]->device = t == FCO_TRANSPORT_CPU ? -1 : devs ? devs[i] : t == FCO_TRANSPORT_LOCAL ? 0 : i;
    w->live++;
  }
  const int dev = fco_device_save(t);
  if (r == FCO_OK) r = w->comms[0]->tops->init_all(w->comms, ndev, devs);
  if (r != FCO_OK) {
    if (w->comms[0]) fco_set_error(NULL, r, "%s", w->comms[0]->last_error);
    char msg[FCO_ERRMSG_LEN];
    memcpy(msg, fco_last_error(NULL), sizeof msg);
    int had = w->live; /* comms 0..had-1 exist; destroying the last of them frees w */
    if (had == 0) free(w);
    for (int i = had - 1; i >= 0; i--) fco_comm_destroy(w->comms[i]);
    fco_set_error(NULL, r, "%s", msg);
    fco_device_restore(dev);
    return r;
  }
  for (int i = 0; i < ndev; i++) comms[i] = w->comms[i];
  fco_device_restore(dev);
  return FCO_OK;
}

fco_result_t fco_comm_destroy(fco_comm_t comm) {
  if (!comm) return FCO_OK;
  /* A call on it queued in this thread's open group would run on freed memory at fco_group_end
   * (until session 55 it did). */
  if (fco_group_holds(comm))
    return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                         "fco_comm_destroy: a call on this communicator is queued in this "
                         "thread's open group; call fco_group_end first");
  const int dev = fco_device_save(comm->transport);
  fco_result_t r = comm->tops ? comm->tops->destroy(comm) : FCO_OK;
  fco_device_restore(dev);
  if (r != FCO_OK) fco_set_error(NULL, r, "fco_comm_destroy: %s", comm->last_error);
  fco_world_t* w = comm->world;
  if (w) {
    /* The world's ranks may be destroyed by their own threads (one thread per rank, fco.h):
     * each clears only its own slot, and the live count drops atomically, so exactly the last
     * frees the world (a plain --live raced there: a leak or a use after free). */
    if (comm->rank >= 0 && comm->rank < w->n && w->comms[comm->rank] == comm)
      __atomic_store_n(&w->comms[comm->rank], NULL, __ATOMIC_RELEASE); /* peers' execute reads */
    if (__atomic_sub_fetch(&w->live, 1, __ATOMIC_ACQ_REL) == 0) free(w);
  }
  free(comm);
  return r;
}

#define NEED_COMM(comm, what)                                                          \
  do {                                                                                 \
    if (!(comm))                                                                       \
      return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "%s: comm is NULL", what);  \
  } while (0)

fco_result_t fco_comm_rank(fco_comm_t comm, int* rank) {
  NEED_COMM(comm, "fco_comm_rank");
  if (!rank) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_comm_rank: rank is NULL");
  *rank = comm->rank;
  return FCO_OK;
}

fco_result_t fco_comm_size(fco_comm_t comm, int* size) {
  NEED_COMM(comm, "fco_comm_size");
  if (!size) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_comm_size: size is NULL");
  *size = comm->nranks;
  return FCO_OK;
}

fco_result_t fco_comm_transport(fco_comm_t comm, fco_transport_t* t) {
  NEED_COMM(comm, "fco_comm_transport");
  if (!t) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_comm_transport: out is NULL");
  *t = comm->transport;
  return FCO_OK;
}

fco_result_t fco_comm_poll_async(fco_comm_t comm) {
  if (comm->async_error == FCO_OK && comm->tops && comm->tops->poll_error) {
    fco_result_t r = comm->tops->poll_error(comm);
    if (r != FCO_OK) {
      comm->async_error = r;
      if (!comm->async_msg[0]) memcpy(comm->async_msg, comm->last_error, FCO_ERRMSG_LEN);
    }
  }
  return comm->async_error;
}

fco_result_t fco_comm_get_async_error(fco_comm_t comm) {
  NEED_COMM(comm, "fco_comm_get_async_error");
  return fco_comm_poll_async(comm);
}

fco_result_t fco_comm_reserve(fco_comm_t comm, size_t bytes) {
  NEED_COMM(comm, "fco_comm_reserve");
  if (comm->async_error != FCO_OK) return fco_async_refuse(comm, "fco_comm_reserve");
  if (bytes <= comm->ws_bytes) return FCO_OK;
  /* Beyond any allocation (the operators need at most ~2^47): the GPU transports round the size
   * up and add the LL area, which wrapped near SIZE_MAX until session 55 (a reserve of
   * (size_t)-1 freed the workspace and "grew" it to 0 bytes, FCO_OK). */
  if (bytes > (size_t)1 << 50)
    return fco_set_error(comm, FCO_ERR_OUT_OF_MEMORY,
                         "fco_comm_reserve: %zu bytes per rank overflows any allocation (> 2^50)",
                         bytes);
  if (comm->cfg.max_workspace_bytes > 0 && bytes > (size_t)comm->cfg.max_workspace_bytes)
    return fco_set_error(comm, FCO_ERR_OUT_OF_MEMORY,
                         "workspace of %zu bytes per rank needed, over cfg.max_workspace_bytes = %lld",
                         bytes, (long long)comm->cfg.max_workspace_bytes);
  /* A world is reserved as a whole: this is how one thread driving it (tests, fco-bench)
   * prepares every rank before capturing a graph. */
  if (comm->world) {
    for (int i = 0; i < comm->world->n; i++) {
      const fco_comm_t q = comm->world->comms[i];
      if (!q)
        return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                             "fco_comm_reserve: workspace growth needs every rank of the "
                             "fco_comm_init_all group, but rank %d was destroyed", i);
      /* A rank holding an error would refuse its part of the growth and leave the others
       * waiting in it until the timeout, which then breaks them too. */
      if (q->async_error != FCO_OK)
        return fco_set_error(comm, q->async_error,
                             "fco_comm_reserve: refused: rank %d of this fco_comm_init_all "
                             "group holds an earlier error: %s", i,
                             q->async_msg[0] ? q->async_msg : fco_result_string(q->async_error));
    }
  }
  /* Growth allocates and synchronizes: inside a capture it would break the capture, and on
   * nccl fail past the gate, its peers waiting in NCCL (review rev62). Refused, not sticky. */
  const int cap_dev = fco_capturing_group(comm);
  if (cap_dev >= 0)
    return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                         "fco_comm_reserve: a stream of device %d is being captured into a "
                         "CUDA graph, and growth allocates: reserve before capturing", cap_dev);
  const int dev = fco_device_save(comm->transport);
  const fco_result_t r = comm->world ? comm->tops->grow(comm->world->comms, comm->world->n, bytes)
                                     : comm->tops->grow(&comm, 1, bytes);
  fco_device_restore(dev);
  return r;
}

fco_result_t fco_comm_workspace_bytes(fco_comm_t comm, size_t* bytes) {
  NEED_COMM(comm, "fco_comm_workspace_bytes");
  if (!bytes)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_comm_workspace_bytes: bytes is NULL");
  *bytes = comm->ws_bytes;
  return FCO_OK;
}

fco_result_t fco_comm_device_state(fco_comm_t comm, void** dev_state, size_t* bytes,
                                   uint32_t* version) {
  NEED_COMM(comm, "fco_comm_device_state");
  if (!dev_state || !bytes || !version)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "fco_comm_device_state: dev_state, bytes and version must not be NULL");
  if (!comm->dev_state)
    return fco_set_error(comm, FCO_ERR_UNSUPPORTED,
                         "fco_comm_device_state: the %s transport has no device state (GPU "
                         "transports nccl and local only)", fco_transport_name(comm->transport));
  *dev_state = comm->dev_state;
  *bytes = sizeof(fco_dev_rank_t);
  *version = FCO_DEVICE_STATE_VERSION;
  return FCO_OK;
}
