/*
 * gate.cu — the bounded gate ahead of the nccl transport's collective setup steps: the
 * protocol is in gate.h.
 */
#include <stdio.h>

#include "gate.h"
#include "prims.cuh"

namespace {
using namespace fco;

/* Spin (acquire) until *w >= want or timeout_ns passed; the last value read. */
__device__ uint64_t wait_word(const uint64_t* w, uint64_t want, uint64_t timeout_ns) {
  uint64_t seen = ld_acquire_sys(w);
  const uint64_t t0 = globaltimer_ns();
  while (seen < want && globaltimer_ns() - t0 <= timeout_ns) {
    __nanosleep(256);
    seen = ld_acquire_sys(w);
  }
  return seen;
}

/* One block of FCO_MAX_GPU_RANKS threads: thread p < nranks, p ≠ rank, serves peer p. */
__global__ void gate_kernel(const fco_dev_rank_t* dev, uint64_t gen, uint64_t value,
                            uint64_t timeout_ns, fco_gate_result_t* out) {
  __shared__ uint64_t got[FCO_MAX_GPU_RANKS];
  __shared__ int here[FCO_MAX_GPU_RANKS];
  __shared__ uint64_t decided;
  const int p = threadIdx.x;
  const int me = dev->rank, P = dev->nranks;
  const bool peer = p < P && p != me;
  got[p] = value;
  here[p] = 1;
  if (peer) { /* 1. this rank's arrival, into peer p's words */
    uint64_t* to = dev->peer_sig[p] + FCO_GATE_WORD + 2 * (size_t)me;
    *(volatile uint64_t*)to = value;
    st_release_sys(to + 1, gen); /* the value before its generation */
  }
  __syncthreads();
  const uint64_t go = gen << 2, gave_up = go | 1u;
  if (p == 0) { /* 2. count in, wait for all, decide once for everyone */
    uint64_t* c = dev->peer_sig[0] + FCO_GATE_WORD + 2 * FCO_MAX_GPU_RANKS;
    __threadfence_system(); /* the stores above before the count */
    atomicAdd_system((unsigned long long*)c, 1ull);
    const bool all = wait_word(c, gen * (uint64_t)P, timeout_ns) >= gen * (uint64_t)P;
    const uint64_t open = (gen - 1) << 2;
    const uint64_t old = atomicCAS_system((unsigned long long*)(c + 1), open, all ? go : gave_up);
    decided = old == open ? (all ? go : gave_up) : old;
    __threadfence_system();
  }
  __syncthreads();
  if (peer) { /* 3. peer p's value (went: it arrived, its words are on the way or here) */
    const uint64_t* from = dev->peer_sig[me] + FCO_GATE_WORD + 2 * (size_t)p;
    const uint64_t seen = wait_word(from + 1, gen, decided == go ? timeout_ns : 0);
    here[p] = seen == gen;
    if (seen == gen) got[p] = *(volatile const uint64_t*)from;
  }
  __syncthreads();
  if (p != 0) return;
  fco_gate_result_t r = {decided == go ? 1 : 0, -1, decided, value, value};
  for (int q = 0; q < P; ++q) {
    if (!here[q]) { /* after "went" only if its words never came: the host reports it */
      if (r.missing < 0) r.missing = q;
      continue;
    }
    r.max_value = got[q] > r.max_value ? got[q] : r.max_value;
    r.min_value = got[q] < r.min_value ? got[q] : r.min_value;
  }
  *out = r;
}

}  // namespace

extern "C" fco_result_t fco_cuda_gate(const fco_dev_rank_t* dev, uint64_t gen, uint64_t value,
                                      uint64_t timeout_ns, fco_gate_result_t* result,
                                      void* stream, char* err) {
  if (!dev || !result || gen == 0 || gen >= (1ull << 60)) {
    snprintf(err, FCO_ERRMSG_LEN, "fco_cuda_gate: %s",
             !dev || !result ? "no device state or result" : "generation outside [1, 2^60)");
    return FCO_ERR_INVALID_ARGUMENT;
  }
  /* A stale error of an earlier call (the caller's, not sticky) is not this launch's: read
   * after a launch that did start, it made the host give up on a gate whose kernel still
   * counts this rank in, so its peers went on into NCCL without it (a hang). */
  (void)cudaGetLastError();
  gate_kernel<<<1, FCO_MAX_GPU_RANKS, 0, (cudaStream_t)stream>>>(dev, gen, value, timeout_ns,
                                                                 result);
  const cudaError_t ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    snprintf(err, FCO_ERRMSG_LEN, "fco_cuda_gate: kernel launch: %s", cudaGetErrorString(ce));
    return FCO_ERR_CUDA;
  }
  return FCO_OK;
}

extern "C" fco_result_t fco_cuda_gate_preload(char* err) {
  cudaFuncAttributes fa;
  const cudaError_t ce = cudaFuncGetAttributes(&fa, gate_kernel);
  if (ce != cudaSuccess) {
    snprintf(err, FCO_ERRMSG_LEN, "fco_cuda_gate_preload: %s", cudaGetErrorString(ce));
    return FCO_ERR_CUDA;
  }
  return FCO_OK;
}
