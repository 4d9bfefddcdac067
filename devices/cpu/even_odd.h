// The even and odd elements of a row in two 512-bit vectors, and back: the deinterleave that
// stride-2 kernels need (the 2×2 max-pool, pool2d_cpu.cpp), with first_lanes' masks for rows
// that end inside a vector (also small_gemm's). The vector versions touch exactly the
// elements they are given: masked loads and stores, no tails.
//
// Only files compiled once per instruction set include this header, and it puts everything in
// their namespace cpu::NNLAB_ISA: an inline function compiled with AVX-512 in one file and
// without in another must not share a name, or the linker keeps one copy for both.
#pragma once
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#ifndef NNLAB_ISA
#error "even_odd.h belongs to the kernels compiled once per instruction set (NNLAB_ISA, CMakeLists.txt)"
#endif

namespace nnlab::cpu::NNLAB_ISA {

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

#endif

}  // namespace nnlab::cpu::NNLAB_ISA
