// Pooling ops and layers: forward against the naive reference (op_cases.h's naive_pool2d) on
// large awkward shapes, float32 against the float64 reference, the 2×2 kernel's winners, ties,
// NaN and infinities, PyTorch's geometry rules. Gradient checks on small shapes are cases of
// the op table (test_op_table.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "layers/activation.h"
#include "layers/fuse_epilogues.h"
#include "layers/pool.h"
#include "layers/sequential.h"
#include "op_cases.h"
#include "run_order_support.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::random_tensor;

namespace {

// The seed of every random tensor in this file.
constexpr uint64_t kPoolSeed = 7;

// Distinct values at least 0.01 apart (a shuffled ramp), so no window holds a tie and a
// finite-difference step cannot change which cell wins a max.
Tensor tie_free_tensor(const Shape& shape, uint32_t stream) {
  const int64_t n = shape_numel(shape);
  const std::vector<int32_t> perm = random_permutation(n, RandomStream{7, RandomPurpose::Shuffle, stream});
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.01 * perm[i] - 0.005 * n;
  return Tensor::from_vector(v, shape);
}

struct PoolCase {
  int64_t n, c, h, w, kernel, stride, padding;
};

const PoolCase kCases[] = {
    {8, 13, 17, 23, 3, 2, 1},  // odd sizes, padding, overlapping windows, tails
    {8, 13, 17, 23, 2, 2, 0},  // the zoo's 2×2 pool; the odd last row/column is dropped
    {1, 3, 9, 5, 3, 1, 1},     // batch 1, tall image, stride 1
    {2, 4, 6, 11, 4, 3, 2},    // padding = kernel / 2 exactly, wide image
};

Tensor run_pool(bool max, const Tensor& x, const PoolCase& pc) {
  return max ? max_pool2d(x, pc.kernel, pc.stride, pc.padding) : avg_pool2d(x, pc.kernel, pc.stride, pc.padding);
}

void check_max_rel(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i])));
  CHECK(worst <= tol);
}

}  // namespace

TEST_CASE("max_pool2d and avg_pool2d match the definition in float64 and float32", "[pool2d]") {
  for (bool max : {true, false}) {
    for (const PoolCase& pc : kCases) {
      INFO((max ? "max" : "avg") << " n" << pc.n << " c" << pc.c << " " << pc.h << "x" << pc.w << " k" << pc.kernel
                                 << " s" << pc.stride << " p" << pc.padding);
      const Tensor x = random_tensor({pc.n, pc.c, pc.h, pc.w}, kPoolSeed, 1);
      const std::vector<double> want =
          nnlab_test::naive_pool2d(x.to_vector<double>(), x.shape(), pc.kernel, pc.stride, pc.padding, max);
      const Tensor y = run_pool(max, x, pc);
      const int64_t p = (pc.h + 2 * pc.padding - pc.kernel) / pc.stride + 1;
      const int64_t q = (pc.w + 2 * pc.padding - pc.kernel) / pc.stride + 1;
      CHECK(y.shape() == Shape{pc.n, pc.c, p, q});
      check_max_rel(y.to_vector<double>(), want, 1e-12);
      const Tensor y32 = run_pool(max, x.to(DType::Float32), pc);
      CHECK(y32.dtype() == DType::Float32);
      check_max_rel(y32.to_vector<double>(), want, 1e-4);
    }
  }
}

TEST_CASE("max_pool2d: stride defaults to the kernel, the first maximum wins, padding never wins", "[pool2d]") {
  // One 4×4 plane of all −5: with padding 1 the padded zeros would win if they were read.
  const Tensor neg = Tensor::full({1, 1, 4, 4}, -5.0, DType::Float64);
  const Tensor y = max_pool2d(neg, 2, 2, 1);
  CHECK(y.shape() == Shape{1, 1, 3, 3});
  for (double v : y.to_vector<double>()) CHECK(v == -5.0);

  // Ties: a plane of equal values sends each window's whole gradient to its first cell.
  Tensor x = Tensor::full({1, 1, 4, 4}, 1.0, DType::Float64).set_requires_grad(true);
  Tensor z = max_pool2d(x, 2);
  CHECK(z.shape() == Shape{1, 1, 2, 2});
  sum(z).backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  const std::vector<double> want = {1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0};
  CHECK(g == want);
}

