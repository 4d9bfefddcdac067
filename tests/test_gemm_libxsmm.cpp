// The libxsmm GEMM path (devices/cpu/gemm_libxsmm.h) against a double-precision reference, for
// every transpose pair and beta 0 and 1, and the same bits whatever the thread count.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "devices/cpu/gemm_libxsmm.h"
#include "devices/cpu/threads.h"

using namespace nnlab;

namespace {

struct Operands {
  std::vector<float> a, b, c;
};

Operands random_operands(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Operands o{std::vector<float>(m * k), std::vector<float>(k * n), std::vector<float>(m * n)};
  for (auto* v : {&o.a, &o.b, &o.c})
    for (float& x : *v) x = u(rng);
  return o;
}

// C = op(A)·op(B) + beta·C in double; A stored m × k (k × m when transposed), B k × n (n × k).
std::vector<double> reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const Operands& o, float beta) {
  std::vector<double> c(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = beta * double(o.c[i * n + j]);
      for (int64_t p = 0; p < k; ++p) s += double(ta ? o.a[p * m + i] : o.a[i * k + p]) * (tb ? o.b[j * k + p] : o.b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}

}  // namespace

TEST_CASE("libxsmm gemm: every transpose pair and beta match a double reference", "[gemm][libxsmm]") {
  set_cpu_threads(1);
  // The second shape takes NT's other route (Cᵀ = B·Aᵀ: B larger than A and C together); the
  // third has sides over 1024, as the Linear layers of cnn and cifar-cnn.
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 29, 53}, {8, 64, 32}, {3, 1100, 1300}})
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        Operands o = random_operands(m, n, k, 7);
        const std::vector<double> want = reference(ta, tb, m, n, k, o, beta);
        if (!cpu::libxsmm_gemm(ta, tb, m, n, k, 1.0f, o.a.data(), o.b.data(), beta, o.c.data())) {
          WARN("nnlab was built without libxsmm: nothing to test");
          return;
        }
        for (int64_t i = 0; i < m * n; ++i) {
          INFO("trans_a " << ta << " trans_b " << tb << " beta " << beta << " element " << i);
          REQUIRE(std::fabs(o.c[i] - want[i]) <= 1e-5 * (1 + std::fabs(want[i])) * std::sqrt(double(k)));
        }
      }
  set_cpu_threads(0);
}

TEST_CASE("libxsmm gemm: the same bits with 1 and 2 threads, and refusals of what it does not cover", "[gemm][libxsmm]") {
  const int64_t m = 64, n = 256, k = 784;  // the mlp's first layer, large enough to split
  Operands one = random_operands(m, n, k, 3), two = one;
  set_cpu_threads(1);
  if (!cpu::libxsmm_gemm(false, true, m, n, k, 1.0f, one.a.data(), one.b.data(), 0.0f, one.c.data())) {
    WARN("nnlab was built without libxsmm: nothing to test");
    set_cpu_threads(0);
    return;
  }
  set_cpu_threads(2);
  REQUIRE(cpu::libxsmm_gemm(false, true, m, n, k, 1.0f, two.a.data(), two.b.data(), 0.0f, two.c.data()));
  CHECK(one.c == two.c);
  // alpha other than 1, beta other than 0 or 1, a side over 4096 or more than 2^33
  // multiply-adds: OpenBLAS's.
  CHECK_FALSE(cpu::libxsmm_gemm(false, false, m, n, k, 2.0f, one.a.data(), one.b.data(), 0.0f, one.c.data()));
  CHECK_FALSE(cpu::libxsmm_gemm(false, false, m, n, k, 1.0f, one.a.data(), one.b.data(), 0.5f, one.c.data()));
  std::vector<float> long_a(2 * 5000), long_b(5000 * 2), long_c(4);
  CHECK_FALSE(cpu::libxsmm_gemm(false, false, 2, 2, 5000, 1.0f, long_a.data(), long_b.data(), 0.0f, long_c.data()));
  // 4096 × 4096 × 1024: refused from its sizes before any operand is read, so small buffers do.
  CHECK_FALSE(cpu::libxsmm_gemm(false, false, 4096, 4096, 1024, 1.0f, long_a.data(), long_b.data(), 0.0f,
                                long_c.data()));
  // cnn's f1 backward data (n = 3136) is libxsmm's.
  std::vector<float> f1_a(64 * 128), f1_b(128 * 3136), f1_c(64 * 3136);
  CHECK(cpu::libxsmm_gemm(false, false, 64, 3136, 128, 1.0f, f1_a.data(), f1_b.data(), 0.0f, f1_c.data()));
  set_cpu_threads(0);
}

