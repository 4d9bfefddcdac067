// Runs a templated CPU kernel for the tensor's float dtype: f(float{}) or f(double{}).
#pragma once
#include "core/tensor.h"

namespace nnlab::cpu {

template <typename F>
void dispatch_float(const char* kernel, const Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    default: fail(kernel, ": the CPU kernel takes float32 or float64, got ", t.describe());
  }
}

// Parallelise a loop only when it has enough work to pay for waking the thread pool.
constexpr long kParallelGrain = 16384;

// y = max(0, y) over n elements, in place, on the calling thread: a convolution's fused ReLU,
// run on a plane or an image just written, still in the cache. NaN gives 0, as the ReLU op.
template <typename T>
void relu_in_place(T* y, long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) y[i] = y[i] > T(0) ? y[i] : T(0);
}

}  // namespace nnlab::cpu
