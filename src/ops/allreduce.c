/*
 * allreduce.c — fco_allreduce: argument checks, impl choice (AUTO), workspace need, submit.
 * The kernels live in src/cuda/allreduce.cu, the CPU version in src/cpu/allreduce.c.
 *
 * Workspace (data bytes per rank), with S = roundup(count · dtype size, 256):
 *   impl 1 (one-shot, every transport) and cpu impl 0:  2 · P · S
 *     (slot per source rank; two halves alternating with the epoch, so a fast rank's next call
 *      never overwrites a slot a slow rank is still reducing)
 *   local impl 0 (copy, then reduce):                   S
 *   nccl impl 0 (ncclAllReduce):                        0
 */
#include <string.h>

#include "../core/internal.h"

/* AUTO on nccl: one-shot up to a size, ncclAllReduce above. One-shot sends (P-1)·S bytes per
 * rank against a ring's 2(P-1)/P·S, so its edge shrinks with P. Measured on 2×H200 (NV18,
 * bench/results/2026-11-30_nvidia-h200-x2_fe93fe66a60f): one-shot is faster at every size
 * 1 KB..64 MB (1.78× at 1 MB, 1.29× at 16 MB, 1.06× at 64 MB); the cap of 16 MB keeps its
 * workspace (4·S) at 64 MB. P = 3, 4: 2 MB, from one measurement at P = 4 (4×H200, run
 * 2026-11-30_nvidia-h200-x4_39ee289): gemv_allreduce's impl 3 (cuBLAS + this one-shot) took
 * 65.93 µs against impl 0's (cuBLAS + ncclAllReduce) 71.82 at 16384² M = 64, where y is 2 MB —
 * the one-shot ~5.9 µs ahead at 2 MB; larger sizes at P = 4 are unmeasured. P > 4: 1 MB, where
 * it is latency-bound (no P = 8 run yet). AUTO on local (virtual ranks sharing one GPU's HBM,
 * impl 0 = copies, then one reduction): one-shot up to 4 MB at P = 2, impl 0 above — one-shot
 * 1.09–1.28× faster at 4 MB, 0.76–0.80× at 16 and 64 MB on one H200 (run
 * 2026-12-04_nvidia-h200_5b746d6-bench) and 0.80× at 16 MB on one H100 (run
 * 2026-12-05_nvidia-h100-x1_6828bb2-hbm); 8 MB / P at P > 2 (every rank reads P slots through
 * the one HBM; unmeasured). One rank on nccl (nothing to send: both impls copy `in` to `out`,
 * ncclAllReduce with NCCL's copy, the one-shot with its own kernel's phase 2 and epoch step):
 * one-shot up to 4 MB, impl 0 above — the one-shot 0.83-0.88x at 16 MB and 0.89-0.95x at
 * 64 MB, faster at 1 MB in every dtype and at 4 MB in all but one, in three runs on one GPU
 * (2026-12-01_nvidia-h200_015ce2c-makebench, 2026-12-03_nvidia-h200_975935c-final,
 * 2026-12-07_nvidia-h100-x1_c3fb3d8-s66). One rank on local always runs the one-shot (its
 * impl 0 is a copy into the workspace, then a pass over it: two copies; unmeasured). Override
 * with FCO_ALLREDUCE_ONESHOT_MAX (bytes, k / M / G suffix), on either transport but for one
 * rank on local. */
int fco_allreduce_auto_impl(fco_comm_t comm, size_t bytes) {
  if (comm->transport == FCO_TRANSPORT_CPU) return 1;
  if (comm->nranks == 1 && comm->transport == FCO_TRANSPORT_LOCAL) return 1;
  long long dflt = comm->nranks == 1   ? (4 << 20)
                   : comm->nranks == 2 ? (16 << 20)
                   : comm->nranks <= 4 ? (2 << 20)
                                       : (1 << 20);
  if (comm->transport == FCO_TRANSPORT_LOCAL) dflt = (8 << 20) / comm->nranks;
  long long max = fco_env_int("FCO_ALLREDUCE_ONESHOT_MAX", dflt);
  return (long long)bytes <= max ? 1 : 0;
}

