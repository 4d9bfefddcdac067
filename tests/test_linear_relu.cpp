// A Linear layer and the ReLU after it, fused (linear_relu, LinearReLU): Sequential's pairing,
// and the fused op against the two ops one by one, bit for bit, forward and backward; the
// fused ReLU-and-bias gradient kernel against its two kernels on convolution planes.
#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/pool.h"
#include "layers/sequential.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::random_tensor;

namespace {

constexpr uint64_t kSeed = 77;

std::vector<std::string> run_order_names(const Sequential& model) {
  std::vector<std::string> names;
  for (const auto& [name, layer] : model.run_order()) names.push_back(name);
  return names;
}

// One model's parameters' gradients, in registration order, as doubles.
std::vector<std::vector<double>> gradients_of(const Module& model) {
  std::vector<std::vector<double>> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<double>());
  return grads;
}

void drop_gradients(Module& model) {
  for (Tensor p : model.parameters()) p.set_grad(Tensor());
}

}  // namespace

TEST_CASE("Sequential runs a Linear and the ReLU after it as one LinearReLU", "[linear][layers]") {
  Sequential mlp;
  mlp.add("fc1", std::make_shared<Linear>(12, 8)).add("relu1", std::make_shared<ReLU>());
  mlp.add("fc2", std::make_shared<Linear>(8, 6)).add("relu2", std::make_shared<ReLU>());
  mlp.add("fc3", std::make_shared<Linear>(6, 3));
  CHECK(run_order_names(mlp) == std::vector<std::string>{"fc1+relu1", "fc2+relu2", "fc3"});
  CHECK(mlp.run_order()[0].second->describe() == "Linear(in_features=12, out_features=8, bias=true) + ReLU()");
  CHECK(mlp.parameters().size() == 6);  // the fused modules own nothing

  // A ReLU with a max-pool after it goes to the pool (pooled, it is a quarter the size); a ReLU
  // after anything else stays a ReLU.
  Sequential mixed;
  mixed.add("fc", std::make_shared<Linear>(4, 4)).add("relu1", std::make_shared<ReLU>());
  mixed.add("pool", std::make_shared<MaxPool2d>(2)).add("relu2", std::make_shared<ReLU>());
  CHECK(run_order_names(mixed) == std::vector<std::string>{"fc", "pool+relu1", "relu2"});
}

TEST_CASE("linear_relu equals linear then relu bit for bit, forward and backward", "[linear][ops]") {
  struct Case {
    int64_t n, in, out;
    bool bias;
  };
  // The mlp's first layer (AVX-512's dot-product route), an odd small one, one without a bias.
  const std::vector<Case> cases = {{64, 784, 256, true}, {5, 7, 9, true}, {6, 33, 17, false}};
  for (const Case& c : cases)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (int threads : {1, 2}) {
        INFO(c.n << "×" << c.in << " → " << c.out << (c.bias ? " bias " : " no bias ")
                 << (dtype == DType::Float32 ? "float32" : "float64") << ", " << threads << " threads");
        set_cpu_threads(threads);
        Linear layer(LinearOptions{c.in, c.out, c.bias});
        layer.initialize(kSeed);
        layer.to(dtype);
        Sequential fused;
        fused.add("fc", std::shared_ptr<Linear>(&layer, [](Linear*) {})).add("relu", std::make_shared<ReLU>());
        REQUIRE(run_order_names(fused) == std::vector<std::string>{"fc+relu"});

        Tensor x = random_tensor({c.n, c.in}, kSeed, 1, dtype);
        x.set_requires_grad(true);
        const Tensor dy = random_tensor({c.n, c.out}, kSeed, 2, dtype);

        Tensor y_fused = fused.forward(x);
        y_fused.backward(dy);
        const std::vector<double> dx_fused = x.grad().to_vector<double>();
        const auto param_grads_fused = gradients_of(layer);

        x.set_grad(Tensor());
        drop_gradients(layer);
        Tensor y_plain = relu(layer.forward(x));
        y_plain.backward(dy);

        const std::vector<double> y_values = y_fused.to_vector<double>();
        CHECK(y_values == y_plain.to_vector<double>());
        CHECK(dx_fused == x.grad().to_vector<double>());
        CHECK(param_grads_fused == gradients_of(layer));
        size_t zeros = 0;  // the ReLU did cut: some outputs are 0, some not
        for (double v : y_values) zeros += v == 0.0;
        CHECK(zeros > 0);
        CHECK(zeros < y_values.size());
      }
  set_cpu_threads(0);
}

TEST_CASE("linear_relu gives a NaN sum 0, as relu does, and no gradient through it", "[linear][ops]") {
  const Tensor w = Tensor::from_vector(std::vector<float>{1, 1, 1, -1}, {2, 2});
  const Tensor b = Tensor::from_vector(std::vector<float>{0, 0}, {2});
  Tensor x = Tensor::from_vector(std::vector<float>{std::numeric_limits<float>::quiet_NaN(), 1, 2, 1}, {2, 2});
  x.set_requires_grad(true);
  Tensor y = linear_relu(x, w, b);
  CHECK(y.to_vector<float>() == std::vector<float>{0, 0, 3, 1});
  y.backward(Tensor::full({2, 2}, 1.0));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0, 0, 2, 0});
}

TEST_CASE("the CPU's fused ReLU and bias gradient equals its two kernels on any thread count", "[linear][reduce]") {
  // Convolution planes (inner > 1: lanes and tails, 14 × 14 = 196 = 6 · 32 + 4) and Linear rows.
  Backend& cpu = backend_for(Device::cpu());
  for (const Shape& shape : {Shape{4, 8, 14, 14}, Shape{64, 32, 4, 4}, Shape{64, 256}})
    for (DType dtype : {DType::Float32, DType::Float64})
      for (int threads : {1, 2}) {
        INFO(shape.size() << "-d input, " << (dtype == DType::Float32 ? "float32" : "float64") << ", " << threads
                          << " threads");
        set_cpu_threads(threads);
        const int64_t c = shape[1], inner = shape.size() == 4 ? shape[2] * shape[3] : 1;
        const Tensor y = relu(random_tensor(shape, kSeed, 3, dtype));
        const Tensor dy = random_tensor(shape, kSeed, 4, dtype);
        Tensor dz = Tensor::empty(shape, dtype), db = Tensor::empty({c}, dtype);
        cpu.relu_bias_backward(y, dy, dz, db, inner);
        Tensor dz_plain = Tensor::empty(shape, dtype), db_plain = Tensor::empty({c}, dtype);
        cpu.unary_backward(UnaryOp::Relu, y, y, dy, dz_plain);
        cpu.bias_backward(dz_plain, db_plain, inner);
        CHECK(dz.to_vector<double>() == dz_plain.to_vector<double>());
        CHECK(db.to_vector<double>() == db_plain.to_vector<double>());
      }
  set_cpu_threads(0);
}
