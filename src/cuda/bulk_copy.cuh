/*
 * bulk_copy.cuh — 1-D bulk copies (TMA, the async proxy) from a block's shared memory to global
 * memory, also a peer GPU's memory mapped into this address space (NVLink), tracked per thread
 * in bulk groups; and the proxy fences around them. Used by the gemm tile's asynchronous C
 * epilogue (gemm_tile_wgmma.cuh). Bytes and both addresses multiples of 16. sm_90.
 */
#ifndef FCO_CUDA_BULK_COPY_CUH_
#define FCO_CUDA_BULK_COPY_CUH_

#include <stdint.h>

namespace fco {

/* Make this thread's generic-proxy shared-memory writes visible to the async proxy (before a
 * bulk copy reads them). */
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void bulk_store(void* gdst, const void* ssrc, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gdst),
               "r"((uint32_t)__cvta_generic_to_shared(ssrc)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
/* This thread's bulk groups but the newest N have read their shared-memory source. */
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/* This thread's bulk groups but the newest N are complete (their writes performed, the source
 * readable again), then ordered before this thread's later generic-proxy accesses (a release
 * that follows, by this thread or after a barrier, covers them). */
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_all() { bulk_wait<0>(); }

}  // namespace fco

#endif /* FCO_CUDA_BULK_COPY_CUH_ */