static int resolve_impl(fco_comm_t comm, size_t bytes, int impl) {
  return impl != FCO_IMPL_AUTO ? impl : fco_allreduce_auto_impl(comm, bytes);
}

static size_t workspace(fco_comm_t comm, size_t count, fco_dtype_t dtype, int impl) {
  size_t s = fco_round_up(count * fco_dtype_size(dtype), 256);
  if (impl == 1 || comm->transport == FCO_TRANSPORT_CPU) return 2 * (size_t)comm->nranks * s;
  if (comm->transport == FCO_TRANSPORT_LOCAL) return s;
  return 0;
}

static fco_result_t check_common(fco_comm_t comm, size_t count, fco_dtype_t dtype, int impl,
                                 const char* fn) {
  if (!comm) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "%s: comm is NULL", fn);
  if (count == 0) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: count is 0", fn);
  if ((long long)count < 0 || count > ((size_t)1 << 40))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: count %zu is negative or absurd (> 2^40)", fn, count);
  if (fco_dtype_size(dtype) == 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: dtype %d is not FCO_F32, FCO_F16 or FCO_BF16", fn, (int)dtype);
  if (impl != FCO_IMPL_AUTO && (impl < 0 || impl >= FCO_ALLREDUCE_NUM_IMPLS))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: impl %d is not 0..%d or FCO_IMPL_AUTO (-1)", fn, impl,
                         FCO_ALLREDUCE_NUM_IMPLS - 1);
  return FCO_OK;
}

fco_result_t fco_allreduce_workspace(fco_comm_t comm, size_t count, fco_dtype_t dtype, int impl,
                                     size_t* bytes) {
  FCO_CHECK(check_common(comm, count, dtype, impl, "fco_allreduce_workspace"));
  if (!bytes)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_allreduce_workspace: bytes is NULL");
  *bytes = workspace(comm, count, dtype, resolve_impl(comm, count * fco_dtype_size(dtype), impl));
  return FCO_OK;
}

const char* fco_allreduce_impl_name(fco_comm_t comm, int impl) {
  if (!comm) return NULL;
  if (impl == FCO_IMPL_AUTO) return "auto";
  return fco_op_impl_name(FCO_OP_ALLREDUCE, comm->transport, impl);
}

static fco_result_t allreduce_call(fco_comm_t comm, const void* in, void* out, size_t count,
                                   fco_dtype_t dtype, int impl, void* stream) {
  FCO_CHECK(check_common(comm, count, dtype, impl, "fco_allreduce"));
  if (comm->async_error != FCO_OK) return fco_async_refuse(comm, "fco_allreduce");
  if (!in) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_allreduce: in is NULL");
  if (!out) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "fco_allreduce: out is NULL");
  size_t bytes = count * fco_dtype_size(dtype);
  const char* a = (const char*)in;
  const char* b = (const char*)out;
  if (a != b && a < b + bytes && b < a + bytes)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "fco_allreduce: in and out overlap without being equal (in place is "
                         "in == out)");
  fco_op_t op;
  memset(&op, 0, sizeof op);
  op.kind = FCO_OP_ALLREDUCE;
  op.comm = comm;
  op.impl = resolve_impl(comm, bytes, impl);
  op.stream = stream;
  op.ws_bytes = workspace(comm, count, dtype, op.impl);
  op.u.allreduce.in = in;
  op.u.allreduce.out = out;
  op.u.allreduce.count = count;
  op.u.allreduce.dtype = dtype;
  op.shape[0] = (int64_t)count;
  op.shape[1] = (int64_t)dtype;
  return fco_op_submit(&op);
}

/* The public entry: a refusal inside a group is noted (fco_op_call_result). */
fco_result_t fco_allreduce(fco_comm_t comm, const void* in, void* out, size_t count,
                           fco_dtype_t dtype, int impl, void* stream) {
  return fco_op_call_result(comm, allreduce_call(comm, in, out, count, dtype, impl, stream));
}
