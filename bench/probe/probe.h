/*
 * probe.h — what the one-GPU probes of bench/probe/*.cu share: CK, a CUDA call checked (exit 1
 * with the file, line and call on failure). Each probe stays one file to build (its header's
 * nvcc command); this header is found next to it.
 */
#ifndef FCO_BENCH_PROBE_H_
#define FCO_BENCH_PROBE_H_

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

#endif /* FCO_BENCH_PROBE_H_ */