// The 2×2 kernel runs whole vector groups of 8 outputs on all but a plane's last rows (see
// pool2d_cpu.cpp); widths from 2 to 35 give every tail length, the cnn's 28 and 14 included,
// and odd sizes the dropped last row/column. dx must be dy at each window's winner, 0 elsewhere.
TEST_CASE("max_pool2d 2x2: the winner of each window gets dy, every other cell 0, for every row length",
          "[pool2d]") {
  for (int64_t w = 2; w <= 35; ++w) {
    for (DType dtype : {DType::Float64, DType::Float32}) {
      const int64_t n = 2, c = 3, h = w % 3 ? 14 : 7, p = h / 2, q = w / 2;
      INFO("h " << h << " w " << w << (dtype == DType::Float32 ? " float32" : " float64"));
      const Tensor x64 = tie_free_tensor({n, c, h, w}, static_cast<uint32_t>(w));
      Tensor x = x64.to(dtype).set_requires_grad(true);
      Tensor y = max_pool2d(x, 2, 2, 0);
      const Tensor dy = random_tensor(y.shape(), kPoolSeed, 50 + static_cast<uint32_t>(w), dtype);
      y.backward(dy);
      const std::vector<double> xv = x64.to_vector<double>(), yv = y.to_vector<double>();
      const std::vector<double> dyv = dy.to_vector<double>(), dxv = x.grad().to_vector<double>();
      std::vector<double> want_y, want_dx(xv.size(), 0.0);
      for (int64_t plane = 0; plane < n * c; ++plane)
        for (int64_t i = 0; i < p; ++i)
          for (int64_t j = 0; j < q; ++j) {
            int64_t best = (plane * h + 2 * i) * w + 2 * j;
            for (int64_t cell : {best + 1, best + w, best + w + 1})
              if (xv[cell] > xv[best]) best = cell;
            want_y.push_back(xv[best]);
            want_dx[best] = dyv[(plane * p + i) * q + j];
          }
      check_max_rel(yv, want_y, dtype == DType::Float32 ? 1e-6 : 0.0);
      CHECK(dxv == want_dx);
    }
  }
}

TEST_CASE("max_pool2d 2x2 in float32 picks the same winners as float64: ties, NaN and infinities", "[pool2d]") {
  // Float32 may run its own vector kernel (AVX-512), float64 the portable loops: on values
  // that both represent exactly, with many ties, NaNs and infinities, both must choose the
  // same cell of every window (the first maximum; a NaN over any number; the last NaN).
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float palette[] = {0.0f, 1.0f, -1.0f, 2.5f, nan, inf, -inf, 1.0f, 0.0f};
  for (int64_t w : {2, 5, 14, 16, 17, 31, 32, 33, 40, 10, 4}) {
    const int64_t n = 2, c = 3, h = w == 10 || w == 4 ? 10 : 9;  // 10 × 10, 10 × 4: several rows to a vector
    INFO("w " << w);
    std::vector<float> values(n * c * h * w);
    for (size_t i = 0; i < values.size(); ++i) values[i] = palette[(i * 7 + i / 5) % 9];
    Tensor x32 = Tensor::from_vector(values, {n, c, h, w}).set_requires_grad(true);
    Tensor x64 = x32.detach().to(DType::Float64).set_requires_grad(true);
    Tensor y32 = max_pool2d(x32, 2, 2, 0), y64 = max_pool2d(x64, 2, 2, 0);
    const std::vector<double> a = y32.to_vector<double>(), b = y64.to_vector<double>();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK((a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))));
    const Tensor dy = random_tensor(y64.shape(), kPoolSeed, 60 + static_cast<uint32_t>(w), DType::Float32);  // exact in both
    y32.backward(dy);
    y64.backward(dy.to(DType::Float64));
    CHECK(x32.grad().to_vector<double>() == x64.grad().to_vector<double>());
  }
}

TEST_CASE("adaptive_avg_pool2d_1x1 is the mean of each plane", "[pool2d]") {
  const Tensor x = random_tensor({3, 13, 5, 7}, kPoolSeed, 5);
  const Tensor y = adaptive_avg_pool2d_1x1(x);
  REQUIRE(y.shape() == Shape{3, 13, 1, 1});
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (int64_t plane = 0; plane < 3 * 13; ++plane) {
    const double mean = std::accumulate(xv.begin() + plane * 35, xv.begin() + (plane + 1) * 35, 0.0) / 35.0;
    CHECK(yv[plane] == Approx(mean).epsilon(1e-12));
  }
  const Tensor y32 = adaptive_avg_pool2d_1x1(x.to(DType::Float32));
  check_max_rel(y32.to_vector<double>(), yv, 1e-4);

  Tensor xg = random_tensor({2, 3, 4, 5}, kPoolSeed, 6).set_requires_grad(true);
  auto r = gradcheck([](const std::vector<Tensor>& in) { return adaptive_avg_pool2d_1x1(in[0]); }, {xg});
  INFO(r.report);
  CHECK(r.ok);
}

TEST_CASE("pooling rejects bad geometry with a message naming the op", "[pool2d]") {
  const Tensor x = random_tensor({1, 2, 6, 6}, kPoolSeed, 8);
  CHECK_THROWS_WITH(max_pool2d(x, 3, 1, 2), Catch::Contains("max_pool2d") && Catch::Contains("half the kernel"));
  CHECK_THROWS_WITH(avg_pool2d(random_tensor({2, 6, 6}, kPoolSeed, 9), 2), Catch::Contains("(n, c, h, w)"));
  CHECK_THROWS_WITH(max_pool2d(x, 7), Catch::Contains("does not fit"));
  CHECK_THROWS_WITH(avg_pool2d(x, 0), Catch::Contains("avg_pool2d"));
  CHECK_THROWS_AS(MaxPool2d(2, 2, 2), Error);
  CHECK_THROWS_AS(AdaptiveAvgPool2d(2), Error);
}

