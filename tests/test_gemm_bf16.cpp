// bf16 products on the CPU (devices/cpu/gemm_bf16.h, `--math bf16`): the rounding to bf16
// against values worked out by hand, the kernel against a double reference of the rounded
// operands for every transpose pair and edge, the same bits on 1 and 2 threads, the Linear
// layers routed through it, and the command line. On a CPU without AVX-512 BF16 the kernel
// cases check the one clear refusal instead.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "autograd/ops.h"
#include "cli_support.h"
#include "core/error.h"
#include "core/tensor.h"
#include "devices/cpu/gemm_bf16.h"
#include "devices/cpu/threads.h"

using namespace nnlab;
using nnlab_test::CliResult;
using nnlab_test::run_cli;

namespace {

// The products go to the bf16 kernel while one of these lives.
struct Bf16Scope {
  Bf16Scope() { cpu::set_cpu_bf16_products(true); }
  ~Bf16Scope() { cpu::set_cpu_bf16_products(false); }
};

std::vector<float> random_floats(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(count);
  for (float& x : v) x = u(rng);
  return v;
}

// op(A)·op(B) [+ C] of the bf16-rounded operands, in double; the bound on float32's summation
// error: |terms| summed, times k ulps.
struct Expected {
  std::vector<double> value, bound;
};
Expected reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const std::vector<float>& a,
                   const std::vector<float>& b, const std::vector<float>& c, bool accumulate) {
  Expected e{std::vector<double>(m * n), std::vector<double>(m * n)};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = accumulate ? c[i * n + j] : 0.0, size = std::fabs(s);
      for (int64_t p = 0; p < k; ++p) {
        const double t = double(cpu::round_to_bf16_flushing(ta ? a[p * m + i] : a[i * k + p])) *
                         double(cpu::round_to_bf16_flushing(tb ? b[j * k + p] : b[p * n + j]));
        s += t;
        size += std::fabs(t);
      }
      e.value[i * n + j] = s;
      e.bound[i * n + j] = size * 1.2e-7 * double(k + 2) + 1e-30;
    }
  return e;
}

bool same_bits(float x, uint32_t bits) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u == bits;
}

}  // namespace

TEST_CASE("bf16: rounding to nearest, ties to even, as the hardware does", "[gemm][bf16]") {
  // 1 + 2⁻⁸ + 2⁻¹⁰: past half an ulp (bf16's ulp at 1 is 2⁻⁷), so up; truncation would give 1.
  CHECK(cpu::round_to_bf16_flushing(1.0f + 0x1p-8f + 0x1p-10f) == 1.0f + 0x1p-7f);
  CHECK(cpu::round_to_bf16_flushing(1.0f + 0x1p-8f) == 1.0f);                  // a tie: to the even 1
  CHECK(cpu::round_to_bf16_flushing(1.0f + 0x1p-7f + 0x1p-8f) == 1.0f + 0x1p-6f);  // a tie: to the even 1 + 2⁻⁶
  CHECK(cpu::round_to_bf16_flushing(-(1.0f + 0x1p-8f + 0x1p-10f)) == -(1.0f + 0x1p-7f));
  CHECK(cpu::round_to_bf16_flushing(0x1p-130f) == 0.0f);                       // a denormal counts as zero
  CHECK(std::isinf(cpu::round_to_bf16_flushing(std::numeric_limits<float>::max())));  // rounds past bf16's largest
  CHECK(std::isnan(cpu::round_to_bf16_flushing(std::numeric_limits<float>::quiet_NaN())));
  CHECK(same_bits(cpu::round_to_bf16_flushing(3.0f), 0x40400000u));  // exact values stay
}

TEST_CASE("bf16 gemm: every transpose pair and edge against a double reference", "[gemm][bf16]") {
  if (!cpu::gemm_bf16_available()) {
    WARN("no bf16 kernel here: " << cpu::gemm_bf16_unavailable_reason());
    REQUIRE_THROWS_WITH(cpu::set_cpu_bf16_products(true),
                        Catch::Contains("--math bf16 cannot run on this CPU: " + cpu::gemm_bf16_unavailable_reason()));
    return;
  }
  set_cpu_threads(2);
  // m: under, at and over the 8-row block; n: under and over the 32-column panel; k: 1, odd,
  // even, over 32 pairs, and over the 1024-pair depth block (2 passes over C).
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 15, 3}, {8, 32, 64}, {9, 33, 67},
                                {17, 70, 2}, {64, 40, 2101}, {3, 130, 31}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool accumulate : {false, true}) {
          const std::vector<float> a = random_floats(m * k, 1), b = random_floats(k * n, 2), c0 = random_floats(m * n, 3);
          std::vector<float> c = c0;
          cpu::gemm_bf16(ta, tb, m, n, k, a.data(), ta ? m : k, b.data(), tb ? k : n, accumulate, c.data(), n);
          const Expected want = reference(ta, tb, m, n, k, a, b, c0, accumulate);
          for (int64_t i = 0; i < m * n; ++i) {
            INFO(m << "×" << n << "×" << k << " trans_a " << ta << " trans_b " << tb << " accumulate " << accumulate
                   << " element " << i);
            REQUIRE(std::fabs(double(c[i]) - want.value[i]) <= want.bound[i]);
          }
        }
}