TEST_CASE("libxsmm gemm: a large B split by columns gives the reference and one thread's bits",
          "[gemm][libxsmm]") {
  // B over 512 KB and C four times wider than tall: the threads take chunks of C's columns
  // (cifar-cnn's f1 input gradient, 64 × 4096 × 512; a width that leaves partial chunks).
  // 100 × 2048 × 80: B of 640 KB, past half the L2 cache (the TN of cifar-cnn's f1 weight gradient).
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{64, 4096, 512}, {16, 4000, 80}, {100, 2048, 80}})
    for (bool ta : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        INFO(m << "×" << n << "×" << k << " trans_a " << ta << " beta " << beta);
        Operands one = random_operands(m, n, k, 11), two = one;
        const std::vector<double> want = reference(ta, false, m, n, k, one, beta);
        set_cpu_threads(1);
        if (!cpu::libxsmm_gemm(ta, false, m, n, k, 1.0f, one.a.data(), one.b.data(), beta, one.c.data())) {
          WARN("nnlab was built without libxsmm: nothing to test");
          set_cpu_threads(0);
          return;
        }
        set_cpu_threads(2);
        REQUIRE(cpu::libxsmm_gemm(ta, false, m, n, k, 1.0f, two.a.data(), two.b.data(), beta, two.c.data()));
        CHECK(one.c == two.c);
        int64_t bad = 0;
        for (int64_t i = 0; i < m * n; ++i)
          bad += std::fabs(two.c[i] - want[i]) > 1e-5 * (1 + std::fabs(want[i])) * std::sqrt(double(k));
        CHECK(bad == 0);
      }
  set_cpu_threads(0);
}

TEST_CASE("libxsmm gemm: a deep product, summed in slices of its depth, gives the reference and one thread's bits",
          "[gemm][libxsmm]") {
  // cifar-cnn's f1 forward (64 × 512 × 4096, NT: Cᵀ = W·Xᵀ, 4096 deep over a 1 MB Xᵀ) and a
  // depth that leaves a short last slice (1000 = 3 × 256 + 232), every transpose of A, beta 0 and 1.
  struct Case {
    int64_t m, n, k;
    bool ta, tb;
  };
  for (const Case& s : {Case{64, 512, 4096, false, true}, Case{40, 96, 1000, false, false},
                        Case{40, 96, 1000, true, false}})
    for (float beta : {0.0f, 1.0f}) {
      if (s.tb && beta != 0.0f) continue;  // NT's deep route is the one with beta 0
      INFO(s.m << "×" << s.n << "×" << s.k << " trans_a " << s.ta << " trans_b " << s.tb << " beta " << beta);
      Operands one = random_operands(s.m, s.n, s.k, 13), two = one;
      const std::vector<double> want = reference(s.ta, s.tb, s.m, s.n, s.k, one, beta);
      set_cpu_threads(1);
      if (!cpu::libxsmm_gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, one.a.data(), one.b.data(), beta, one.c.data())) {
        WARN("nnlab was built without libxsmm: nothing to test");
        set_cpu_threads(0);
        return;
      }
      set_cpu_threads(2);
      REQUIRE(cpu::libxsmm_gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, two.a.data(), two.b.data(), beta, two.c.data()));
      CHECK(one.c == two.c);
      int64_t bad = 0;
      for (int64_t i = 0; i < s.m * s.n; ++i)
        bad += std::fabs(two.c[i] - want[i]) > 1e-5 * (1 + std::fabs(want[i])) * std::sqrt(double(s.k));
      CHECK(bad == 0);
    }
  set_cpu_threads(0);
}
