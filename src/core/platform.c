/* platform.c — what this build and this process can use (CUDA compiled in, GPUs visible). */
#include "internal.h"
#ifdef FCO_HAVE_CUDA
#include "../cuda/cuda_ops.h"
#endif

int fco_have_cuda(void) {
#ifdef FCO_HAVE_CUDA
  return 1;
#else
  return 0;
#endif
}

int fco_gpu_count(void) {
#ifdef FCO_HAVE_CUDA
  return fco_cuda_device_count();
#else
  return 0;
#endif
}