TEST_CASE("bf16 gemm: operands are rounded, not truncated, and C's row stride is kept", "[gemm][bf16]") {
  if (!cpu::gemm_bf16_available()) return;  // the case above checks the refusal
  // A row of 3 values whose truncation and rounding differ; B all ones: C is their rounded sum.
  const float x = 1.0f + 0x1p-8f + 0x1p-10f;  // → 1 + 2⁻⁷
  const float y = 1.0f + 0x1p-7f + 0x1p-8f;   // a tie → 1 + 2⁻⁶
  const float z = 2.0f + 0x1p-7f + 0x1p-9f;   // → 2 + 2⁻⁶ (bf16's ulp at 2 is 2⁻⁶)
  const std::vector<float> a = {x, y, z}, b = {1.0f, 1.0f, 1.0f};
  std::vector<float> c = {-1.0f, 7.0f, 9.0f};  // C's row 0 with ldc 3: only c[0] is written
  cpu::gemm_bf16(false, false, 1, 1, 3, a.data(), 3, b.data(), 1, false, c.data(), 3);
  CHECK(c[0] == (1.0f + 0x1p-7f) + (1.0f + 0x1p-6f) + (2.0f + 0x1p-6f));
  CHECK(c[1] == 7.0f);
  CHECK(c[2] == 9.0f);
}

TEST_CASE("bf16 gemm: the bias and ReLU epilogue, applied once after the last depth block", "[gemm][bf16]") {
  if (!cpu::gemm_bf16_available()) return;
  set_cpu_threads(2);
  // k = 2101: 1051 pairs, two depth blocks, so the epilogue must wait for the second; and k = 0.
  for (const int64_t k : {int64_t(2101), int64_t(37), int64_t(0)})
    for (bool accumulate : {false, true}) {
      const int64_t m = 9, n = 40;
      const std::vector<float> a = random_floats(m * k, 8), b = random_floats(k * n, 9), c0 = random_floats(m * n, 10);
      const std::vector<float> bias = random_floats(n, 11);
      std::vector<float> c = c0;
      cpu::gemm_bf16(false, false, m, n, k, a.data(), k, b.data(), n, accumulate, c.data(), n, bias.data(), true);
      const Expected want = reference(false, false, m, n, k, a, b, c0, accumulate);
      for (int64_t i = 0; i < m * n; ++i) {
        INFO("k " << k << " accumulate " << accumulate << " element " << i);
        REQUIRE(std::fabs(double(c[i]) - std::max(0.0, want.value[i] + bias[i % n])) <= want.bound[i] + 1e-6);
      }
    }
}

TEST_CASE("bf16 gemm: the same bits on one thread and on two", "[gemm][bf16]") {
  if (!cpu::gemm_bf16_available()) return;
  const int64_t m = 64, n = 520, k = 300;  // 17 column panels, enough work for both threads
  const std::vector<float> a = random_floats(m * k, 4), b = random_floats(n * k, 5);
  std::vector<float> one(m * n), two(m * n);
  set_cpu_threads(1);
  cpu::gemm_bf16(false, true, m, n, k, a.data(), k, b.data(), k, false, one.data(), n);
  set_cpu_threads(2);
  cpu::gemm_bf16(false, true, m, n, k, a.data(), k, b.data(), k, false, two.data(), n);
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
}

TEST_CASE("bf16: under --math bf16 the Linear layer's products round their operands", "[gemm][bf16]") {
  if (!cpu::gemm_bf16_available()) return;
  set_cpu_threads(2);
  const int64_t n = 16, in = 40, out = 24;
  Tensor x = Tensor::from_vector(random_floats(n * in, 6), {n, in});
  Tensor w = Tensor::from_vector(random_floats(out * in, 7), {out, in});
  Tensor strict = linear(x, w, Tensor());
  Tensor rounded;
  {
    Bf16Scope bf16;
    rounded = linear(x, w, Tensor());
  }
  const Expected want = reference(false, true, n, out, in, x.to_vector<float>(), w.to_vector<float>(), {}, false);
  const std::vector<float> got = rounded.to_vector<float>(), fp32 = strict.to_vector<float>();
  double largest_change = 0;
  for (int64_t i = 0; i < n * out; ++i) {
    REQUIRE(std::fabs(double(got[i]) - want.value[i]) <= want.bound[i]);
    largest_change = std::max(largest_change, std::fabs(double(got[i]) - fp32[i]));
  }
  CHECK(largest_change > 1e-4);  // bf16 inputs moved the result: the route was taken
  CHECK(largest_change < 0.1);
}

TEST_CASE("bf16: the command line trains with it, or refuses in one message", "[gemm][bf16][cli]") {
  const CliResult tf32 = run_cli("train --device cpu --math tf32 --max-steps 1");
  CHECK(tf32.exit_code != 0);
  CHECK(tf32.output.find("--math tf32 is a format of NVIDIA's tensor cores") != std::string::npos);
  const CliResult r = run_cli("train --device cpu --model mlp --math bf16 --max-steps 20 --threads 2");
  INFO(r.output);
  if (!cpu::gemm_bf16_available()) {
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("--math bf16 cannot run on this CPU") != std::string::npos);
    return;
  }
  CHECK(r.exit_code == 0);
  const CliResult explain = run_cli("explain --model mlp --device cpu:math=bf16 --threads 2");
  INFO(explain.output);
  CHECK(explain.exit_code == 0);
  CHECK(explain.output.find("gemm_bf16 NT 64×256×784 + bias + relu") != std::string::npos);
  CHECK(explain.output.find("gemm_bf16 TN 256×784×64") != std::string::npos);  // fc1's dW alone: no dx
  nnlab_test::TempDir dir("nnlab_bf16");
  const CliResult sweep = run_cli("sweep --model mlp --math bf16 --devices cpu:threads=1,cpu:threads=2 --batches 8 "
                                  "--steps 2 --warmup 1 --report " + (dir / "s.html"));
  INFO(sweep.output);
  CHECK(sweep.exit_code == 0);
  CHECK(sweep.output.find("bf16") != std::string::npos);
}
