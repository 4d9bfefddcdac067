// Every foundation op: forward against a naive reference, backward by gradcheck in float64,
// and the float32 path against the float64 one.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "devices/registry.h"

using namespace nnlab;

namespace {
Tensor random_tensor(Shape s, uint32_t stream, DType t = DType::Float64, bool grad = true, double lo = -1,
                     double hi = 1) {
  Tensor x = Tensor::empty(s, t);
  uniform_fill(x, lo, hi, RandomStream{2024, RandomPurpose::Init, stream});
  if (grad) x.set_requires_grad(true);
  return x;
}

void require_gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs) {
  const GradcheckResult r = gradcheck(f, inputs);
  INFO(r.report);
  REQUIRE(r.ok);
}

// The same op in float32 and float64 agrees to float32 rounding.
void check_f32_matches_f64(const GradcheckFn& f, const std::vector<Tensor>& inputs64) {
  std::vector<Tensor> inputs32;
  for (const Tensor& t : inputs64) inputs32.push_back(t.dtype() == DType::Float64 ? t.to(DType::Float32) : t);
  const auto y64 = f(inputs64).to_vector<double>();
  const auto y32 = f(inputs32).to_vector<double>();
  for (size_t i = 0; i < y64.size(); ++i) REQUIRE(y32[i] == Approx(y64[i]).epsilon(1e-4).margin(1e-5));
}
}  // namespace

TEST_CASE("add/sub/mul/div forward with row and scalar broadcasting", "[ops]") {
  Tensor a = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = Tensor::from_vector<double>({10, 20, 30}, {3});
  Tensor s = Tensor::from_vector<double>({2}, {});
  CHECK((a + row).to_vector<double>() == std::vector<double>{11, 22, 33, 14, 25, 36});
  CHECK((row - a).to_vector<double>() == std::vector<double>{9, 18, 27, 6, 15, 24});
  CHECK((a * s).to_vector<double>() == std::vector<double>{2, 4, 6, 8, 10, 12});
  CHECK((a / row).to_vector<double>()[4] == Approx(0.25));
  CHECK_THROWS_WITH(a + Tensor::zeros({2}, DType::Float64),
                    Catch::Contains("add: shapes [2, 3] and [2] do not broadcast"));
  CHECK_THROWS_WITH(a + Tensor::zeros({3}), Catch::Contains("dtypes differ"));
}

TEST_CASE("binary ops pass gradcheck, broadcast operands included", "[ops][gradcheck]") {
  for (auto op : {add, sub, mul, div}) {
    Tensor a = random_tensor({4, 5}, 1);
    Tensor b = random_tensor({4, 5}, 2, DType::Float64, true, 0.5, 2.0);  // away from 0 for div
    Tensor row = random_tensor({5}, 3, DType::Float64, true, 0.5, 2.0);
    require_gradcheck([op](const std::vector<Tensor>& in) { return op(in[0], in[1]); }, {a, b});
    require_gradcheck([op](const std::vector<Tensor>& in) { return op(in[0], in[1]); }, {a, row});
    require_gradcheck([op](const std::vector<Tensor>& in) { return op(in[0], in[1]); }, {row, a});
    check_f32_matches_f64([op](const std::vector<Tensor>& in) { return op(in[0], in[1]); }, {a, row});
  }
}

TEST_CASE("activations match their formulas and pass gradcheck", "[ops][gradcheck]") {
  Tensor x = random_tensor({3, 7}, 4, DType::Float64, true, -3, 3);
  const auto xv = x.to_vector<double>();
  const auto r = relu(x).to_vector<double>(), s = sigmoid(x).to_vector<double>(), t = nnlab::tanh(x).to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    CHECK(r[i] == std::max(0.0, xv[i]));
    CHECK(s[i] == Approx(1 / (1 + std::exp(-xv[i]))));
    CHECK(t[i] == Approx(std::tanh(xv[i])));
  }
  for (auto f : {relu, sigmoid, nnlab::tanh}) {
    require_gradcheck([f](const std::vector<Tensor>& in) { return f(in[0]); }, {x});
    check_f32_matches_f64([f](const std::vector<Tensor>& in) { return f(in[0]); }, {x});
  }
}

