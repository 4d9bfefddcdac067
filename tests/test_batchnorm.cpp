// BatchNorm: the op against a naive float64 reference (batch statistics, running statistics
// with the unbiased variance), float32 against float64, and the BatchNorm2d layer against PyTorch 1.13
// (tests/fixtures/batchnorm.json, written by tests/fixtures/gen_batchnorm.py). Gradient
// checks in training and evaluation are cases of the op table (test_op_table.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "core/random.h"
#include "devices/registry.h"
#include "layers/batchnorm.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::random_tensor;
using nlohmann::json;

namespace {

// The seed of every random tensor in this file.
constexpr uint64_t kBatchNormSeed = 11;

struct BatchNormReference {
  std::vector<double> y, running_mean, running_var;
};

// The definition, channel by channel, in float64.
BatchNormReference naive_batchnorm(const std::vector<double>& x, const Shape& s, const std::vector<double>& gamma,
                          const std::vector<double>& beta, std::vector<double> rm, std::vector<double> rv,
                          double momentum, double eps) {
  const int64_t n = s[0], c = s[1], inner = s[2] * s[3], m = n * inner;
  BatchNormReference ref{std::vector<double>(x.size()), {}, {}};
  for (int64_t j = 0; j < c; ++j) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < inner; ++k) mean += x[(i * c + j) * inner + k] / m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < inner; ++k) var += std::pow(x[(i * c + j) * inner + k] - mean, 2) / m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t at = (i * c + j) * inner + k;
        ref.y[at] = gamma[j] * (x[at] - mean) / std::sqrt(var + eps) + beta[j];
      }
    rm[j] = (1 - momentum) * rm[j] + momentum * mean;
    rv[j] = (1 - momentum) * rv[j] + momentum * var * m / (m - 1);
  }
  ref.running_mean = rm;
  ref.running_var = rv;
  return ref;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double rel, double abs = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::fabs(got[i] - want[i]) <= abs + rel * std::fabs(want[i]));
  }
}

std::vector<double> doubles(const json& j) { return j.get<std::vector<double>>(); }

}  // namespace

TEST_CASE("batch_norm2d in training matches the definition, float64 and float32", "[batchnorm]") {
  const Shape s{8, 13, 17, 23};
  const Tensor x = random_tensor(s, kBatchNormSeed, 1, DType::Float64, -2.0, 3.0);
  const Tensor gamma = random_tensor({13}, kBatchNormSeed, 2, DType::Float64, 0.5, 1.5), beta = random_tensor({13}, kBatchNormSeed, 3);
  Tensor rm = random_tensor({13}, kBatchNormSeed, 4), rv = random_tensor({13}, kBatchNormSeed, 5, DType::Float64, 0.5, 2.0);
  const BatchNormReference ref = naive_batchnorm(x.to_vector<double>(), s, gamma.to_vector<double>(), beta.to_vector<double>(),
                                        rm.to_vector<double>(), rv.to_vector<double>(), 0.1, 1e-5);
  Tensor rm32 = rm.to(DType::Float32), rv32 = rv.to(DType::Float32);

  const Tensor y = batch_norm2d(x, gamma, beta, rm, rv, true);
  check_close(y.to_vector<double>(), ref.y, 1e-10, 1e-10);
  check_close(rm.to_vector<double>(), ref.running_mean, 1e-12);
  check_close(rv.to_vector<double>(), ref.running_var, 1e-12);

  const Tensor y32 = batch_norm2d(x.to(DType::Float32), gamma.to(DType::Float32), beta.to(DType::Float32), rm32, rv32,
                                  true);
  check_close(y32.to_vector<double>(), ref.y, 1e-4, 1e-5);
  check_close(rm32.to_vector<double>(), ref.running_mean, 1e-4, 1e-6);
  check_close(rv32.to_vector<double>(), ref.running_var, 1e-4, 1e-6);
}

TEST_CASE("batch_norm2d in evaluation uses the running statistics and leaves them alone", "[batchnorm]") {
  const Shape s{1, 3, 4, 7};
  const Tensor x = random_tensor(s, kBatchNormSeed, 6);
  const Tensor gamma = random_tensor({3}, kBatchNormSeed, 7), beta = random_tensor({3}, kBatchNormSeed, 8);
  Tensor rm = random_tensor({3}, kBatchNormSeed, 9), rv = random_tensor({3}, kBatchNormSeed, 10, DType::Float64, 0.5, 2.0);
  const std::vector<double> rm0 = rm.to_vector<double>(), rv0 = rv.to_vector<double>();
  const Tensor y = batch_norm2d(x, gamma, beta, rm, rv, false, 0.1, 1e-3);
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  const std::vector<double> g = gamma.to_vector<double>(), b = beta.to_vector<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t j = (i / 28) % 3;
    CHECK(yv[i] == Approx(g[j] * (xv[i] - rm0[j]) / std::sqrt(rv0[j] + 1e-3) + b[j]).epsilon(1e-12));
  }
  CHECK(rm.to_vector<double>() == rm0);
  CHECK(rv.to_vector<double>() == rv0);
}

