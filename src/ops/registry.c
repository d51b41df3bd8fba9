/*
 * registry.c — one entry per operator: its name, the shape fields every rank must agree on,
 * and its impl names per transport. Transports and fco-bench get names and mismatch messages
 * from here, so adding an operator touches this table, not every transport.
 */
#include <stdio.h>
#include <string.h>

#include "../core/internal.h"

/* baseline_name is indexed by fco_transport_t: auto, nccl, local, cpu. */
static const fco_op_info_t kOps[] = {
    {FCO_OP_ALLREDUCE, "allreduce", {"count", "dtype"}, FCO_ALLREDUCE_NUM_IMPLS,
     {"-", "nccl", "copy", "copy"}, {NULL, "oneshot"}, NULL},
    /* gemv_allreduce */
    {FCO_OP_GEMV_ALLREDUCE, "gemv_allreduce", {"M", "N", "dtype", "bias"},
     FCO_GEMV_ALLREDUCE_NUM_IMPLS, {"-", "cublas_nccl", "cublas_copy", "cpu_ref"},
     {NULL, "oneshot", "twophase", "cublas_oneshot"}, fco_gemv_ar_agree},
    /* embedding_alltoall */
    {FCO_OP_EMBEDDING_ALLTOALL, "embedding_alltoall",
     {"tables", "dim", "batch", "dtype", "pooling", "tables_per_rank#", "batch_per_rank#"},
     FCO_EMBEDDING_ALLTOALL_NUM_IMPLS, {"-", "nccl", "copy", "copy"}, {NULL, "fused"}, NULL},
    /* gemm_alltoall */
    {FCO_OP_GEMM_ALLTOALL, "gemm_alltoall", {"k", "n", "dtype", "w_layout", "a_rows", "out_rows"},
     FCO_GEMM_ALLTOALL_NUM_IMPLS, {"-", "nccl", "copy", "ref"}, {NULL, "tiles", "chunks"},
     fco_ga_agree},
};

const fco_op_info_t* fco_op_info(fco_op_kind_t kind) {
  for (size_t i = 0; i < sizeof kOps / sizeof kOps[0]; i++)
    if (kOps[i].kind == kind) return &kOps[i];
  return NULL;
}

const char* fco_op_name(fco_op_kind_t kind) {
  const fco_op_info_t* o = fco_op_info(kind);
  if (!o && kind == FCO_OP_EXTERNAL) return "external kernel";
  return o ? o->name : "?";
}

const char* fco_op_impl_name(fco_op_kind_t kind, fco_transport_t t, int impl) {
  const fco_op_info_t* o = fco_op_info(kind);
  if (!o || impl < 0 || impl >= o->num_impls || t < 0 || t >= FCO_NUM_TRANSPORTS) return NULL;
  return impl == 0 ? o->baseline_name[t] : o->impl_names[impl];
}

/* A trailing '#' on a shape field's name in the table marks a hash of a host array (the value
 * printed as such, never as if it were the array's). */
static int hashed(const char* name) {
  const size_t l = strlen(name);
  return l && name[l - 1] == '#';
}

/* A shape field's name, without the mark. */
static void field_name(const fco_op_info_t* o, int i, char* buf, size_t len) {
  const char* n = o->shape_names[i];
  snprintf(buf, len, "%.*s", (int)strlen(n) - hashed(n), n);
}

static void shape_str(const fco_op_info_t* o, const fco_op_t* op, int i, char* buf, size_t len) {
  const char* n = o->shape_names[i];
  const long long v = (long long)op->shape[i];
  static const char* const kPool[] = {"sum", "mean"}, *const kLayout[] = {"kn", "nk"};
  if (!strcmp(n, "dtype"))
    snprintf(buf, len, "%s", fco_dtype_name((fco_dtype_t)v) ? fco_dtype_name((fco_dtype_t)v) : "?");
  else if (!strcmp(n, "pooling") && v >= 0 && v < 2)
    snprintf(buf, len, "%s", kPool[v]);
  else if (!strcmp(n, "w_layout") && v >= 0 && v < 2)
    snprintf(buf, len, "%s", kLayout[v]);
  else if (hashed(n))
    snprintf(buf, len, "an array hashing to %016llx", (unsigned long long)v);
  else
    snprintf(buf, len, "%lld", v);
}

void fco_op_describe(const fco_op_t* op, char* buf, size_t len) {
  const fco_op_info_t* o = fco_op_info(op->kind);
  if (!o) {
    snprintf(buf, len, "op kind %d", (int)op->kind);
    return;
  }
  size_t n = (size_t)snprintf(buf, len, "fco_%s(", o->name);
  for (int i = 0; i < FCO_OP_SHAPE_MAX && o->shape_names[i] && n < len; i++) {
    char v[48], f[32];
    shape_str(o, op, i, v, sizeof v);
    field_name(o, i, f, sizeof f);
    n += (size_t)snprintf(buf + n, len - n, "%s=%s, ", f, v);
  }
  if (n < len) {
    const char* in = fco_op_impl_name(op->kind, op->comm ? op->comm->transport : FCO_TRANSPORT_AUTO,
                                      op->impl);
    snprintf(buf + n, len - n, "impl=%d %s)", op->impl, in ? in : "?");
  }
}

fco_result_t fco_op_check_same(const fco_op_t* a, const fco_op_t* b) {
  return fco_op_check_same_at(a, a->comm->rank, b, b->comm->rank);
}

fco_result_t fco_op_check_same_at(const fco_op_t* a, int ra, const fco_op_t* b, int rb) {
  const char* what = NULL;
  char va[48] = "", vb[48] = "", f[32];
  const fco_op_info_t* o = fco_op_info(a->kind);
  if (b->kind != a->kind) {
    what = "operation";
    snprintf(va, sizeof va, "fco_%s", fco_op_name(a->kind));
    snprintf(vb, sizeof vb, "fco_%s", fco_op_name(b->kind));
  } else if (b->impl != a->impl) {
    what = "impl";
    snprintf(va, sizeof va, "%d", a->impl);
    snprintf(vb, sizeof vb, "%d", b->impl);
  } else {
    for (int i = 0; o && i < FCO_OP_SHAPE_MAX && o->shape_names[i]; i++)
      if (a->shape[i] != b->shape[i]) {
        field_name(o, i, f, sizeof f);
        what = f;
        shape_str(o, a, i, va, sizeof va);
        shape_str(o, b, i, vb, sizeof vb);
        break;
      }
  }
  if (!what) return FCO_OK;
  return fco_set_error(a->comm, FCO_ERR_INVALID_ARGUMENT,
                       "fco_%s: %s differs across ranks: rank %d has %s, rank %d has %s (every "
                       "rank must pass the same)", fco_op_name(a->kind), what, ra, va, rb, vb);
}
