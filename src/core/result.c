/* result.c — the library's version; names of result codes, dtypes and transports (from the
 * X-macro table in fco.h). */
#include "internal.h"

fco_result_t fco_get_version(int* version) {
  if (!version)
    return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "fco_get_version: version is NULL");
  *version = FCO_VERSION_CODE;
  return FCO_OK;
}

const char* fco_result_string(fco_result_t result) {
  switch (result) {
#define FCO_XX_CASE_(name, code, str) \
  case FCO_ERR_##name:                \
    return str;
    FCO_RESULT_MAP(FCO_XX_CASE_)
#undef FCO_XX_CASE_
    default:
      return "unknown result";
  }
}

const char* fco_dtype_name(fco_dtype_t dtype) {
  switch (dtype) {
    case FCO_F32: return "f32";
    case FCO_F16: return "f16";
    case FCO_BF16: return "bf16";
    default: return NULL;
  }
}

size_t fco_dtype_size(fco_dtype_t dtype) {
  switch (dtype) {
    case FCO_F32: return 4;
    case FCO_F16: return 2;
    case FCO_BF16: return 2;
    default: return 0;
  }
}

const char* fco_transport_name(fco_transport_t t) {
  switch (t) {
    case FCO_TRANSPORT_AUTO: return "auto";
    case FCO_TRANSPORT_NCCL: return "nccl";
    case FCO_TRANSPORT_LOCAL: return "local";
    case FCO_TRANSPORT_CPU: return "cpu";
    default: return NULL;
  }
}
