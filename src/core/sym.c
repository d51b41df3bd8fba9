/*
 * sym.c — symmetric buffers (fco_mem_alloc / fco_mem_free): the slot bookkeeping every
 * transport shares; the transport allocates, maps and frees (sym_alloc / sym_free hooks).
 *
 * Slot k of every rank comes from the same collective call: the k-th fco_mem_alloc when ranks
 * allocate and free in the same order (the contract). On a communicator of fco_comm_init_all
 * driven by one thread (local, nccl: world_grows_together) the first rank's call allocates
 * slot k on every rank of the world and marks it PENDING on the others; their own call of the
 * same order takes it (TAKEN). The cpu transport allocates per rank (nothing is mapped).
 */
#include <string.h>

#include "internal.h"

#define NEED_COMM(comm, what)                                                          \
  do {                                                                                 \
    if (!(comm))                                                                       \
      return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "%s: comm is NULL", what);  \
  } while (0)

/* Slots comm holds (TAKEN or PENDING). */
static int fco_sym_held(fco_comm_t comm) {
  int held = 0;
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) held += comm->sym[k].state != FCO_SYM_FREE;
  return held;
}

int fco_sym_find(fco_comm_t comm, const void* p, size_t bytes, size_t* off) {
  const char* q = (const char*)p;
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) {
    const fco_sym_t* s = &comm->sym[k];
    if (s->state != FCO_SYM_TAKEN || !s->ptr) continue;
    const char* b = (const char*)s->ptr;
    if (q >= b && q < b + s->bytes && bytes <= (size_t)(b + s->bytes - q)) {
      if (off) *off = (size_t)(q - b);
      return k;
    }
  }
  return -1;
}

fco_result_t fco_mem_find(fco_comm_t comm, const void* ptr, size_t bytes, int* slot,
                          size_t* offset, void** peer_table) {
  NEED_COMM(comm, "fco_mem_find");
  size_t off = 0;
  const int k = ptr ? fco_sym_find(comm, ptr, bytes, &off) : -1;
  if (slot) *slot = k;
  if (offset) *offset = k >= 0 ? off : 0;
  if (peer_table) *peer_table = (void*)comm->sym_dev;
  return FCO_OK;
}

/* A rank allocating alone (one thread or process per rank on a transport that agrees on the
 * slot): the agreement, an all-reduce its peers are in, is also how they hear of a refusal. */
static int alone_agrees(fco_comm_t comm) {
  const int world = comm->world && comm->tops->world_grows_together;
  return !world && comm->nranks > 1 && comm->tops->sym_slots;
}