TEST_CASE("batch_norm2d refuses what it cannot normalise", "[batchnorm]") {
  Tensor rm = Tensor::zeros({3}, DType::Float64), rv = Tensor::full({3}, 1.0, DType::Float64);
  const Tensor g = Tensor::full({3}, 1.0, DType::Float64), b = Tensor::zeros({3}, DType::Float64);
  CHECK_THROWS_WITH(batch_norm2d(random_tensor({1, 3, 1, 1}, kBatchNormSeed, 16), g, b, rm, rv, true),
                    Catch::Contains("more than one value per channel"));
  CHECK_NOTHROW(batch_norm2d(random_tensor({1, 3, 1, 1}, kBatchNormSeed, 16), g, b, rm, rv, false));
  CHECK_THROWS_WITH(batch_norm2d(random_tensor({2, 4, 3, 3}, kBatchNormSeed, 17), g, b, rm, rv, true),
                    Catch::Contains("4 channels"));
  CHECK_THROWS_WITH(batch_norm2d(random_tensor({2, 3, 3}, kBatchNormSeed, 18), g, b, rm, rv, true), Catch::Contains("(n, c, h, w)"));
  // An empty batch is refused in training and passes through evaluation, never dividing by 0.
  const Tensor empty = Tensor::zeros({0, 3, 4, 4}, DType::Float64);
  CHECK_THROWS_WITH(batch_norm2d(empty, g, b, rm, rv, true), Catch::Contains("more than one value per channel"));
  CHECK(batch_norm2d(empty, g, b, rm, rv, false).numel() == 0);
  Tensor y = Tensor::zeros({0, 3, 4, 4}, DType::Float64), mean = Tensor::zeros({3}, DType::Float64),
         invstd = Tensor::zeros({3}, DType::Float64);
  CHECK_THROWS_WITH(backend_for(Device::cpu()).batchnorm_forward_train(empty, g, b, rm, rv, 0.1, 1e-5, y, mean, invstd),
                    Catch::Contains("more than one value per channel"));
}

TEST_CASE("BatchNorm2d matches PyTorch over two training steps and evaluation", "[batchnorm][layers][pytorch]") {
  std::ifstream in(NNLAB_TEST_DIR "/fixtures/batchnorm.json");
  REQUIRE(in.good());
  const json fx = json::parse(in);
  const Shape shape = fx["shape"].get<Shape>();
  BatchNorm2d bn(BatchNorm2dOptions{shape[1], fx["eps"].get<double>(), fx["momentum"].get<double>()});
  bn.to(DType::Float64);
  bn.weight().copy_(Tensor::from_vector(doubles(fx["gamma"]), {shape[1]}));
  bn.bias().copy_(Tensor::from_vector(doubles(fx["beta"]), {shape[1]}));

  for (const json& step : fx["train_steps"]) {
    bn.weight().set_grad(Tensor());
    bn.bias().set_grad(Tensor());
    Tensor x = Tensor::from_vector(doubles(step["x"]), shape).set_requires_grad(true);
    const Tensor y = bn.forward(x);
    check_close(y.to_vector<double>(), doubles(step["y"]), 1e-9, 1e-12);
    y.backward(Tensor::from_vector(doubles(step["r"]), shape));
    check_close(x.grad().to_vector<double>(), doubles(step["dx"]), 1e-8, 1e-12);
    check_close(bn.weight().grad().to_vector<double>(), doubles(step["dgamma"]), 1e-9, 1e-12);
    check_close(bn.bias().grad().to_vector<double>(), doubles(step["dbeta"]), 1e-9, 1e-12);
    check_close(bn.running_mean().to_vector<double>(), doubles(step["running_mean"]), 1e-12);
    check_close(bn.running_var().to_vector<double>(), doubles(step["running_var"]), 1e-12);
    CHECK(bn.num_batches_tracked().item() == step["num_batches_tracked"].get<double>());
  }
  bn.eval();
  const Tensor y = bn.forward(Tensor::from_vector(doubles(fx["eval"]["x"]), shape));
  check_close(y.to_vector<double>(), doubles(fx["eval"]["y"]), 1e-9, 1e-12);
  CHECK(bn.num_batches_tracked().item() == 2);  // evaluation does not count
}

TEST_CASE("BatchNorm2d has PyTorch's parameter and buffer names and initial values", "[batchnorm][layers]") {
  BatchNorm2d bn(5);
  const auto params = bn.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[1].first == "bias");
  const auto buffers = bn.named_buffers();
  REQUIRE(buffers.size() == 3);
  CHECK(buffers[0].first == "running_mean");
  CHECK(buffers[1].first == "running_var");
  CHECK(buffers[2].first == "num_batches_tracked");
  CHECK(buffers[2].second.dtype() == DType::Int32);
  CHECK(buffers[2].second.ndim() == 0);
  CHECK(bn.weight().to_vector<double>() == std::vector<double>(5, 1.0));
  CHECK(bn.bias().to_vector<double>() == std::vector<double>(5, 0.0));
  CHECK(bn.running_var().to_vector<double>() == std::vector<double>(5, 1.0));
  CHECK(bn.parameter_count() == 10);
  CHECK(bn.describe() == "BatchNorm2d(5, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
}
