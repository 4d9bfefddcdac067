// Splitting a row into its even and odd elements, and merging two halves back: the
// deinterleave that stride-2 kernels need (2×2 pooling windows, the even/odd half-planes of
// the Winograd transforms). Written as plain loops for any type; float32 has a 512-bit version
// in the AVX-512 build of the kernels (cpu_isa.h), because the plain loop's stride-2 reads stay
// scalar and were a fifth of the Winograd input transform's time (perf, cifar-cnn).
//
// Only files compiled once per instruction set include this header, and it puts everything in
// their namespace cpu::NNLAB_ISA: an inline function compiled with AVX-512 in one file and
// without in another must not share a name, or the linker keeps one copy for both.
//
//   split_even_odd(src, n, even, odd):  even[k] = src[2k] (⌈n/2⌉ of them), odd[k] = src[2k + 1] (⌊n/2⌋)
//   merge_even_odd(even, odd, n, dst):  dst[i] = i even ? even[i/2] : odd[i/2]   for i < n
//
// The vector versions touch exactly these elements: masked loads and stores, no tails. Their
// register halves, load_even_odd and store_even_odd, also serve the 2×2 max-pool.
#pragma once
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#ifndef NNLAB_ISA
#error "even_odd.h belongs to the kernels compiled once per instruction set (NNLAB_ISA, CMakeLists.txt)"
#endif

namespace nnlab::cpu::NNLAB_ISA {

template <typename T>
inline void split_even_odd(const T* src, int64_t n, T* even, T* odd) {
  for (int64_t i = 0; i < n; ++i) (i % 2 ? odd : even)[i / 2] = src[i];
}

template <typename T>
inline void merge_even_odd(const T* even, const T* odd, int64_t n, T* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = (i % 2 ? odd : even)[i / 2];
}

#if defined(__AVX512F__)
// Lanes [0, count) of 16, count clipped to [0, 16].
inline __mmask16 first_lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

// Up to 32 consecutive floats (count, clipped to [0, 32]) of src as two vectors: even[l] =
// src[2l], odd[l] = src[2l + 1]. Lanes past the count are zero; nothing past it is read.
// _mm512_permutex2var_ps(lo, index, hi) picks lane index[l] of the 32 lanes lo:hi.
inline void load_even_odd(const float* src, int64_t count, __m512& even, __m512& odd) {
  const __m512i even_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_lanes = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(count), src);
  const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(count - 16), src + 16);
  even = _mm512_permutex2var_ps(lo, even_lanes, hi);
  odd = _mm512_permutex2var_ps(lo, odd_lanes, hi);
}

// The reverse: dst[2l] = even[l], dst[2l + 1] = odd[l] for the first count floats of dst.
inline void store_even_odd(float* dst, int64_t count, __m512 even, __m512 odd) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  _mm512_mask_storeu_ps(dst, first_lanes(count), _mm512_permutex2var_ps(even, lo, odd));
  _mm512_mask_storeu_ps(dst + 16, first_lanes(count - 16), _mm512_permutex2var_ps(even, hi, odd));
}

inline void split_even_odd(const float* src, int64_t n, float* even, float* odd) {
  for (int64_t i = 0; i < n; i += 32, src += 32, even += 16, odd += 16) {
    const int64_t left = n - i;  // elements of src still to go
    __m512 e, o;
    load_even_odd(src, left, e, o);
    _mm512_mask_storeu_ps(even, first_lanes((left + 1) / 2), e);
    _mm512_mask_storeu_ps(odd, first_lanes(left / 2), o);
  }
}

inline void merge_even_odd(const float* even, const float* odd, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; i += 32, dst += 32, even += 16, odd += 16) {
    const int64_t left = n - i;  // elements of dst still to go
    store_even_odd(dst, left, _mm512_maskz_loadu_ps(first_lanes((left + 1) / 2), even),
                   _mm512_maskz_loadu_ps(first_lanes(left / 2), odd));
  }
}
#endif

}  // namespace nnlab::cpu::NNLAB_ISA
