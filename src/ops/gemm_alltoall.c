/*
 * gemm_alltoall.c — fco_gemm_alltoall: argument checks, impl choice (AUTO), workspace need,
 * submit. Kernels: src/cuda/gemm_alltoall*.cu; CPU reference: src/cpu/gemm_alltoall.c.
 *
 * Shape every rank must agree on: k, n, dtype, w_layout, a_rows, out_rows. The capacities are
 * agreed because the workspace is sized from them and growth is collective.
 *
 * Workspace per rank (layout in gemm_alltoall.h), es = dtype size, S(x) = roundup(x·N·es, 256):
 *   impl 1 (and cpu, every impl):   hdr + plan + S(out_rows)
 *   impl 2:                          hdr + plan + S(out_rows) + S(a_rows)
 *   impl 0: local                    hdr + plan + S(out_rows) + S(a_rows)
 *           nccl                     hdr + plan + S(out_rows) + 2·S(a_rows)
 *   AUTO: what impl 2 / impl 0 nccl needs (the most any choice needs).
 */
#include <string.h>

#include "../core/internal.h"
#include "gemm_alltoall.h"

_Static_assert(sizeof(fco_gemm_a2a_args_t) <= FCO_OP_ARGS_BYTES, "args fit fco_op_t.u.raw");

/* AUTO (GPU transports). Not measured yet: a first rule from the numbers.
 *  - Without counts_host while capturing, only impl 1 works (no host sync): 1.
 *  - f32: impl 1 computes in FFMA, far below cuBLAS: 2.
 *  - Small GEMMs (decode: latency rules; impl 1 has no host-driven chunk pipeline, one launch):
 *    1 when 2·a_rows·K·N < FCO_GEMM_A2A_FUSED_MAX_GFLOP (default 40) GFLOP per rank.
 *  - Otherwise the GEMM dominates and cuBLAS's speed matters: 2.
 * The rule depends only on agreed values and on whether hints are passed. */
static int resolve_impl(fco_comm_t comm, const fco_gemm_a2a_args_t* a, int impl, int capturing) {
  if (impl != FCO_IMPL_AUTO) return impl;
  if (comm->transport == FCO_TRANSPORT_CPU) return 1;
  if (!a->counts_host && capturing) return 1;
  if (a->dtype == FCO_F32) return 2;
  double gflop = 2.0 * (double)a->a_rows * (double)a->k * (double)a->n * 1e-9;
  long long max = fco_env_int("FCO_GEMM_A2A_FUSED_MAX_GFLOP", 40);
  return gflop < (double)max ? 1 : 2;
}

static size_t workspace(fco_comm_t comm, int64_t a_rows, int64_t out_rows, int64_t n,
                        fco_dtype_t dtype, int impl) {
  int P = comm->nranks;
  size_t es = fco_dtype_size(dtype);
  size_t base = fco_ga_off_y(P, out_rows, n, es); /* hdr + plan + staging */
  size_t y = fco_ga_rows_bytes(a_rows, n, es);
  if (comm->transport == FCO_TRANSPORT_CPU) return base;
  if (impl == FCO_IMPL_AUTO) impl = comm->transport == FCO_TRANSPORT_NCCL ? 0 : 2;
  switch (impl) {
    case 1: return base;
    case 2: return base + y;
    default: return base + (comm->transport == FCO_TRANSPORT_NCCL ? 2 * y : y);
  }
}

static fco_result_t check_shape(fco_comm_t comm, int64_t a_rows, int64_t out_rows, int64_t k,
                                int64_t n, fco_dtype_t dtype, int impl, const char* fn) {
  if (!comm) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "%s: comm is NULL", fn);
  if (fco_dtype_size(dtype) == 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: dtype %d is not FCO_F32, FCO_F16 or FCO_BF16", fn, (int)dtype);
  if (k < 1 || k > INT32_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: k %lld is not in 1..2^31-1", fn,
                         (long long)k);
  if (n < 1 || n > INT32_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: n %lld is not in 1..2^31-1", fn,
                         (long long)n);
  if (a_rows < 0 || a_rows > INT32_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: a_rows %lld is not in 0..2^31-1",
                         fn, (long long)a_rows);
  if (out_rows < 0 || out_rows > INT32_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: out_rows %lld is not in 0..2^31-1", fn, (long long)out_rows);
  if (impl != FCO_IMPL_AUTO && (impl < 0 || impl >= FCO_GEMM_ALLTOALL_NUM_IMPLS))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: impl %d is not 0..%d or FCO_IMPL_AUTO (-1)", fn, impl,
                         FCO_GEMM_ALLTOALL_NUM_IMPLS - 1);
  return FCO_OK;
}

fco_result_t fco_gemm_alltoall_workspace(fco_comm_t comm, int64_t a_rows, int64_t out_rows,
                                         int64_t k, int64_t n, fco_dtype_t dtype, int impl,
                                         size_t* bytes) {
  FCO_CHECK(check_shape(comm, a_rows, out_rows, k, n, dtype, impl, "fco_gemm_alltoall_workspace"));
  if (!bytes)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "fco_gemm_alltoall_workspace: bytes is NULL");
  *bytes = workspace(comm, a_rows, out_rows, n, dtype, impl);
  return FCO_OK;
}

const char* fco_gemm_alltoall_impl_name(fco_comm_t comm, int impl) {
  if (!comm) return NULL;
  if (impl == FCO_IMPL_AUTO) return "auto";
  return fco_op_impl_name(FCO_OP_GEMM_ALLTOALL, comm->transport, impl);
}

