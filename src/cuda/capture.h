/*
 * capture.h — one answer to "is this stream capturing?" for the C transports and the CUDA
 * host code (gpu_common.c, blas.cu, gemm_alltoall.cu). cudaStreamIsCapturing fails on the
 * legacy stream while another stream captures (cudaErrorStreamCaptureImplicit: the legacy
 * stream would depend on that capture; ...Unsupported): that is a capture, said as one. Any
 * other failure (a bad or destroyed stream handle, a sticky context error) is not a capture:
 * it is returned for the caller to say as itself. The error state is cleared either way.
 */
#ifndef FCO_CUDA_CAPTURE_H_
#define FCO_CUDA_CAPTURE_H_

#include <cuda_runtime_api.h>

/* cudaSuccess with *capturing set (1 while capturing, invalidated captures included), or the
 * query's own error with *capturing = 0. */
static inline cudaError_t fco_stream_capture_query(cudaStream_t stream, int* capturing) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &st);
  *capturing = 0;
  if (e == cudaSuccess) {
    *capturing = st != cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  (void)cudaGetLastError();
  if (e == cudaErrorStreamCaptureImplicit || e == cudaErrorStreamCaptureUnsupported) {
    *capturing = 1;
    return cudaSuccess;
  }
  return e;
}

#endif /* FCO_CUDA_CAPTURE_H_ */
