/*
 * cp_async.cuh — asynchronous 16- (and 4-) byte copies from global to shared memory (cp.async,
 * sm_80+), tracked per thread in commit groups: the gemm tile's operand pipeline (gemm_tile.cuh)
 * and the embedding lookups' row rings (embedding_alltoall_pool.cuh, embedding_alltoall_lean.cuh).
 */
#ifndef FCO_CUDA_CP_ASYNC_CUH_
#define FCO_CUDA_CP_ASYNC_CUH_

#include <stdint.h>

namespace fco {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
/* 16 bytes from src to shared address dst, through L2 only (.cg); src_bytes < 16 zero-fills the
 * rest (0: nothing is read, dst becomes zeros). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
/* 16 bytes from src to shared address dst (.cg), or 16 zeros and nothing read where `skip`
 * (cp.async's ignore-src predicate: src need not be a valid address then; the lean lookup's
 * rows past a share or outside the table, embedding_alltoall_lean.cuh). */
__device__ __forceinline__ void cp_async16_or_zero(uint32_t dst, const void* src, bool skip) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n"
      " cp.async.cg.shared.global [%0], [%1], 16, p;\n}\n" ::"r"(dst),
      "l"(src), "r"((int)skip)
      : "memory");
}
/* 4 bytes from src to shared address dst (.ca); src_bytes 0 reads nothing and writes a zero (the
 * lean lookup's per-sample weights). */
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
/* Close this thread's copies issued since the last commit into one group (also when empty). */
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/* This thread's groups but the newest kN are complete (their shared-memory data readable by
 * this thread; other threads need a barrier). */
template <int kN>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kN) : "memory");
}

}  // namespace fco

#endif /* FCO_CUDA_CP_ASYNC_CUH_ */