/* Host-side check of a host copy of the counts: nothing is launched when it fails. */
static fco_result_t check_counts_host(fco_comm_t comm, const fco_gemm_a2a_args_t* a) {
  int P = comm->nranks;
  int64_t sum = 0;
  for (int e = 0; e < a->num_experts; e++)
    for (int s = 0; s < P; s++) {
      int32_t c = a->counts_host[(size_t)e * P + s];
      if (c < 0)
        return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                             "fco_gemm_alltoall: counts_host[%d][%d] = %d is negative", e, s, c);
      sum += c;
    }
  if (sum > a->a_rows)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "fco_gemm_alltoall: counts_host sum to %lld rows, more than a_rows %lld",
                         (long long)sum, (long long)a->a_rows);
  if (a->recv_rows_host) {
    int64_t r = 0;
    for (int s = 0; s < P; s++) {
      if (a->recv_rows_host[s] < 0)
        return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                             "fco_gemm_alltoall: recv_rows_host[%d] = %d is negative", s,
                             a->recv_rows_host[s]);
      r += a->recv_rows_host[s];
    }
    if (r > a->out_rows)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "fco_gemm_alltoall: recv_rows_host sum to %lld rows, more than "
                           "out_rows %lld",
                           (long long)r, (long long)a->out_rows);
  }
  return FCO_OK;
}

fco_result_t fco_gemm_alltoall(fco_comm_t comm, const void* a, int64_t a_rows, const void* w,
                               int w_layout, int num_experts, const int32_t* counts,
                               const int32_t* counts_host, const int32_t* recv_rows_host,
                               void* out, int64_t out_rows, int64_t k, int64_t n,
                               fco_dtype_t dtype, int impl, void* stream) {
  const char* fn = "fco_gemm_alltoall";
  FCO_CHECK(check_shape(comm, a_rows, out_rows, k, n, dtype, impl, fn));
  if (comm->async_error != FCO_OK) return comm->async_error;
  if (w_layout != FCO_W_KN && w_layout != FCO_W_NK)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: w_layout %d is not FCO_W_KN (0) or FCO_W_NK (1)", fn, w_layout);
  if (num_experts < 1 || num_experts > FCO_GEMM_ALLTOALL_MAX_EXPERTS)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: num_experts %d is not in 1..%d", fn,
                         num_experts, FCO_GEMM_ALLTOALL_MAX_EXPERTS);
  if (!a && a_rows > 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: a is NULL (a_rows %lld)", fn,
                         (long long)a_rows);
  if (!w) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: w is NULL", fn);
  if (!counts) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: counts is NULL", fn);
  if (!out && out_rows > 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: out is NULL (out_rows %lld)", fn,
                         (long long)out_rows);
  size_t es = fco_dtype_size(dtype);
  if (((uintptr_t)a | (uintptr_t)w | (uintptr_t)out) % es)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: a, w or out is not aligned to the element size %zu", fn, es);
  if ((uintptr_t)counts % 4)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: counts %p is not 4-byte aligned",
                         fn, (const void*)counts);
  if (out && a) { /* out is written while a is still being read */
    const char* pa = (const char*)a;
    const char* po = (const char*)out;
    size_t ba = (size_t)a_rows * (size_t)k * es, bo = (size_t)out_rows * (size_t)n * es;
    if (pa < po + bo && po < pa + ba)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: out overlaps a", fn);
  }
  fco_op_t op;
  memset(&op, 0, sizeof op);
  fco_gemm_a2a_args_t* g = (fco_gemm_a2a_args_t*)op.u.raw;
  g->a = a;
  g->w = w;
  g->out = out;
  g->counts = counts;
  g->counts_host = counts_host;
  g->recv_rows_host = recv_rows_host;
  g->a_rows = a_rows;
  g->out_rows = out_rows;
  g->k = k;
  g->n = n;
  g->num_experts = num_experts;
  g->w_layout = w_layout;
  g->dtype = dtype;
  if (counts_host) FCO_CHECK(check_counts_host(comm, g));
  int capturing = comm->tops->capturing ? comm->tops->capturing(comm, stream) : 0;
  op.kind = FCO_OP_GEMM_ALLTOALL;
  op.comm = comm;
  op.impl = resolve_impl(comm, g, impl, capturing);
  if (comm->transport != FCO_TRANSPORT_CPU && (op.impl == 0 || op.impl == 2)) {
    if (!counts_host && capturing)
      return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                           "%s: impl %d without counts_host copies the counts to the host and "
                           "synchronises the stream, which cannot be captured into a CUDA graph: "
                           "pass counts_host or use impl 1",
                           fn, op.impl);
    if (op.impl == 0 && comm->transport == FCO_TRANSPORT_NCCL && comm->nranks > 1 &&
        !recv_rows_host && (comm->world || capturing))
      return fco_set_error(comm, FCO_ERR_INVALID_USAGE,
                           "%s: impl 0 on the nccl transport needs recv_rows_host when one thread "
                           "drives several ranks or the stream is being captured (ncclSend/Recv "
                           "sizes must be known on the host)",
                           fn);
  }
  op.stream = stream;
  op.ws_bytes = workspace(comm, a_rows, out_rows, n, dtype, op.impl);
  op.shape[0] = k;
  op.shape[1] = n;
  op.shape[2] = (int64_t)dtype;
  op.shape[3] = w_layout;
  op.shape[4] = a_rows;
  op.shape[5] = out_rows;
  return fco_op_submit(&op);
}
