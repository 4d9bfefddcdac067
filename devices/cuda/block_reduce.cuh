// A block-wide sum in a fixed order: every thread holds a partial sum, then a shared-memory
// tree halves the active threads until thread 0 holds the total. The order of additions
// depends only on blockDim, never on timing, so results repeat bit for bit (no atomics).
#pragma once
#include "devices/cuda/cuda_context.h"

namespace nnlab::cuda {

// Call from every thread of a block of kThreads threads; the total is valid in thread 0.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T partial[kThreads];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const T total = partial[0];
  __syncthreads();  // the buffer may be reused by the next call
  return total;
}

// Per-channel sums over (outer, c, inner) — a bias gradient, BatchNorm's statistics — run on a
// grid of (c, slices) blocks: channel j's count = outer·inner values, value t at
// (t / inner, j, t % inner), are cut into `slices` runs of `len` consecutive t, each summed by
// one block into a partial of its own, and the partials are added in slice order. One block
// per channel left most of the GPU idle (cnn's c1: 32 blocks on a 132-SM H200). The slices
// depend on the shape alone (at least min_len values each, at most 64), so the order of every
// sum is fixed and a run repeats bit for bit on any GPU.
struct ChannelSlices {
  int64_t count, slices, len;
};

inline ChannelSlices channel_slices(int64_t count, int64_t min_len = 4096) {
  const int64_t fit = count / min_len, slices = fit < 1 ? 1 : (fit > 64 ? 64 : fit);
  return {count, slices, (count + slices - 1) / slices};
}

// This thread's values of slice blockIdx.y of channel blockIdx.x: t = start + threadIdx.x,
// then every blockDim.x (neighbouring threads take neighbouring t, so their reads coalesce),
// each value's address found without a division per value.
//   for (ChannelWalk v(s, c, inner); v.more(); v.next()) use(x[v.at()]);
class ChannelWalk {
 public:
  __device__ ChannelWalk(const ChannelSlices& s, int64_t c, int64_t inner)
      : t_(blockIdx.y * s.len + threadIdx.x),
        end_(min((blockIdx.y + 1) * s.len, s.count)),
        o_(t_ / inner),
        i_(t_ % inner),
        c_(c),
        j_(blockIdx.x),
        inner_(inner),
        step_o_(blockDim.x / inner),
        step_i_(blockDim.x % inner) {}
  __device__ bool more() const { return t_ < end_; }
  __device__ int64_t at() const { return (o_ * c_ + j_) * inner_ + i_; }
  __device__ int64_t outer() const { return o_; }  // the value's (t / inner, ·, t % inner)
  __device__ int64_t inner() const { return i_; }
  __device__ void next() {
    t_ += blockDim.x, o_ += step_o_, i_ += step_i_;
    if (i_ >= inner_) i_ -= inner_, ++o_;
  }

 private:
  int64_t t_, end_, o_, i_, c_, j_, inner_, step_o_, step_i_;
};

// Σ_p partial[j·slices + p], p in order: every thread of every block of channel j gets the
// same total.
__device__ __forceinline__ double sum_of_slices(const double* partial, int64_t j, int64_t slices) {
  double s = 0.0;
  for (int64_t p = 0; p < slices; ++p) s += partial[j * slices + p];
  return s;
}

}  // namespace nnlab::cuda