TEST_CASE("matmul and linear match a naive product and pass gradcheck", "[ops][gradcheck]") {
  Tensor a = random_tensor({5, 7}, 5), b = random_tensor({7, 3}, 6);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>(), y = matmul(a, b).to_vector<double>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int k = 0; k < 7; ++k) s += av[i * 7 + k] * bv[k * 3 + j];
      CHECK(y[i * 3 + j] == Approx(s));
    }
  require_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b});
  Tensor x = random_tensor({6, 7}, 7), w = random_tensor({4, 7}, 8), bias = random_tensor({4}, 9);
  require_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, bias});
  require_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], Tensor()); }, {x, w});
  check_f32_matches_f64([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, bias});
  CHECK_THROWS_WITH(matmul(a, a), Catch::Contains("matmul: cannot multiply float64[5, 7] on cpu by float64[5, 7]"));
  CHECK_THROWS_WITH(linear(x, b, Tensor()), Catch::Contains("does not fit weight"));
}

TEST_CASE("sum, mean, reshape and flatten", "[ops][gradcheck]") {
  Tensor x = random_tensor({2, 3, 4}, 10);
  const auto v = x.to_vector<double>();
  double s = 0;
  for (double e : v) s += e;
  CHECK(sum(x).item() == Approx(s));
  CHECK(mean(x).item() == Approx(s / 24));
  CHECK(flatten(x).shape() == Shape{2, 12});
  CHECK(reshape(x, {-1, 6}).shape() == Shape{4, 6});
  CHECK_THROWS_WITH(reshape(x, {5, -1}), Catch::Contains("cannot infer"));
  require_gradcheck([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return relu(flatten(in[0])); }, {x});
  require_gradcheck([](const std::vector<Tensor>& in) { return reshape(in[0], {4, 6}); }, {x});
}

TEST_CASE("log_softmax and cross_entropy are stable and pass gradcheck", "[ops][gradcheck]") {
  Tensor x = random_tensor({4, 5}, 11, DType::Float64, true, -5, 5);
  Tensor labels = Tensor::from_vector<int32_t>({0, 4, 2, 2}, {4});
  const auto xv = x.to_vector<double>(), ls = log_softmax(x).to_vector<double>();
  double ce = 0;
  for (int i = 0; i < 4; ++i) {
    double z = 0;
    for (int j = 0; j < 5; ++j) z += std::exp(xv[i * 5 + j]);
    for (int j = 0; j < 5; ++j) CHECK(ls[i * 5 + j] == Approx(xv[i * 5 + j] - std::log(z)));
    ce -= ls[i * 5 + labels.to_vector<int32_t>()[i]] / 4;
  }
  CHECK(cross_entropy(x, labels).item() == Approx(ce));
  require_gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0]); }, {x});
  require_gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], labels); }, {x});
  check_f32_matches_f64([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], labels); }, {x});
  // Huge logits: no overflow, loss finite.
  Tensor big = Tensor::from_vector<float>({1000, -1000, 0, 3000, 2999, 0}, {2, 3});
  CHECK(std::isfinite(cross_entropy(big, Tensor::from_vector<int32_t>({0, 1}, {2})).item()));
  CHECK_THROWS_WITH(cross_entropy(x, Tensor::from_vector<int32_t>({0, 9, 1, 1}, {4})),
                    Catch::Contains("label 9 of sample 1 is outside"));
  CHECK_THROWS_WITH(cross_entropy(x, Tensor::from_vector<int32_t>({0, 1}, {2})), Catch::Contains("do not match"));
}

TEST_CASE("the non-finite flag is raised by a NaN loss with the step's mark, once", "[ops]") {
  const Tensor labels = Tensor::from_vector<int32_t>({0, 1}, {2});
  Tensor flag = make_nonfinite_flag(Device::cpu());
  cross_entropy(Tensor::from_vector<float>({0, 1, 2, 3}, {2, 2}), labels, &flag, {6, 0});
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{0, 0});  // a finite loss leaves it alone
  Tensor x = Tensor::from_vector<float>({NAN, 1, 2, 3}, {2, 2});
  cross_entropy(x, labels, &flag, {7, 0});
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{7, 0});
  cross_entropy(x, labels, &flag, {8, 5});  // a later fault does not move the first one
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{7, 0});
}

TEST_CASE("the CPU's full sums write their output in its own dtype", "[ops][reduce]") {
  // Found by the GPU tests on the CUDA simulator: sum_all of float32 into a float64 scalar
  // wrote a float into the double's first four bytes.
  const Tensor x = Tensor::from_vector(std::vector<float>{1.5f, 2.0f, -0.25f}, {3});
  Backend& cpu = backend_for(Device::cpu());
  for (DType out_type : {DType::Float32, DType::Float64}) {
    Tensor s = Tensor::full({}, 99.0, out_type);
    cpu.sum_all(x, 0.5, s);
    CHECK(s.to_vector<double>()[0] == 1.625);
    cpu.sum_squares(x, s);
    CHECK(s.to_vector<double>()[0] == 6.3125);
  }
}
