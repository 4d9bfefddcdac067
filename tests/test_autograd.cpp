// The backward engine: ordering, accumulation, shared subexpressions, no-grad, errors.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"

using namespace nnlab;

namespace {
Tensor leaf(std::vector<double> v, Shape s) {
  Tensor t = Tensor::from_vector(v, s);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST_CASE("a shared subexpression receives the sum of its gradients", "[autograd]") {
  // y = sum(a·b + a·a)  ->  dy/da = b + 2a,  dy/db = a
  Tensor a = leaf({1, 2, 3}, {3});
  Tensor b = leaf({4, 5, 6}, {3});
  Tensor y = sum(a * b + a * a);
  CHECK(y.item() == Approx(4 + 10 + 18 + 1 + 4 + 9));
  y.backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{6, 9, 12});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 2, 3});
}

TEST_CASE("gradients accumulate across backward calls until zeroed", "[autograd]") {
  Tensor a = leaf({1, 2}, {2});
  sum(a * a).backward();
  sum(a * a).backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{4, 8});
}

TEST_CASE("one tensor used twice in one op (x + x)", "[autograd]") {
  Tensor a = leaf({1, 2}, {2});
  sum(a + a).backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{2, 2});
}

TEST_CASE("no-grad mode builds no graph", "[autograd]") {
  Tensor a = leaf({1, 2}, {2});
  Tensor y;
  {
    NoGradGuard guard;
    y = sum(a * a);
  }
  CHECK_FALSE(y.requires_grad());
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("does not require a gradient"));
  CHECK(GradMode::enabled());
}

TEST_CASE("backward through a non-scalar needs a seed", "[autograd]") {
  Tensor a = leaf({1, 2}, {2});
  Tensor y = a * a;
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("not a scalar") && Catch::Contains("seed"));
  y.backward(Tensor::from_vector<double>({1, 10}, {2}));
  CHECK(a.grad().to_vector<double>() == std::vector<double>{2, 40});
}

TEST_CASE("the graph is freed after backward", "[autograd]") {
  Tensor a = leaf({1, 2}, {2});
  Tensor y = sum(relu(a * a));
  y.backward();
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("already used"));
}

TEST_CASE("a deep chain does not overflow the stack", "[autograd]") {
  Tensor a = leaf({0.5}, {1});
  Tensor h = a;
  Tensor one = Tensor::from_vector<double>({1.0}, {1});
  for (int i = 0; i < 20000; ++i) h = h * one;
  sum(h).backward();
  CHECK(a.grad().to_vector<double>()[0] == 1.0);
}

TEST_CASE("nodes are named after their op, and an absent bias is an undefined input", "[autograd]") {
  Tensor x = leaf({-1, 2, -3, 4}, {1, 1, 2, 2});
  CHECK(relu(x).grad_fn()->name() == "ReluBackward");
  CHECK(sigmoid(x).grad_fn()->name() == "SigmoidBackward");
  CHECK(tanh(x).grad_fn()->name() == "TanhBackward");
  // autograd/node.h: an optional input that is absent stays in inputs() as an undefined
  // Tensor, so input i is the same operand however the layer was built.
  Tensor w = leaf({0.5}, {1, 1, 1, 1}), w2 = leaf({1, 2, 3, 4}, {1, 4});
  for (const Tensor& y : {conv2d(x, w, Tensor(), 1, 1, 0, 0), linear(reshape(x, {1, 4}), w2, Tensor())}) {
    const auto& inputs = y.grad_fn()->inputs();
    INFO(y.grad_fn()->name());
    REQUIRE(inputs.size() == 3);
    CHECK_FALSE(inputs[2].defined());
  }
  Tensor y = conv2d(x, w, Tensor(), 1, 1, 0, 0);
  y.backward(Tensor::full({1, 1, 2, 2}, 1.0, DType::Float64));
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2.0});  // Σ x
}

// A cast into a leaf (a bf16 weight copy's) waits for the end of the walk and runs with the
// others in one call (autograd/engine.h); each still reports its node and its gradient, and
// its leaf receives the gradient in the leaf's dtype. A cast inside the graph runs in place.
TEST_CASE("the casts into leaves run after the walk, each reported with its gradient", "[autograd]") {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor b = Tensor::from_vector(std::vector<float>{4, 5, 6}, {3});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  std::vector<std::pair<std::string, const Tensor*>> seen;  // node name, its leaf input (or null)
  set_backward_hook([&](const Node& node, const std::vector<Tensor>& grads) {
    REQUIRE(grads.size() == node.inputs().size());
    const Tensor& input = node.inputs()[0];
    seen.emplace_back(node.name(), input.raw_data() == a.raw_data()   ? &a
                                   : input.raw_data() == b.raw_data() ? &b
                                                                      : nullptr);
    if (node.only_casts()) CHECK(grads[0].dtype() == input.dtype());
  });
  // y = sum(float32(relu(bf16(b))·bf16(a)))   ->   dy/da = b, dy/db = a (b > 0; the values are
  // bf16's). Walked in order, bf16(a)'s cast would come before the relu.
  Tensor y = sum(cast(mul(relu(cast(b, DType::BFloat16)), cast(a, DType::BFloat16)), DType::Float32));
  y.backward();
  set_backward_hook(nullptr);
  REQUIRE(seen.size() == 6);
  CHECK(seen[0].first == "SumBackward");
  CHECK(seen[1].first == "CastBackward");  // the product's cast back to float32: inside the graph
  CHECK(seen[1].second == nullptr);
  CHECK(seen[2].first == "MulBackward");
  CHECK(seen[3].first == "ReluBackward");
  CHECK(seen[4].first == "CastBackward");
  CHECK(seen[5].first == "CastBackward");
  CHECK(seen[4].second != seen[5].second);
  CHECK(seen[4].second != nullptr);
  CHECK(seen[5].second != nullptr);
  REQUIRE(a.grad().dtype() == DType::Float32);
  CHECK(a.grad().to_vector<double>() == std::vector<double>{4, 5, 6});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 2, 3});
}