fco_result_t fco_mem_alloc(fco_comm_t comm, size_t bytes, void** ptr) {
  NEED_COMM(comm, "fco_mem_alloc");
  fco_result_t refused = FCO_OK;
  if (!ptr) refused = fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_mem_alloc: ptr is NULL");
  else if (bytes == 0)
    refused = fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_mem_alloc: bytes is 0");
  else if (comm->async_error != FCO_OK) refused = fco_async_refuse(comm, "fco_mem_alloc");
  if (ptr) *ptr = NULL;
  /* Inside a capture its allocation and agreement would break the capture (and on nccl fail
   * past the gate, the peers waiting in NCCL: review rev62); refused before any agreement, not
   * sticky (its peers' gates give up on it within their bound). */
  const int cap_dev = fco_capturing_group(comm);
  if (cap_dev >= 0) {
    if (refused != FCO_OK) return refused; /* its own reason */
    return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                         "fco_mem_alloc: a stream of device %d is being captured into a CUDA "
                         "graph, and fco_mem_alloc allocates: allocate before capturing", cap_dev);
  }
  if (refused != FCO_OK) {
    if (alone_agrees(comm)) {
      /* take part in the peers' agreement (it says "refused"), else they wait in it forever */
      unsigned all_free = 0;
      int all_ok = 0;
      char msg[FCO_ERRMSG_LEN];
      memcpy(msg, comm->last_error, sizeof msg);
      const int dev = fco_device_save(comm->transport);
      (void)comm->tops->sym_slots(comm, 0, 0, &all_free, &all_ok);
      fco_device_restore(dev);
      fco_set_error(comm, refused, "%s", msg); /* this rank's own reason, not the agreement's */
    }
    return refused;
  }
  if (!comm->tops->sym_alloc)
    return fco_set_error(comm, FCO_ERR_UNSUPPORTED, "fco_mem_alloc: the %s transport has none",
                         comm->tops->name);
  /* A buffer a world peer's call allocated for this rank: take the oldest — by allocation
   * number, not by slot: after a free, a newer allocation may sit in a lower slot (until
   * session 55 the lowest was taken, so one collective call could land in different slots on
   * different ranks, or be refused as "bytes differ"). */
  int oldest = -1;
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++)
    if (comm->sym[k].state == FCO_SYM_PENDING &&
        (oldest < 0 || comm->sym[k].seq < comm->sym[oldest].seq))
      oldest = k;
  if (oldest >= 0) {
    fco_sym_t* s = &comm->sym[oldest];
    if (s->bytes != bytes)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "fco_mem_alloc: rank %d asks %zu bytes, but another rank of its "
                           "fco_comm_init_all group allocated this call's buffers with %zu "
                           "(every rank must pass the same bytes, in the same order)",
                           comm->rank, bytes, s->bytes);
    s->state = FCO_SYM_TAKEN;
    *ptr = s->ptr;
    return FCO_OK;
  }
  const int world = comm->world && comm->tops->world_grows_together;
  fco_comm_t* comms = world ? comm->world->comms : &comm;
  const int n = world ? comm->world->n : 1;
  for (int i = 0; i < n; i++)
    if (!comms[i])
      return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                           "fco_mem_alloc: needs every rank of the fco_comm_init_all group, but "
                           "rank %d was destroyed", i);
  unsigned free_mask = 0; /* slots free on every rank allocated together */
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) {
    int free_all = 1;
    for (int i = 0; i < n; i++) free_all &= comms[i]->sym[k].state == FCO_SYM_FREE;
    if (free_all) free_mask |= 1u << k;
  }
  const int dev = fco_device_save(comm->transport);
  fco_result_t r = FCO_OK;
  if (alone_agrees(comm)) {
    /* A rank allocating alone: the slots free on every rank (a rank that freed a buffer its
     * peers kept would otherwise take that slot while they take another one), and whether a
     * peer refused its call. */
    int all_ok = 0;
    r = comm->tops->sym_slots(comm, free_mask, 1, &free_mask, &all_ok);
    if (r == FCO_OK && !all_ok)
      r = fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                        "fco_mem_alloc: another rank refused this collective call (see its "
                        "error); nothing was allocated");
    if (r != FCO_OK) {
      fco_device_restore(dev);
      return r;
    }
  }
  int k = 0; /* the lowest of them */
  while (k < FCO_MAX_SYMMETRIC && !(free_mask >> k & 1u)) k++;
  if (k == FCO_MAX_SYMMETRIC) {
    fco_device_restore(dev);
    return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                         "fco_mem_alloc: no slot of the FCO_MAX_SYMMETRIC = %d is free on every "
                         "rank (rank %d holds %d buffers; free one with fco_mem_free, on every "
                         "rank alike)", FCO_MAX_SYMMETRIC, comm->rank, fco_sym_held(comm));
  }
  r = comm->tops->sym_alloc(comms, n, k, bytes);
  fco_device_restore(dev);
  if (r != FCO_OK) {
    if (comm->last_error[0] == 0) fco_set_error(comm, r, "%s", fco_last_error(NULL));
    return r;
  }
  const uint64_t seq = world ? ++comm->world->sym_seq : 0;
  for (int i = 0; i < n; i++) {
    comms[i]->sym[k].bytes = bytes;
    comms[i]->sym[k].state = comms[i] == comm ? FCO_SYM_TAKEN : FCO_SYM_PENDING;
    comms[i]->sym[k].seq = seq;
  }
  *ptr = comm->sym[k].ptr;
  fco_log(comm, "fco_mem_alloc: slot %d, %zu bytes a rank, %d rank(s) at once", k, bytes, n);
  return FCO_OK;
}

fco_result_t fco_mem_free(fco_comm_t comm, void* ptr) {
  NEED_COMM(comm, "fco_mem_free");
  if (!ptr) return FCO_OK;
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) {
    fco_sym_t* s = &comm->sym[k];
    if (s->state != FCO_SYM_TAKEN || s->ptr != ptr) continue;
    const int dev = fco_device_save(comm->transport);
    fco_result_t r = comm->tops->sym_free(comm, k);
    fco_device_restore(dev);
    memset(s, 0, sizeof *s); /* freed (or lost) either way */
    return r;
  }
  return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                       "fco_mem_free: %p is not a buffer fco_mem_alloc returned to rank %d (or "
                       "it was freed already)", ptr, comm->rank);
}

/* For the transports' destroy: free every slot still held (TAKEN or PENDING). */
fco_result_t fco_sym_free_all(fco_comm_t comm) {
  fco_result_t first = FCO_OK;
  for (int k = 0; k < FCO_MAX_SYMMETRIC; k++) {
    if (comm->sym[k].state == FCO_SYM_FREE) continue;
    fco_result_t r = comm->tops->sym_free ? comm->tops->sym_free(comm, k) : FCO_OK;
    if (first == FCO_OK) first = r;
    memset(&comm->sym[k], 0, sizeof comm->sym[k]);
  }
  return first;
}
