// The Winograd products' own float32 matrix multiply (devices/cpu/small_gemm.h): every block
// and tail of its register blocking against a float64 sum, with guard cells around C.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "devices/cpu/small_gemm.h"
#include "devices/cpu/threads.h"
#include "devices/kernel_log.h"
#include "devices/registry.h"

using namespace nnlab;

namespace {

std::vector<float> filled(int64_t count, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t state = seed * 2654435761u + 1;
  for (auto& x : v) {  // values in [-1, 1) from a small LCG: enough for a product test
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

constexpr float kGuard = 1234.5f;  // the cells around C must keep it

// C sits inside a buffer with `pad` guard cells before and after it.
void check_result(const std::vector<float>& buffer, int64_t pad, const std::vector<double>& expected,
                  const std::vector<double>& magnitude) {
  const int64_t count = static_cast<int64_t>(expected.size());
  for (int64_t i = 0; i < pad; ++i) {
    CHECK(buffer[i] == kGuard);
    CHECK(buffer[pad + count + i] == kGuard);
  }
  for (int64_t e = 0; e < count; ++e) {
    INFO("element " << e);
    // float32 sums of up to a few hundred products: error bounded by a few ulps of Σ|a·b|
    CHECK(std::fabs(buffer[pad + e] - expected[e]) <= 1e-6 * (4.0 + magnitude[e]));
  }
}

// C0 (m × n) [+] Σ_p a(i, p) · b(p, j) over p < depth in float64, and Σ of the terms' magnitudes.
template <typename AAt, typename BAt>
void reference_product(int64_t m, int64_t n, int64_t depth, AAt a, BAt b, const std::vector<float>& c0, bool accumulate,
                       std::vector<double>& expected, std::vector<double>& magnitude) {
  expected.assign(m * n, 0.0);
  magnitude.assign(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = accumulate ? c0[i * n + j] : 0.0, size = std::fabs(sum);
      for (int64_t p = 0; p < depth; ++p) {
        sum += double(a(i, p)) * b(p, j);
        size += std::fabs(double(a(i, p)) * b(p, j));
      }
      expected[i * n + j] = sum;
      magnitude[i * n + j] = size;
    }
}

}  // namespace

TEST_CASE("small_gemm_nn matches a float64 product on every block and tail shape", "[gemm][winograd]") {
  const int64_t pad = 40;
  for (int64_t m : {1, 3, 7, 8, 9, 17})
    for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 70})
      for (int64_t k : {1, 2, 13, 32})
        for (bool accumulate : {false, true}) {
          INFO("m " << m << " n " << n << " k " << k << " accumulate " << accumulate);
          const auto a = filled(m * k, 1), b = filled(k * n, 2), c0 = filled(m * n, 3);
          std::vector<float> buffer(m * n + 2 * pad, kGuard);
          std::copy(c0.begin(), c0.end(), buffer.begin() + pad);
          cpu::small_gemm_nn(m, n, k, a.data(), b.data(), buffer.data() + pad, accumulate);
          std::vector<double> expected, magnitude;
          reference_product(
              m, n, k, [&](int64_t i, int64_t p) { return a[i * k + p]; },
              [&](int64_t p, int64_t j) { return b[p * n + j]; }, c0, accumulate, expected, magnitude);
          check_result(buffer, pad, expected, magnitude);
        }
}

TEST_CASE("small_gemm_nt adds a float64 product on every block and tail shape", "[gemm][winograd]") {
  const int64_t pad = 8;
  for (int64_t m : {1, 3, 4, 5, 8, 13})
    for (int64_t n : {1, 2, 4, 6, 9, 32})
      for (int64_t t : {1, 15, 16, 17, 49, 147}) {
        INFO("m " << m << " n " << n << " t " << t);
        const auto a = filled(m * t, 4), b = filled(n * t, 5), c0 = filled(m * n, 6);
        std::vector<float> buffer(m * n + 2 * pad, kGuard);
        std::copy(c0.begin(), c0.end(), buffer.begin() + pad);
        cpu::small_gemm_nt(m, n, t, a.data(), b.data(), buffer.data() + pad, n, true, nullptr, false);
        std::vector<double> expected, magnitude;
        reference_product(
            m, n, t, [&](int64_t i, int64_t p) { return a[i * t + p]; },
            [&](int64_t p, int64_t j) { return b[j * t + p]; }, c0, true, expected, magnitude);
        check_result(buffer, pad, expected, magnitude);
      }
}

TEST_CASE("small_gemm_nt writes (or adds) a block of a wider C and leaves the columns beside it alone",
          "[gemm]") {
  const int64_t m = 6, n = 5, t = 33, ldc = 9;  // C: columns [2, 7) of a 6 × 9 matrix
  const auto a = filled(m * t, 11), b = filled(n * t, 12), wide = filled(m * ldc, 13);
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    std::vector<float> c = wide;
    cpu::small_gemm_nt(m, n, t, a.data(), b.data(), c.data() + 2, ldc, accumulate, nullptr, false);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        INFO("row " << i << " column " << j);
        const float before = wide[i * ldc + j];
        if (j < 2 || j >= 2 + n) {
          CHECK(c[i * ldc + j] == before);
          continue;
        }
        double want = accumulate ? before : 0.0, size = std::fabs(want);
        for (int64_t p = 0; p < t; ++p) {
          want += double(a[i * t + p]) * b[(j - 2) * t + p];
          size += std::fabs(double(a[i * t + p]) * b[(j - 2) * t + p]);
        }
        CHECK(std::fabs(c[i * ldc + j] - want) <= 1e-6 * (4.0 + size));
      }
  }
}

