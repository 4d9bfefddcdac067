// Numerical faults: the finiteness checks (raise_if_not_finite, all_finite), the trainer's
// NonFiniteGuard (the first bad step, loss or gradient, and the optimizer's skip), and
// --check-numerics' NumericsCheck, which names the first layer whose output or gradient is
// not finite.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "apps/nonfinite_guard.h"
#include "autograd/ops.h"
#include "devices/cpu/threads.h"
#include "layers/activation.h"
#include "layers/check_numerics.h"
#include "layers/linear.h"
#include "optim/optimizer.h"

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

TEST_CASE("finiteness checks raise the flag for NaN and ±inf only, and keep the first mark", "[numerics]") {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor flag = make_nonfinite_flag(Device::cpu());
  raise_if_not_finite(Tensor::from_vector(std::vector<float>{1, -2, 3e38f}, {3}), flag, {3, 1});
  CHECK(read_nonfinite_flag(flag).step == 0);
  raise_if_not_finite(Tensor::from_vector(std::vector<float>{1, inf}, {2}), flag, {4, 2});
  CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{4, 2});
  // Later checks, finite or not, leave the first fault's mark alone.
  raise_if_not_finite(Tensor::from_vector(std::vector<float>{1, 2}, {2}), flag, {5, 3});
  raise_if_not_finite(Tensor::from_vector(std::vector<float>{std::nanf("")}, {1}), flag, {6, 4});
  const NonFiniteMark first = read_nonfinite_flag(flag);
  CHECK(first.step == 4);
  CHECK(first.source == 2);
  CHECK_FALSE(all_finite(Tensor::from_vector(std::vector<float>{std::nanf(""), 0}, {2})));
  CHECK_FALSE(all_finite(Tensor::from_vector(std::vector<float>{-inf}, {1})));
  CHECK(all_finite(Tensor::zeros({0})));
  Tensor wrong = Tensor::zeros({}, DType::Float32), scalar = Tensor::zeros({}, DType::Int32);
  CHECK_THROWS_WITH(raise_if_not_finite(batch(1), wrong), Catch::Contains("int32 tensor of 2 elements"));
  CHECK_THROWS_WITH(raise_if_not_finite(batch(1), scalar), Catch::Contains("int32 tensor of 2 elements"));
  CHECK_THROWS_WITH(raise_if_not_finite(batch(1), flag, {0, 0}), Catch::Contains("step >= 1"));
}

// The CPU tests the exponent bits (cpu::any_not_finite): every finite extreme passes, every
// NaN (quiet, signalling, negative, any payload) and both infinities do not, in both dtypes,
// wherever they sit in a vector's lanes or its scalar tail.
template <typename T, typename Bits>
void check_bit_patterns() {
  const T finite[] = {T(0), -T(0), std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest(),
                      std::numeric_limits<T>::min(), std::numeric_limits<T>::denorm_min(),
                      -std::numeric_limits<T>::denorm_min()};
  const Bits exponent = sizeof(T) == 4 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
  const Bits sign = Bits(1) << (8 * sizeof(T) - 1);
  const Bits bad_bits[] = {exponent, exponent | sign, exponent | 1, exponent | (exponent >> 1),
                           exponent | sign | 12345, Bits(~Bits(0))};
  const DType dtype = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  for (const int64_t n : {int64_t(1), int64_t(37), int64_t(70001)}) {
    Tensor x = Tensor::zeros({n}, dtype);
    for (int64_t i = 0; i < n; ++i) x.data<T>()[i] = finite[i % 7];
    CHECK(all_finite(x));
    for (const Bits b : bad_bits)
      for (const int64_t at : {int64_t(0), n / 2, n - 1}) {
        INFO("n " << n << ", bits " << std::hex << uint64_t(b) << std::dec << " at " << at);
        Tensor y = x.clone();
        std::memcpy(y.data<T>() + at, &b, sizeof b);
        CHECK_FALSE(all_finite(y));
      }
  }
}

TEST_CASE("the CPU's finiteness scan knows every NaN and infinity by its bits", "[numerics]") {
  for (int threads : {1, 2}) {
    INFO(threads << " thread(s)");
    set_cpu_threads(threads);
    check_bit_patterns<float, uint32_t>();
    check_bit_patterns<double, uint64_t>();
  }
  set_cpu_threads(0);
}

