/* platform.c — what this build and this process can use (CUDA compiled in, GPUs visible), and
 * the caller's CUDA device kept across public calls. */
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

/* Public calls on a GPU transport switch to each rank's device; they give the caller's back at
 * the end, as NCCL's do (until session 56 the last rank's device stayed current). The cpu
 * transport never touches CUDA, so it neither reads nor sets the device. */
int fco_device_save(fco_transport_t t) {
#ifdef FCO_HAVE_CUDA
  if (t == FCO_TRANSPORT_LOCAL || t == FCO_TRANSPORT_NCCL) return fco_cuda_current_device();
#endif
  (void)t;
  return -1;
}

void fco_device_restore(int dev) {
#ifdef FCO_HAVE_CUDA
  fco_cuda_restore_device(dev);
#endif
  (void)dev;
}
