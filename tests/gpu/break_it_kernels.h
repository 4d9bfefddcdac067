// "Break it yourself" (docs/break-it.md): two small kernels, each written once with a
// compile-time switch between the correct kernel and the same kernel with one exercise's edit
// made. The doc tells you which line to edit; tests/gpu/test_gpu_break_it.cpp runs the
// `broken` instantiation and checks that the sanitizer reports what the doc says it reports.
// Simulator builds only: a GPU build compiles the tests with the host compiler, which cannot
// define kernels.
#pragma once
#include <cuda_runtime.h>

namespace nnlab::break_it {

enum class Variant { correct, broken };

constexpr int kReverseBlock = 64;

// Exercise 1: a missing __syncthreads().
// x, y: (blocks · 64)   each block reverses its slice: y[b·64 + t] = x[b·64 + 63 − t].
// Thread t writes shared slot t, then reads slot 63 − t, which another thread wrote. Only the
// barrier orders that write before this read; the edit deletes it (the `broken` variant).
template <Variant kVariant>
__global__ void reverse_in_block_kernel(const float* x, float* y) {
  __shared__ float slot[kReverseBlock];
  const int t = static_cast<int>(threadIdx.x), base = static_cast<int>(blockIdx.x) * kReverseBlock;
  slot[t] = x[base + t];
  if (kVariant == Variant::correct) __syncthreads();  // exercise 1: delete this line
  y[base + t] = slot[kReverseBlock - 1 - t];
}

// Exercise 2: an index one past the end.
// x, y: (n)   y[i] = 2·x[i], one thread per element. The grid is rounded up to whole blocks,
// so the last block has threads past the end: the guard `i < n` keeps them off memory. The
// edit makes it `i <= n` (the `broken` variant), and thread n reads x[n] and writes y[n].
template <Variant kVariant>
__global__ void twice_kernel(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const bool inside = kVariant == Variant::correct ? i < n : i <= n;  // exercise 2: make it `i <= n`
  if (inside) y[i] = 2.0f * x[i];
}

}  // namespace nnlab::break_it