// The list form runs all tensors in one parallel region, each thread over its share of every
// tensor: a fault in the second thread's share of a later tensor must still lose to one in the
// first thread's share of an earlier tensor, and a float64 tensor is checked beside float32.
TEST_CASE("a list's finiteness check marks the first tensor in list order that is not finite", "[numerics]") {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t big = 100000;  // over the parallel grain: both threads take a share
  for (int threads : {1, 2}) {
    INFO(threads << " thread(s)");
    set_cpu_threads(threads);
    std::vector<Tensor> xs = {Tensor::full({big}, 1.0f), Tensor::full({7}, 2.0f, DType::Float64),
                              Tensor::full({big}, 3.0f), Tensor::full({big}, 4.0f)};
    const std::vector<NonFiniteMark> marks = {{9, 1}, {9, 2}, {9, 3}, {9, 4}};
    Tensor flag = make_nonfinite_flag(Device::cpu());
    raise_if_any_not_finite(xs, flag, marks);
    CHECK(read_nonfinite_flag(flag).step == 0);
    xs[3].data<float>()[big - 1] = std::nanf("");  // the last element: the second thread's share
    xs[2].data<float>()[1] = inf;                   // the first thread's share of an earlier tensor
    raise_if_any_not_finite(xs, flag, marks);
    CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{9, 3});
    Tensor second = make_nonfinite_flag(Device::cpu());
    xs[1].data<double>()[6] = -std::numeric_limits<double>::infinity();
    raise_if_any_not_finite({Tensor(), xs[3], xs[1]}, second, {{2, 1}, {2, 2}, {2, 3}});
    CHECK(second.to_vector<int32_t>() == std::vector<int32_t>{2, 2});
    // A raised flag keeps its first mark.
    raise_if_any_not_finite({xs[1]}, second, {{5, 7}});
    CHECK(second.to_vector<int32_t>() == std::vector<int32_t>{2, 2});
    CHECK_THROWS_WITH(raise_if_any_not_finite(xs, flag, {{1, 1}}), Catch::Contains("4 tensors but 1 marks"));
  }
  set_cpu_threads(0);
}

TEST_CASE("the guard names the first bad step's gradient, and the optimizer skips from there", "[numerics]") {
  // fc (4→2) with zero weights: y = x·Wᵀ + b = b whatever x is, so the loss Σy stays finite,
  // but dW = Σ_rows dyᵀ·x = 2·3e38 overflows to +inf when every x is 3e38 (db = 2 stays finite).
  // Both ways the trainer checks: the guard, then the step; or the step checking as it goes.
  for (const bool checked_by_step : {false, true}) {
    INFO((checked_by_step ? "sgd.step_checked" : "guard.check_gradients, then sgd.step"));
    auto model = std::make_shared<Sequential>();
    model->add("fc", std::make_shared<Linear>(4, 2));
    std::vector<std::string> names;
    for (auto& [name, p] : model->named_parameters()) {
      names.push_back(name);
      p.fill_(0);
    }
    REQUIRE(names == std::vector<std::string>{"fc.weight", "fc.bias"});
    NonFiniteGuard guard(Device::cpu(), names, /*steps_per_epoch=*/4, /*epochs=*/3);
    SGD sgd(model->parameters(), SgdOptions{0.5});
    sgd.set_skip_flag(guard.flag());
    const auto train_step = [&](float x, int64_t step) {
      sgd.zero_grad();
      const Tensor loss = sum(model->forward(batch(x)));
      raise_if_not_finite(loss, guard.flag(), guard.loss_mark(step));
      loss.backward();
      if (checked_by_step) {
        sgd.step_checked(guard.gradient_marks(step));
      } else {
        guard.check_gradients(sgd.params(), step);
        sgd.step();
      }
    };
    train_step(0, 5);  // finite: b moves by −0.5·2
    CHECK(guard.fault().empty());
    const std::vector<float> bias_after_5 = model->named_parameters()[1].second.to_vector<float>();
    CHECK(bias_after_5 == std::vector<float>{-1, -1});
    train_step(3e38f, 6);  // dW = inf: raised, and this step's update is skipped
    const std::string first = "the gradient of fc.weight became NaN or infinite at step 6 (epoch 2, step 2 of 4) "
                              "although the loss was finite";
    CHECK(guard.fault() == first);
    train_step(0, 7);  // finite again, but the run is stopped: nothing moves, the first fault stays
    CHECK(guard.fault() == first);
    CHECK(model->named_parameters()[0].second.to_vector<float>() == std::vector<float>(8, 0.0f));
    CHECK(model->named_parameters()[1].second.to_vector<float>() == bias_after_5);
  }

  const std::vector<std::string> names{"fc.weight", "fc.bias"};
  // A non-finite loss is named as the loss; step 9 is step 1 of epoch 3.
  NonFiniteGuard loss_guard(Device::cpu(), names, 4, 3);
  cross_entropy(Tensor::from_vector<float>({NAN, 0}, {1, 2}), Tensor::from_vector<int32_t>({0}, {1}),
                &loss_guard.flag(), loss_guard.loss_mark(9));
  CHECK(loss_guard.fault() == "the loss became NaN or infinite at step 9 (epoch 3, step 1 of 4)");
  // Step numbers must fit the flag's int32.
  CHECK_THROWS_WITH(NonFiniteGuard(Device::cpu(), names, 1000, 3000000),
                    Catch::Contains("--epochs 3000000 × 1000 steps per epoch is more than the 2147483647"));
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
  // A non-finite loss is named as such, with the step when the trainer gave one.
  NumericsCheck check;
  CHECK_THROWS_WITH(check.check_loss(Tensor::full({}, std::numeric_limits<float>::infinity())),
                    Catch::StartsWith("--check-numerics: the loss is NaN or infinite"));
  check.set_step("step 7 (epoch 1, step 7 of 16)");
  CHECK_THROWS_WITH(check.check_loss(Tensor::full({}, std::nanf(""))),
                    Catch::StartsWith("--check-numerics, step 7 (epoch 1, step 7 of 16): the loss is NaN"));
}
