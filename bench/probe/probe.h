/*
 * probe.h — what the one-GPU probes of bench/probe/*.cu share: CK, a CUDA call checked (exit 1
 * with the file, line and call on failure); the GEMV probes' timing, W read and fill (below).
 * Each probe stays one file to build (its header's nvcc command); this header is found next
 * to it.
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

/* ---- what the GEMV probes (gemv_group_probe, gemv_rs_probe) share ----------------------------
 * probe_time_us: µs per launch — 5 rounds of `reps` launches back to back between two events
 * (buffer set rotating over `sets`), the median round / reps. Session 14: until run
 * 92d7f1b-probe each launch was timed alone (event, launch, event, sync), which charged cuBLAS's
 * host-side work per call (~13 µs: "cublas" 50.3 µs at 64×8192×8192 against 37.4 in fco-bench's
 * CUDA graphs, run c46fad7) and a raw kernel's launch latency to the GPU time; back to back the
 * GPU queue stays full.
 * probe_read_w (and probe_read_w_us, its time): W streamed with 16-byte loads, the ceiling of a
 * W-bound tile.
 * probe_fill_bf16: (h % 17 − 8) / 8 (few distinct values), or with random != 0 uniform in
 * [−1, 1) with full bf16 mantissas, as fco-bench's inputs. */
#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

template <typename F>
static float probe_time_us(F&& launch, int reps, int sets) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 3; ++i) launch(i % sets); /* warm-up */
  for (int round = 0; round < 5; ++round) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) launch((round * reps + i) % sets);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f / reps);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

__global__ void probe_read_w(const uint4* __restrict__ w, size_t n16, unsigned long long* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(w + i);
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) atomicAdd(sink, 1ull);
}

/* µs per pass of probe_read_w over one of the W buffers (bytes each), rotating: probe_time_us. */
template <typename P>
static float probe_read_w_us(const std::vector<P*>& w, size_t bytes, int reps, int sms,
                             unsigned long long* sink) {
  auto rd = [&](int s) {
    probe_read_w<<<sms * 8, 512>>>(reinterpret_cast<const uint4*>(w[s]), bytes / 16, sink);
  };
  return probe_time_us(rd, reps, (int)w.size());
}

__global__ void probe_fill_bf16(__nv_bfloat16* p, size_t n, unsigned seed, int random) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761u) ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16(random ? (float)(h >> 8) * (1.0f / 8388608.f) - 1.f
                                   : ((int)(h % 17) - 8) / 8.0f);
  }
}

#endif /* FCO_BENCH_PROBE_H_ */
