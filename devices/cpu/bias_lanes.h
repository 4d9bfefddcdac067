// The bias gradient of a convolution, db[j] = Σ_images Σ_plane dz[image, j, ·], in the one
// summation order every CPU path shares, so that a fused path gives the unfused one's bits:
//   per image and channel   32 interleaved lane sums over the plane's body (element i goes to
//                           lane i % 32: four independent vector sums, where 8 lanes had been one
//                           chain of dependent adds) and one scalar sum of the plane's tail
//   per channel             the images' lanes added in image order, then the 32 lanes in lane
//                           order, plus the images' tails added in image order
// Users: bias_backward and relu_bias_backward (reduce_cpu.cpp); the filter gradients that take
// the bias gradient along (Backend::conv2d_backward with dw and db: the direct, Winograd and im2col
// paths, summing each plane of dy as they read it anyway) and the first layer's fused ReLU, bias
// and filter gradient (conv2d_im2col_cpu.cpp).
// In namespace cpu::NNLAB_ISA, like the kernels compiled once per instruction set that use it
// (cpu_isa.h): the AVX-512 kernels get their own copy, compiled for AVX-512, and the rest of the
// library the baseline's (cpu::avx2), so no AVX-512 code can run on an AVX2 CPU
// (scripts/check_isa.py). The sums are elementwise vector adds, the same bits in either.
#pragma once

#ifndef NNLAB_ISA
#error "bias_lanes.h is compiled per instruction set (NNLAB_ISA, CMakeLists.txt)"
#endif

#include <cstdint>

#include "devices/cpu/lane_vectors.h"

namespace nnlab::cpu::NNLAB_ISA {

constexpr long kBiasLanes = 32;
// Sums kept per image and channel: kBiasLanes lanes and a tail.
constexpr long kBiasSums = kBiasLanes + 1;

// dz[i] = dy[i]·[y[i] > 0] over n elements, accumulated into sum[0..n): Masked, a ReLU's
// backward fused with a bias gradient; unmasked (y and dz unused), the bias gradient alone.
// Plain loops over local pointers: behind a lambda GCC reloaded every pointer per element and
// left the loop scalar (2.9 ms for cifar-cnn's first layer, against 0.5 for the two kernels).
template <typename T, bool Masked>
inline void accumulate_row(const T* __restrict dy, const T* __restrict y, T* __restrict dz, T* __restrict sum,
                           long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) {
    if constexpr (Masked) {
      const T v = y[i] > T(0) ? dy[i] : T(0);
      dz[i] = v;
      sum[i] += v;
    } else {
      sum[i] += dy[i];
    }
  }
}

// One image's plane of one channel, `in` elements: lanes[0..kBiasLanes) and tail get its sums
// (overwritten); with Masked, dz = dy·[y > 0] is written too (y and dz may be null otherwise).
template <typename T, bool Masked>
void plane_bias_lanes(const T* dy, const T* y, T* dz, long in, T* lanes, T& tail) {
  for (long l = 0; l < kBiasLanes; ++l) lanes[l] = T(0);
  const long body = in / kBiasLanes * kBiasLanes;
  for (long i = 0; i < body; i += kBiasLanes)
    accumulate_row<T, Masked>(dy + i, Masked ? y + i : nullptr, Masked ? dz + i : nullptr, lanes, kBiasLanes);
  T rest[1] = {T(0)};
  for (long i = body; i < in; ++i)
    accumulate_row<T, Masked>(dy + i, Masked ? y + i : nullptr, Masked ? dz + i : nullptr, rest, 1);
  tail = rest[0];
}

// plane_bias_lanes (unmasked) of the p × q float plane a 2×2 max-pool's backward would make
// from its gradient g and winners (p/2 × q/2; a winner is a flat index into the plane, −1 none),
// without the plane: each run of 2L cells of a row is made in two vectors (winners g, the rest 0,
// as the pool writes them) and added to the lanes those cells go to, so every lane sees the same
// values in the same order. For planes whose rows are whole runs of 2L cells and fall on whole
// runs of lanes (pooled_bias_fits); no tail then.
inline bool pooled_bias_fits(long p, long q) {
  return q % (2 * kVectorLanes<float>) == 0 && (q % kBiasLanes == 0 || kBiasLanes % q == 0) && p * q % kBiasLanes == 0;
}
inline void pooled_plane_bias_lanes(const float* g, const int32_t* winners, long p, long q, float* lanes, float& tail) {
  constexpr long L = kVectorLanes<float>;
  for (long l = 0; l < kBiasLanes; ++l) lanes[l] = 0.0f;
  Vector<int32_t> left;  // a window's left cell, lane by lane: 2·l
  for (long l = 0; l < L; ++l) left[l] = int32_t(2 * l);
  const long windows = q / 2;
  for (long r = 0; r < p; ++r)
    for (long j = 0; j < windows; j += L) {
      const long at = r / 2 * windows + j;
      const Vector<float> grad = load(g + at);
      const Vector<int32_t> won = load(winners + at), cell = int32_t(r * q + 2 * j) + left;
      Vector<float> lo, hi;  // cells r·q + 2j …, in order
      interleave(won == cell ? grad : Vector<float>{}, won == cell + 1 ? grad : Vector<float>{}, lo, hi);
      float* to = lanes + (r * q + 2 * j) % kBiasLanes;
      store(to, load(to) + lo);
      store(to + L, load(to + L) + hi);
    }
  tail = 0.0f;
}

// Adds one image's plane sums into a channel's running sums (lane by lane, in image order).
template <typename T>
void add_image_lanes(const T* image_lanes, T image_tail, T* lanes, T& tails) {
  for (long l = 0; l < kBiasLanes; ++l) lanes[l] += image_lanes[l];
  tails += image_tail;
}

// The channel's bias gradient from its running sums: the lanes in lane order, then the tails.
template <typename T>
T channel_bias(const T* lanes, T tails) {
  T s = T(0);
  for (long l = 0; l < kBiasLanes; ++l) s += lanes[l];
  return s + tails;
}

// The sums of one image's k planes of dy (k, pq) into sums (k, kBiasSums); with Masked,
// dz = dy·[y > 0] is written too (y and dz unused otherwise).
template <typename T, bool Masked>
void image_bias_sums(const T* dy, const T* y, T* dz, long k, long pq, T* sums) {
  for (long j = 0; j < k; ++j) {
    T* s = sums + j * kBiasSums;
    plane_bias_lanes<T, Masked>(dy + j * pq, Masked ? y + j * pq : nullptr, Masked ? dz + j * pq : nullptr, pq, s,
                                s[kBiasLanes]);
  }
}

// db[j] from every image's sums (n, k, kBiasSums), the images in order.
template <typename T>
void bias_from_image_sums(const T* sums, long n, long k, T* db) {
  for (long j = 0; j < k; ++j) {
    T lanes[kBiasLanes] = {}, tails = T(0);
    for (long i = 0; i < n; ++i) {
      const T* s = sums + (i * k + j) * kBiasSums;
      add_image_lanes(s, s[kBiasLanes], lanes, tails);
    }
    db[j] = channel_bias(lanes, tails);
  }
}

}  // namespace nnlab::cpu::NNLAB_ISA