// Backend::gemm's C = A·Bᵀ in float32 (a Linear layer's forward pass), which AVX-512 machines run
// as small_gemm_nt's dot products spread over the threads by blocks of columns: against a float64
// product with beta 0 and 1, and bit for bit the same on 1 and 2 threads.
TEST_CASE("the backend's float32 A·Bᵀ matches a float64 product and repeats on 1 and 2 threads", "[gemm]") {
  Backend& cpu_backend = backend_for(Device::cpu());
  for (const auto& shape : {std::array<int64_t, 3>{37, 29, 53}, {64, 256, 784}, {64, 10, 128}, {3, 6, 17}}) {
    const int64_t m = shape[0], n = shape[1], k = shape[2];  // named copies: lambdas capture them (C++17)
    const auto a = filled(m * k, 21), b = filled(n * k, 22), c0 = filled(m * n, 23);
    for (double beta : {0.0, 1.0}) {
      INFO("m " << m << " n " << n << " k " << k << " beta " << beta);
      std::vector<double> expected, magnitude;
      reference_product(
          m, n, k, [&](int64_t i, int64_t p) { return a[i * k + p]; },
          [&](int64_t p, int64_t j) { return b[j * k + p]; }, c0, beta == 1.0, expected, magnitude);
      std::vector<std::vector<float>> results;
      for (int threads : {1, 2}) {
        set_cpu_threads(threads);
        const Tensor ta = Tensor::from_vector(a, {m, k}), tb = Tensor::from_vector(b, {n, k});
        Tensor tc = Tensor::from_vector(c0, {m, n});
        cpu_backend.gemm(false, true, m, n, k, 1.0, ta, tb, beta, tc);
        results.push_back(tc.to_vector<float>());
      }
      set_cpu_threads(0);
      CHECK(results[0] == results[1]);
      for (int64_t e = 0; e < m * n; ++e) {
        INFO("element " << e);
        CHECK(std::fabs(results[1][e] - expected[e]) <= 1e-6 * (4.0 + magnitude[e]));
      }
    }
  }
}

// A Linear layer's forward in float32 (Backend::linear_forward): the CPU adds the bias, and takes
// the fused ReLU's max, inside its dot-product route, chunk by chunk; with and without a bias and
// the ReLU, against float64, 1 and 2 threads.
TEST_CASE("the backend's float32 Linear forward adds its bias and ReLU inside the product", "[gemm]") {
  Backend& cpu_backend = backend_for(Device::cpu());
  for (const auto& shape : {std::array<int64_t, 3>{64, 256, 784}, {5, 3, 17}, {64, 10, 3000}}) {
    const int64_t n = shape[0], out = shape[1], in = shape[2];
    const auto x = filled(n * in, 51), w = filled(out * in, 52), bias = filled(out, 53);
    for (const auto& [with_bias, relu] : {std::pair{true, false}, {false, false}, {true, true}, {false, true}}) {
      INFO("n " << n << " out " << out << " in " << in << " bias " << with_bias << " relu " << relu);
      std::vector<double> expected, magnitude;
      reference_product(
          n, out, in, [&](int64_t i, int64_t p) { return x[i * in + p]; },
          [&](int64_t p, int64_t j) { return w[j * in + p]; }, std::vector<float>(n * out, 0.0f), false, expected,
          magnitude);
      std::vector<std::vector<float>> results;
      bool on_openblas = false;
      for (int threads : {1, 2}) {
        set_cpu_threads(threads);
        const Tensor tx = Tensor::from_vector(x, {n, in}), tw = Tensor::from_vector(w, {out, in});
        const Tensor tb = Tensor::from_vector(bias, {out});
        Tensor ty = Tensor::empty({n, out});
        KernelLogScope log;  // which route ran
        cpu_backend.linear_forward(tx, tw, with_bias ? &tb : nullptr, ty, relu);
        for (const KernelCall& call : take_kernel_calls()) on_openblas |= call.family == "cblas_sgemm";
        results.push_back(ty.to_vector<float>());
      }
      set_cpu_threads(0);
      // Our dot-product route and libxsmm's split the output, never a sum, so the thread count
      // cannot change a bit. OpenBLAS (where libxsmm is absent) may: on an Intel Xeon its results
      // on 1 and 2 threads differed in the last bit; it is held to the float64 check alone.
      if (!on_openblas) CHECK(results[0] == results[1]);
      for (int64_t e = 0; e < n * out; ++e) {
        INFO("element " << e);
        const double sum = expected[e] + (with_bias ? bias[e % out] : 0.0);
        const double want = relu ? std::max(sum, 0.0) : sum;  // the max moves no value further from its sum's
        for (const auto& result : results)
          CHECK(std::fabs(result[e] - want) <= 1e-6 * (4.0 + magnitude[e] + std::fabs(bias[e % out])));
      }
    }
  }
}
