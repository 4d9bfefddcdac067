// Vectors of 32 bytes (8 floats or 4 doubles) as GCC vector types, for kernels whose arithmetic
// is written once for any element type and whose lanes are independent tiles (the Winograd
// transforms, conv2d_winograd_cpu.cpp). The compiler turns them into AVX instructions for
// either instruction set the file is compiled for.
//
// Besides loads and stores, the (de)interleaves that split a row into its columns mod m and
// merge it back happen here in registers: going through memory instead (a narrow store read
// back at once by a wider load) stalls on store forwarding, which cost a third of the Winograd
// output transform's time (perf, cifar-cnn c2).
//
//   load_halves(lower, upper)          lanes [0, L/2) from one place, [L/2, L) from another
//   store_halves(lower, upper, v)      the reverse
//   deinterleave(lo, hi) → even, odd   of the 2L values lo:hi, even[l] = (lo:hi)[2l]
//   interleave(even, odd) → lo, hi     the reverse
//   split_phases<m>(v)                 m·L consecutive values → m vectors, phase j: values ≡ j mod m
//   merge_phases<m>(v)                 the reverse
#pragma once
#include <cstring>
#include <type_traits>

#if defined(__AVX512VL__)
#include <immintrin.h>
#endif

#ifndef NNLAB_ISA
#error "lane_vectors.h belongs to the kernels compiled once per instruction set (NNLAB_ISA)"
#endif

namespace nnlab::cpu::NNLAB_ISA {

template <typename T>
struct VectorOf {
  typedef T type __attribute__((vector_size(32)));
};
template <typename T>
using Vector = typename VectorOf<T>::type;
template <typename T>
constexpr long kVectorLanes = long(sizeof(Vector<T>) / sizeof(T));

template <typename T>
inline Vector<T> load(const T* from) {
  Vector<T> v;
  std::memcpy(&v, from, sizeof v);
  return v;
}
template <typename T>
inline void store(T* to, const Vector<T>& v) {
  std::memcpy(to, &v, sizeof v);
}
// The first `count` lanes (clipped to [0, L]) from memory, the rest zero; nothing past them is
// read. Masked loads and stores where the set has them: a tail written one float at a time
// was a quarter of the F(4×4) filter gradient's time on 16-wide planes.
template <typename T>
inline Vector<T> load_first(const T* from, long count) {
  if (count >= kVectorLanes<T>) return load(from);
  if (count <= 0) return Vector<T>{};
#if defined(__AVX512VL__)
  const __mmask8 lanes = __mmask8((1u << count) - 1);
  if constexpr (std::is_same_v<T, float>)
    return Vector<T>(_mm256_maskz_loadu_ps(lanes, from));
  else if constexpr (std::is_same_v<T, int32_t>)
    return Vector<T>(_mm256_maskz_loadu_epi32(lanes, from));
  else
    return Vector<T>(_mm256_maskz_loadu_pd(lanes, from));
#else
  Vector<T> v = {};
  for (long l = 0; l < count; ++l) v[l] = from[l];
  return v;
#endif
}
// The first `count` lanes (clipped to [0, L]) to memory; nothing past them is written.
template <typename T>
inline void store_first(T* to, const Vector<T>& v, long count) {
  if (count >= kVectorLanes<T>) return store(to, v);
  if (count <= 0) return;
#if defined(__AVX512VL__)
  const __mmask8 lanes = __mmask8((1u << count) - 1);
  if constexpr (std::is_same_v<T, float>)
    _mm256_mask_storeu_ps(to, lanes, __m256(v));
  else
    _mm256_mask_storeu_pd(to, lanes, __m256d(v));
#else
  for (long l = 0; l < count; ++l) to[l] = v[l];
#endif
}

// Half vectors (16 bytes), and whole vectors from or to two places, one per half.
template <typename T>
struct HalfVectorOf {
  typedef T type __attribute__((vector_size(16)));
};
template <typename T>
using HalfVector = typename HalfVectorOf<T>::type;

template <typename T>
inline Vector<T> load_halves(const T* lower, const T* upper) {
  HalfVector<T> a, b;
  std::memcpy(&a, lower, sizeof a);
  std::memcpy(&b, upper, sizeof b);
  if constexpr (kVectorLanes<T> == 8)
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7);
  else
    return __builtin_shufflevector(a, b, 0, 1, 2, 3);
}
// upper null: the lower half only.
template <typename T>
inline void store_halves(T* lower, T* upper, const Vector<T>& v) {
  HalfVector<T> a, b;
  if constexpr (kVectorLanes<T> == 8) {
    a = __builtin_shufflevector(v, v, 0, 1, 2, 3);
    b = __builtin_shufflevector(v, v, 4, 5, 6, 7);
  } else {
    a = __builtin_shufflevector(v, v, 0, 1);
    b = __builtin_shufflevector(v, v, 2, 3);
  }
  std::memcpy(lower, &a, sizeof a);
  if (upper) std::memcpy(upper, &b, sizeof b);
}

// V: Vector<T> (its element type is not deducible from the alias, hence V).
template <typename V>
constexpr long lanes_of() {
  return long(sizeof(V) / sizeof(V{}[0]));
}

template <typename V>
inline void deinterleave(const V& lo, const V& hi, V& even, V& odd) {
  if constexpr (lanes_of<V>() == 8) {
    even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
    odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15);
  } else {
    even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6);
    odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7);
  }
}
template <typename V>
inline void interleave(const V& even, const V& odd, V& lo, V& hi) {
  if constexpr (lanes_of<V>() == 8) {
    lo = __builtin_shufflevector(even, odd, 0, 8, 1, 9, 2, 10, 3, 11);
    hi = __builtin_shufflevector(even, odd, 4, 12, 5, 13, 6, 14, 7, 15);
  } else {
    lo = __builtin_shufflevector(even, odd, 0, 4, 1, 5);
    hi = __builtin_shufflevector(even, odd, 2, 6, 3, 7);
  }
}

// m = 2: one deinterleave. m = 4: the even and odd halves, then each of those again (phase 0
// is the even half's even values, phase 2 its odd ones).
template <int m, typename V>
inline void split_phases(const V (&v)[m], V (&phase)[m]) {
  static_assert(m == 2 || m == 4, "columns mod 2 or mod 4");
  if constexpr (m == 2) {
    deinterleave(v[0], v[1], phase[0], phase[1]);
  } else {
    V even[2], odd[2];
    deinterleave(v[0], v[1], even[0], odd[0]);
    deinterleave(v[2], v[3], even[1], odd[1]);
    deinterleave(even[0], even[1], phase[0], phase[2]);
    deinterleave(odd[0], odd[1], phase[1], phase[3]);
  }
}
template <int m, typename V>
inline void merge_phases(const V (&phase)[m], V (&v)[m]) {
  static_assert(m == 2 || m == 4, "columns mod 2 or mod 4");
  if constexpr (m == 2) {
    interleave(phase[0], phase[1], v[0], v[1]);
  } else {
    V even[2], odd[2];
    interleave(phase[0], phase[2], even[0], even[1]);
    interleave(phase[1], phase[3], odd[0], odd[1]);
    interleave(even[0], odd[0], v[0], v[1]);
    interleave(even[1], odd[1], v[2], v[3]);
  }
}

}  // namespace nnlab::cpu::NNLAB_ISA
