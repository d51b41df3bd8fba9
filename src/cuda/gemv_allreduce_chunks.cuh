/*
 * gemv_allreduce_chunks.cuh — the device half of fco_gemv_allreduce impl 4 "cublas_chunks":
 * the push and reduce kernels (gemv_allreduce_chunks.cu) that the host half
 * (gemv_allreduce_blas.cu, run_chunks) launches around cuBLAS's column-chunk GEMMs. The protocol
 * is in gemv_allreduce_chunks.cu's header.
 */
#ifndef FCO_CUDA_GEMV_ALLREDUCE_CHUNKS_CUH_
#define FCO_CUDA_GEMV_ALLREDUCE_CHUNKS_CUH_

#include <cuda_runtime.h>
#include <stdint.h>

#include "../ops/gemv_allreduce.h"
#include "cuda_ops.h"

namespace fco {
namespace gvc {

/* One call's chunk plan and the grid's local ranks, the same for every kernel of the call. */
struct ChunkParams {
  char* y[FCO_MAX_GPU_RANKS];               /* each local rank's y: its partial, then the sum */
  fco_dev_rank_t* dev[FCO_MAX_GPU_RANKS];
  uint64_t slot_bytes; /* S = roundup(M·N·esize, 256): one rank's y image in a half */
  int M, N, es;
  int width;           /* columns per chunk (a multiple of 64; the last chunk may be shorter) */
  int chunks;          /* ceil(N / width) */
  int push_blocks;     /* nb: blocks per rank of a push kernel = pieces of a chunk */
  int reduce_split;    /* rf: reduce blocks per push piece (the reduce grid: nb·rf per rank) */
  int vec;             /* 1: units of 16 bytes (N·esize % 16 == 0, every y 16-byte aligned) */
  int chunk;           /* push kernels: the chunk they push */
};

/* Largest chunks · push_blocks: the flag slots sig[me][0 .. chunks·nb) of a call. */
constexpr int kMaxChunkFlags = 512;
/* Most chunks a call (FCO_GEMV_CHUNKS, refused above by the op layer). */
constexpr int kMaxChunks = FCO_GEMV_CHUNKS_MAX;
/* Reduce blocks per push piece: as many as fill the SMs once (the reduce runs after the last
 * GEMM, nothing beside it), 1..kMaxReduceSplit. */
constexpr int kMaxReduceSplit = 16;

/* Push chunk p.chunk of every local rank's y into slot `me` of every peer's half and raise
 * its flags; the reduce (after the last push on the same stream) sums and ends the call. */
fco_result_t launch_push(const ChunkParams& p, int num_local, cudaStream_t stream, char* err);
fco_result_t launch_reduce(const ChunkParams& p, int num_local, fco_dtype_t dtype,
                           cudaStream_t stream, char* err);
/* Load the kernels now (lazy module loading must never happen while one of them waits). */
fco_result_t preload(char* err);

}  // namespace gvc
}  // namespace fco

#endif /* FCO_CUDA_GEMV_ALLREDUCE_CHUNKS_CUH_ */
