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

}  // namespace nnlab::cpu