TEST_CASE("pooling layers wrap the ops", "[pool2d][layers]") {
  const Tensor x = random_tensor({2, 3, 8, 8}, kPoolSeed, 10);
  MaxPool2d mp(2);
  CHECK(mp.describe() == "MaxPool2d(kernel_size=2, stride=2, padding=0)");
  CHECK(mp.forward(x).to_vector<double>() == max_pool2d(x, 2, 2, 0).to_vector<double>());
  AvgPool2d ap(3, 2, 1);
  CHECK(ap.forward(x).shape() == Shape{2, 3, 4, 4});
  CHECK(ap.forward(x).to_vector<double>() == avg_pool2d(x, 3, 2, 1).to_vector<double>());
  AdaptiveAvgPool2d gap;
  CHECK(gap.forward(x).shape() == Shape{2, 3, 1, 1});
  CHECK(mp.parameter_count() == 0);
}

namespace {

// The model run as Sequential runs it (pairs fused) against its layers run one by one, bit
// for bit, forward and backward, on data with many ties (zeros and repeats) and many
// windows whose max is not positive, where tie rules and the ReLU's zero would show.
void check_fused_pairs(Sequential& model, const Shape& shape, DType dtype) {
  INFO("input " << shape[0] << "×" << shape[1] << "×" << shape[2] << "×" << shape[3] << " "
                << (dtype == DType::Float32 ? "float32" : "float64"));
  Tensor x = random_tensor(shape, kPoolSeed, 41, DType::Float64);
  std::vector<double> values = x.to_vector<double>();
  for (size_t i = 0; i < values.size(); i += 3) values[i] = i % 2 ? 0.0 : values[i / 2];  // ties
  Tensor x_fused = Tensor::from_vector(values, shape).to(dtype), x_plain = Tensor::from_vector(values, shape).to(dtype);
  x_fused.set_requires_grad(true), x_plain.set_requires_grad(true);
  Tensor y_fused = model.forward(x_fused);
  Tensor y_plain = x_plain;
  for (const auto& [name, layer] : model.children()) y_plain = layer->forward(y_plain);
  REQUIRE(y_fused.to_vector<double>() == y_plain.to_vector<double>());
  Tensor dy = random_tensor(y_fused.shape(), kPoolSeed, 42, dtype);
  y_fused.backward(dy);
  y_plain.backward(dy);
  CHECK(x_fused.grad().to_vector<double>() == x_plain.grad().to_vector<double>());
}

}  // namespace

TEST_CASE("Sequential fuses a max-pool and the ReLU next to it, with the same outputs and gradients",
          "[pool2d][layers]") {
  // relu(maxpool(x)) = maxpool(relu(x)) exactly, and the same window winner gets dy under the
  // same sign test, so the fused op (max_pool2d_relu) must agree with the layers run one by
  // one, in either order of the pair, on every kernel path: 2×2 over short rows (several rows
  // to a vector), rows of one vector, rows of two, odd planes, and a general 3×3 window.
  Sequential model;
  model.add("relu1", std::make_shared<ReLU>()).add("pool1", std::make_shared<MaxPool2d>(2));
  model.add("pool2", std::make_shared<MaxPool2d>(3, 2, 1)).add("relu2", std::make_shared<ReLU>());
  model.add("relu3", std::make_shared<ReLU>());
  fuse_epilogues(model);
  CHECK(nnlab_test::run_order_names(model) == std::vector<std::string>{"pool1+relu1", "pool2+relu2", "relu3"});
  CHECK(model.run_order()[0].describe() == "MaxPool2d(kernel_size=2, stride=2, padding=0) + ReLU()");
  for (DType dtype : {DType::Float32, DType::Float64}) {
    check_fused_pairs(model, {3, 4, 12, 10}, dtype);
    check_fused_pairs(model, {2, 3, 28, 28}, dtype);
    check_fused_pairs(model, {2, 2, 40, 34}, dtype);
    check_fused_pairs(model, {2, 3, 9, 11}, dtype);
  }
  Sequential single;  // one pair, the pool first: the 2×2 paths alone
  single.add("pool", std::make_shared<MaxPool2d>(2)).add("relu", std::make_shared<ReLU>());
  for (const Shape& shape : {Shape{4, 16, 10, 10}, Shape{2, 5, 28, 28}, Shape{2, 3, 7, 7}, Shape{1, 2, 2, 2}})
    check_fused_pairs(single, shape, DType::Float32);
}
