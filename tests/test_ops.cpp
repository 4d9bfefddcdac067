// The foundation ops' error messages and edge cases. Their forward passes against naive
// references, gradchecks and float32 runs are cases of the op table (test_op_table.cpp).
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/ops.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"

using namespace nnlab;

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

TEST_CASE("matmul and linear reject operands that do not fit", "[ops]") {
  const Tensor a = Tensor::zeros({5, 7}, DType::Float64), x = Tensor::zeros({6, 7}, DType::Float64);
  CHECK_THROWS_WITH(matmul(a, a), Catch::Contains("matmul: cannot multiply float64[5, 7] on cpu by float64[5, 7]"));
  CHECK_THROWS_WITH(linear(x, Tensor::zeros({7, 3}, DType::Float64), Tensor()), Catch::Contains("does not fit weight"));
}

TEST_CASE("reshape says when it cannot infer an extent", "[ops]") {
  CHECK_THROWS_WITH(reshape(Tensor::zeros({2, 3, 4}, DType::Float64), {5, -1}), Catch::Contains("cannot infer"));
}

TEST_CASE("cross_entropy stays finite on huge logits and names bad labels", "[ops]") {
  Tensor big = Tensor::from_vector<float>({1000, -1000, 0, 3000, 2999, 0}, {2, 3});
  CHECK(std::isfinite(cross_entropy(big, Tensor::from_vector<int32_t>({0, 1}, {2})).item()));
  const Tensor x = Tensor::zeros({4, 5}, DType::Float64);
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

// A convolution's bias gradient sums dy over images and positions per channel: planes with and
// without a tail past the 32-lane blocks (37 and 100 positions, lenet5's second layer's), over
// enough values for both threads to take images; against a float64 sum, and the same bits on 1
// and 2 threads.
TEST_CASE("the CPU's convolution bias gradient matches a float64 sum on any thread count", "[ops][reduce]") {
  Backend& cpu = backend_for(Device::cpu());
  for (int64_t positions : {37, 100, 64}) {
    const int64_t n = 64, c = 6;
    INFO(positions << " positions");
    std::vector<float> values(n * c * positions);
    for (size_t i = 0; i < values.size(); ++i) values[i] = float((i * 37) % 101) / 50.0f - 1.0f;
    const Tensor dy = Tensor::from_vector(values, {n, c, positions});
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2}) {
      set_cpu_threads(threads);
      Tensor db = Tensor::empty({c});
      cpu.bias_backward(dy, db, positions);
      results.push_back(db.to_vector<float>());
    }
    set_cpu_threads(0);
    CHECK(results[0] == results[1]);
    for (int64_t j = 0; j < c; ++j) {
      double want = 0;
      for (int64_t o = 0; o < n; ++o)
        for (int64_t i = 0; i < positions; ++i) want += values[(o * c + j) * positions + i];
      CHECK(results[0][j] == Approx(want).epsilon(1e-5).margin(1e-3));
    }
  }
}
