/*
 * device.cu — small host helpers of the CUDA backend: the device count that never fails
 * (no driver → 0), the caller's device kept across a public call, and the launch helpers of
 * launch.cuh (error text, SM count cache).
 */
#include <stdarg.h>
#include <stdio.h>

#include <atomic>

#include <cuda.h>

#include "cuda_ops.h"
#include "launch.cuh"

extern "C" int fco_cuda_device_count(void) {
  int n = 0;
  cudaError_t ce = cudaGetDeviceCount(&n);
  if (ce != cudaSuccess) {
    (void)cudaGetLastError(); /* no driver / no GPU: not an error for the caller */
    return 0;
  }
  return n;
}

/* Whether dev's primary context is active (the process has used dev), read through the
 * driver's cuDevicePrimaryCtxGetState without linking libcuda; -1 when it cannot be read. */
static int primary_active(int dev) {
  typedef CUresult (*get_t)(CUdevice*, int);
  typedef CUresult (*state_t)(CUdevice, unsigned int*, int*);
  static std::atomic<get_t> get{nullptr};
  static std::atomic<state_t> state{nullptr};
  if (!get.load() || !state.load()) {
    void *g = nullptr, *s = nullptr;
    cudaDriverEntryPointQueryResult q1, q2;
    if (cudaGetDriverEntryPointByVersion("cuDeviceGet", &g, 12000, cudaEnableDefault, &q1) !=
            cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &s, 12000,
                                         cudaEnableDefault, &q2) != cudaSuccess ||
        q1 != cudaDriverEntryPointSuccess || q2 != cudaDriverEntryPointSuccess || !g || !s) {
      (void)cudaGetLastError();
      return -1;
    }
    get.store((get_t)g);
    state.store((state_t)s);
  }
  CUdevice d;
  unsigned int flags = 0;
  int active = 0;
  if (get.load()(&d, dev) != CUDA_SUCCESS || state.load()(d, &flags, &active) != CUDA_SUCCESS)
    return -1;
  return active != 0;
}

extern "C" int fco_cuda_current_device(void) {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return dev;
}

/* Only a device in use is made current again: a thread that had not used CUDA reads device 0,
 * and setting it would make a context there (hundreds of MB on GPU 0 for every process of a
 * one-rank-per-process program on other GPUs); such a thread keeps the rank's device. */
extern "C" void fco_cuda_restore_device(int dev) {
  int now = -1;
  if (dev < 0 || cudaGetDevice(&now) != cudaSuccess || now == dev) {
    (void)cudaGetLastError();
    return;
  }
  if (primary_active(dev) == 1 && cudaSetDevice(dev) != cudaSuccess) (void)cudaGetLastError();
}

namespace fco {

fco_result_t fail(char* err, fco_result_t code, const char* fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, FCO_ERRMSG_LEN, fmt, ap);
    va_end(ap);
  }
  return code;
}

fco_result_t cuda_fail(char* err, cudaError_t ce, const char* what) {
  (void)cudaGetLastError();
  /* as the transports' fco_cuda_fail (gpu_common.c): an allocation is FCO_ERR_OUT_OF_MEMORY */
  const fco_result_t code = ce == cudaErrorMemoryAllocation ? FCO_ERR_OUT_OF_MEMORY : FCO_ERR_CUDA;
  return fail(err, code, "%s: %s: %s", what, cudaGetErrorName(ce), cudaGetErrorString(ce));
}

fco_result_t current_device(char* err, int* device, int* num_sms) {
  static std::atomic<int> sms_cache[kMaxDevices];
  cudaError_t ce = cudaGetDevice(device);
  if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaGetDevice");
  int n = *device < kMaxDevices ? sms_cache[*device].load() : 0;
  if (n == 0) {
    ce = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, *device);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaDeviceGetAttribute(MultiProcessorCount)");
    if (*device < kMaxDevices) sms_cache[*device].store(n);
  }
  *num_sms = n;
  return FCO_OK;
}

}  // namespace fco
