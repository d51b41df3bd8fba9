/*
 * gemv_allreduce_ll.cuh — fco_gemv_allreduce's LL one-shot (FCO_GEMV_AR_LL, M <= 16): the
 * partials pushed as LL words {value, flag} (no fence, no separate flag) and polled by the
 * reducers (run_oneshot_ll, ll_wait*). Split from gemv_allreduce_sched.cuh (its parameters,
 * context and helpers) in session 25, the code unchanged; included by gemv_allreduce.cu only.
 */
#ifndef FCO_CUDA_GEMV_ALLREDUCE_LL_CUH_
#define FCO_CUDA_GEMV_ALLREDUCE_LL_CUH_

#include "gemv_allreduce_sched.cuh"

namespace fco {
namespace {

/* ---- LL one-shot (FCO_GEMV_AR_LL=1): partials as LL words, no fence, no flag ----------- */
/* 16 bytes = two LL words, each a single-copy-atomic 64-bit element (PTX: a vector access is
 * one access per element), relaxed at system scope: no release, nothing to order. */
__device__ __forceinline__ void st_ll2(char* p, uint64_t a, uint64_t b) {
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ void ld_ll2(const char* p, uint64_t& a, uint64_t& b) {
  asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(a), "=l"(b)
               : "l"(p)
               : "memory");
}
__device__ __forceinline__ uint64_t ll_word(uint64_t hi, float f) {
  return hi | (uint64_t)__float_as_uint(f);
}

/* Per thread. Poll the kWords LL words at p (8 · kWords bytes) until all carry `flag`; them into
 * w. False after timeout_ns (FCO_ERR_TIMEOUT with the peer, the tile, the flag wanted and the
 * first stale word's) or when another wait has recorded an error. */
template <int kWords>
__device__ __forceinline__ bool ll_wait(const char* p, uint32_t flag, const WaitCtx& wc,
                                        int32_t peer, int32_t tile, uint64_t (&w)[kWords]) {
  uint64_t t0 = 0;
  for (uint32_t spin = 0;; ++spin) {
#pragma unroll
    for (int k = 0; k < kWords; k += 2) ld_ll2(p + 8 * k, w[k], w[k + 1]);
    bool ready = (uint32_t)(w[0] >> 32) == flag;
#pragma unroll
    for (int k = 1; k < kWords; ++k) ready = ready && (uint32_t)(w[k] >> 32) == flag;
    if (ready) return true;
    if (spin == 0) t0 = globaltimer_ns();
    if (spin % kSpinsPerClock == kSpinsPerClock - 1) {
      if (globaltimer_ns() - t0 > wc.timeout_ns) {
        uint32_t seen = (uint32_t)(w[0] >> 32);
        for (int k = kWords - 1; k >= 0; --k)
          if ((uint32_t)(w[k] >> 32) != flag) seen = (uint32_t)(w[k] >> 32);
        record_error(wc.err, FCO_ERR_TIMEOUT, FCO_OP_GEMV_ALLREDUCE, peer, tile, flag, seen);
        return false;
      }
      if (spin % kSpinsPerErrPoll == kSpinsPerErrPoll - 1 && error_stops_waits(wc.err, 0))
        return false; /* not the epoch-limit record: calls issued at the limit still run */
    }
  }
}

/* fp32 words: the 4 partials of 4 words into *out. */
__device__ __forceinline__ bool ll_wait4(const char* p, uint32_t flag, const WaitCtx& wc,
                                         int32_t peer, int32_t tile, float4* out) {
  uint64_t w[4];
  if (!ll_wait<4>(p, flag, wc, peer, tile, w)) return false;
  *out = make_float4(__uint_as_float((uint32_t)w[0]), __uint_as_float((uint32_t)w[1]),
                     __uint_as_float((uint32_t)w[2]), __uint_as_float((uint32_t)w[3]));
  return true;
}

/* Half-width LL words (p.ll_half, bf16 / f16): two partials rounded to the dtype (pack2) in
 * the low 32 bits, the flag in the high ones; ll_wait2 puts the 4 partials of 2 words into
 * *out. */
template <typename T>
__device__ __forceinline__ bool ll_wait2(const char* p, uint32_t flag, const WaitCtx& wc,
                                         int32_t peer, int32_t tile, float4* out) {
  uint64_t w[2];
  if (!ll_wait<2>(p, flag, wc, peer, tile, w)) return false;
  *out = unpack4<T>(w[0], w[1]);
  return true;
}

/* impl 1 through the LL area: as run_oneshot, but each partial float4 of thread i < 4M goes to
 * every rank as 4 LL words {fp32 bits, fco_ll_flag(e)} (two 16-byte stores; slot `me` of the
 * LL half, tile t at t·M·16·8, thread i at i·32) — with p.ll_half (bf16 / f16) as 2 words of
 * two partials rounded to the dtype (one 16-byte store; tile t at t·M·16·4, thread i at i·16)
 * —, and the receiver polls those words instead
 * of a flag: no bar.sync + release before a signal, no signal round trip after the data. The
 * block's last tile stays in registers for its own slot (the common case: one tile per block).
 * Sums in rank order 0..P-1 as run_oneshot: the same bits. No barrier after the tile loop: a
 * thread whose wait fails simply stops (epoch_end's barrier is reached by every thread). */
template <typename T, int kMT, bool kPipe, int kW = kWarpsOf<kMT>>
__device__ __forceinline__ void run_oneshot_ll(const GarParams& p, const Ctx& c,
                                               Smem<kMT, kW>& s, const WaitCtx& wc) {
  const RankView& v = s.v;
  const int i = threadIdx.x;
  const uint32_t flag = fco_ll_flag(c.e);
  const uint64_t hi = (uint64_t)flag << 32;
  /* p.ll_half: 2 words (16 bytes) a thread instead of 4 (32 bytes): half the bytes that move */
  const bool half = sizeof(T) == 2 && p.ll_half;
  const size_t per = half ? 16 : 32;
  const size_t tile_ll = (size_t)p.M * kTileN * (half ? 4 : 8);
  const size_t mine_off = c.lloff + (size_t)c.me * p.ll_slot_bytes + (size_t)i * per;
  float4 last = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int t = c.b; t < p.T; t += c.B) {
    const float4 r = compute_tile<T, kMT, kPipe, kW>(p, c, s, t);
    const bool more = t + c.B < p.T;
    if (i < 4 * p.M) {
      const size_t off = mine_off + (size_t)t * tile_ll;
      /* The thread's words: 4 fp32 ones, or (half) the first 2 as two rounded partials each. */
      uint64_t w0 = ll_word(hi, r.x), w1 = ll_word(hi, r.y), w2 = ll_word(hi, r.z),
               w3 = ll_word(hi, r.w);
      if constexpr (sizeof(T) == 2)
        if (half) w0 = hi | pack2<T>(r.x, r.y), w1 = hi | pack2<T>(r.z, r.w);
      /* peers me+1, me+2, ..., then our own slot — unless this is the block's last tile, which
       * stays in registers (as the peers see it: rounded when half, the same bits everywhere) */
      for (int k = 1; k <= c.P; ++k) {
        if (k == c.P && !more) break;
        char* d = v.peer_data[(c.me + k) % c.P] + off;
        st_ll2(d, w0, w1);
        if (!half) st_ll2(d + 16, w2, w3);
      }
      if (!more) {
        last = r;
        if constexpr (sizeof(T) == 2)
          if (half) last = unpack4<T>(w0, w1);
      }
    }
    if (more) __syncthreads(); /* red is rewritten by the next tile */
  }
  if (i >= 4 * p.M) return;
  const char* mine = v.peer_data[c.me] + c.lloff + (size_t)i * per;
  for (int t = c.b; t < p.T; t += c.B) {
    const bool more = t + c.B < p.T;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int q = 0; q < c.P; ++q) {
      float4 x = last;
      if (q != c.me || more) {
        const char* src = mine + (size_t)q * p.ll_slot_bytes + (size_t)t * tile_ll;
        bool ok;
        if constexpr (sizeof(T) == 2)
          ok = half ? ll_wait2<T>(src, flag, wc, q, t, &x) : ll_wait4(src, flag, wc, q, t, &x);
        else
          ok = ll_wait4(src, flag, wc, q, t, &x);
        if (!ok) return;
      }
      acc = q == 0 ? x : add4(acc, x);
    }
    finish4<T>(p, c, t, acc);
  }
}

}  // namespace
}  // namespace fco

#endif  // FCO_CUDA_GEMV_ALLREDUCE_LL_CUH_
