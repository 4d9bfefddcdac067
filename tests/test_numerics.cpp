// Numerical faults: the finiteness checks (raise_if_not_finite, all_finite) and
// --check-numerics' NumericsCheck, which names the first layer whose output or gradient is
// not finite.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>

#include "autograd/ops.h"
#include "layers/activation.h"
#include "layers/check_numerics.h"
#include "layers/linear.h"

using namespace nnlab;

namespace {

// fc1 (4→3) → relu → fc2 (3→2), all weights w and biases b per layer.
std::shared_ptr<Sequential> small_mlp(float w1, float b1, float w2, float b2) {
  auto m = std::make_shared<Sequential>();
  m->add("fc1", std::make_shared<Linear>(4, 3)).add("relu", std::make_shared<ReLU>());
  m->add("fc2", std::make_shared<Linear>(3, 2));
  for (auto& [name, p] : m->named_parameters()) {
    const float v = name == "fc1.weight" ? w1 : name == "fc1.bias" ? b1 : name == "fc2.weight" ? w2 : b2;
    float* d = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) d[i] = v;
  }
  return m;
}

Tensor batch(float v) { return Tensor::full({2, 4}, v); }

}  // namespace

TEST_CASE("finiteness checks raise the flag for NaN and ±inf only, and never clear it", "[numerics]") {
  Tensor flag = Tensor::zeros({}, DType::Int32);
  raise_if_not_finite(Tensor::from_vector(std::vector<float>{1, -2, 3e38f}, {3}), flag);
  CHECK(flag.item() == 0);
  raise_if_not_finite(Tensor::from_vector(std::vector<float>{1, std::numeric_limits<float>::infinity()}, {2}), flag);
  CHECK(flag.item() == 1);
  raise_if_not_finite(Tensor::from_vector(std::vector<float>{1, 2}, {2}), flag);
  CHECK(flag.item() == 1);
  CHECK_FALSE(all_finite(Tensor::from_vector(std::vector<float>{std::nanf(""), 0}, {2})));
  CHECK_FALSE(all_finite(Tensor::from_vector(std::vector<float>{-std::numeric_limits<float>::infinity()}, {1})));
  CHECK(all_finite(Tensor::zeros({0})));
  Tensor wrong = Tensor::zeros({}, DType::Float32);
  CHECK_THROWS_WITH(raise_if_not_finite(batch(1), wrong), Catch::Contains("int32 scalar"));
}

TEST_CASE("check-numerics names the first layer whose output is not finite", "[numerics]") {
  NumericsCheck check;
  // Finite everywhere: the same result as the model's own forward.
  auto ok = small_mlp(0.5f, 0.1f, -0.25f, 0.2f);
  CHECK(check.forward(*ok, batch(1)).to_vector<float>() == ok->forward(batch(1)).to_vector<float>());
  // fc1 = 4·1e38 overflows to +inf; relu and fc2 would follow, but fc1 is named.
  auto bad1 = small_mlp(1e38f, 0, 1, 0);
  CHECK_THROWS_WITH(check.forward(*bad1, batch(1)), Catch::Contains("output of layer 'fc1'") &&
                                                         Catch::Contains("Linear") && Catch::Contains("lower --lr"));
  // fc1 finite (4·1e37), fc2 = 3·1e37·10 overflows.
  auto bad2 = small_mlp(1e37f, 0, 10, 0);
  CHECK_THROWS_WITH(check.forward(*bad2, batch(1)), Catch::Contains("output of layer 'fc2'"));
  // A NaN in the data is the data's fault, not a layer's.
  CHECK_THROWS_WITH(check.forward(*ok, batch(std::nanf(""))), Catch::Contains("the input batch"));
}

TEST_CASE("check-numerics names the first layer whose gradient is not finite", "[numerics]") {
  // relu(fc1) is all zeros (bias −1000), so fc2's output is its bias (finite); the loss
  // sum(1e30·y) is finite too, but fc2's input gradient 1e30·1e10 overflows.
  auto m = small_mlp(0, -1000, 1e10f, 0.5f);
  {
    NumericsCheck check;
    const Tensor y = check.forward(*m, batch(1));
    const Tensor loss = sum(mul(y, Tensor::full({}, 1e30f)));
    check.check_loss(loss);
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("backward pass of layer 'fc2'") &&
                                           Catch::Contains("NaN or infinite gradients"));
  }
  // The checker removes its hook: without it the same backward pass runs to the end.
  const Tensor loss = sum(mul(m->forward(batch(1)), Tensor::full({}, 1e30f)));
  CHECK_NOTHROW(loss.backward());
  // A non-finite loss is named as such.
  NumericsCheck check;
  CHECK_THROWS_WITH(check.check_loss(Tensor::full({}, std::numeric_limits<float>::infinity())),
                    Catch::Contains("the loss is NaN or infinite"));
}
