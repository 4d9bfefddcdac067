// Shared helpers for the GPU tests: fresh random inputs drawn on the host, the two backends,
// and a bit-for-bit comparison; the closeness checks come from tests/test_support.h.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "devices/gemm_impl.h"
#include "devices/registry.h"
#include "test_support.h"

namespace nnlab::gputest {

inline Backend& cpu() { return backend_for(Device::cpu()); }
inline Backend& gpu() { return backend_for(Device::cuda(0)); }
inline Tensor on_gpu(const Tensor& t) { return t.to(Device::cuda(0)); }

// A fresh seed per call, so every test case sees new inputs (but a failing run repeats).
inline uint64_t next_seed() {
  static uint64_t counter = 0x5eed;
  return ++counter;
}

// A float32 tensor on the host with values in [lo, hi), from a fresh seed.
inline Tensor fresh_tensor(const Shape& shape, double lo = -1.0, double hi = 1.0) {
  return nnlab_test::random_tensor(shape, next_seed(), 7, DType::Float32, lo, hi);
}

// int32 labels in [0, classes).
inline Tensor random_labels(int64_t n, int64_t classes) {
  const RandomStream rs{next_seed(), RandomPurpose::Shuffle, 3};
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(rs.below(static_cast<uint64_t>(i), classes));
  return Tensor::from_vector(v, {n});
}

// Runs CUDA's GEMMs on one rung of the ladder (--gemm-impl) for a scope, then on cuBLAS again.
struct GemmImplScope {
  explicit GemmImplScope(GemmImpl impl) { set_gemm_impl(impl); }
  ~GemmImplScope() { set_gemm_impl(GemmImpl::Cublas); }
  GemmImplScope(const GemmImplScope&) = delete;
  GemmImplScope& operator=(const GemmImplScope&) = delete;
};

// CUDA results against their CPU twins, element by element (tests/test_support.h).
using nnlab_test::require_allclose;

// Bit-for-bit equality of two tensors' contents (masks, argmax, integer counters).
template <typename T>
void require_equal(const Tensor& from_gpu, const Tensor& from_cpu, const std::string& what) {
  const std::vector<T> g = from_gpu.to_vector<T>(), c = from_cpu.to_vector<T>();
  REQUIRE(g.size() == c.size());
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i] != c[i] && differ++ == 0) first = i;
  INFO(what << ": " << differ << " of " << g.size() << " elements differ, first at " << first);
  REQUIRE(differ == 0);
}

}  // namespace nnlab::gputest
