// Dropout: the mask rule checked element by element against philox_u32 (the key the CUDA
// twin draws too), reproducibility by seed and stream, keep rate, scaling, gradients, and
// the Dropout layer's keying of streams by layer and step.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/philox.h"
#include "core/random.h"
#include "layers/dropout.h"
#include "layers/sequential.h"

using namespace nnlab;

namespace {

// The mask of a dropout call, read from its output on an all-ones input (y = mask / (1 − p)).
std::vector<int> mask_of(int64_t n, double p, uint64_t seed, uint32_t stream) {
  const Tensor y = dropout(Tensor::full({n}, 1.0), p, seed, stream, true);
  std::vector<int> mask;
  for (float v : y.to_vector<float>()) mask.push_back(v != 0.0f ? 1 : 0);
  return mask;
}

}  // namespace

TEST_CASE("dropout keeps element i iff its Philox draw reaches floor(p * 2^32)", "[dropout]") {
  const double p = 0.3;
  const uint64_t seed = 0x1234567890abcdefULL;
  const uint32_t stream = 77;
  const int64_t n = 1001;  // not a multiple of 4: the last Philox block is partly used
  const uint64_t threshold = static_cast<uint64_t>(std::floor(p * 4294967296.0));
  const std::vector<int> mask = mask_of(n, p, seed, stream);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t draw = philox_u32(seed, static_cast<uint32_t>(RandomPurpose::Dropout), stream, i);
    if (mask[i] != (draw >= threshold ? 1 : 0)) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("dropout masks repeat with the seed and stream and differ otherwise", "[dropout]") {
  const int64_t n = 4096;
  const std::vector<int> a = mask_of(n, 0.5, 42, 3);
  CHECK(mask_of(n, 0.5, 42, 3) == a);
  CHECK(mask_of(n, 0.5, 42, 4) != a);
  CHECK(mask_of(n, 0.5, 43, 3) != a);
  // float64 draws the same mask as float32: the decision is made on integers.
  const Tensor y64 = dropout(Tensor::full({n}, 1.0, DType::Float64), 0.5, 42, 3, true);
  std::vector<int> m64;
  for (double v : y64.to_vector<double>()) m64.push_back(v != 0.0 ? 1 : 0);
  CHECK(m64 == a);
}

TEST_CASE("dropout keeps about 1 - p of a large tensor and scales survivors by 1/(1 - p)", "[dropout]") {
  for (double p : {0.1, 0.25, 0.5, 0.9}) {
    INFO("p = " << p);
    const int64_t n = 1 << 20;
    Tensor x = Tensor::empty({n});
    uniform_fill(x, -2.0, 2.0, RandomStream{5, RandomPurpose::Init, 0});
    const Tensor y = dropout(x, p, 9, 1, true);
    const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    int64_t kept = 0, bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (yv[i] != 0.0f) {
        ++kept;
        if (yv[i] != xv[i] * scale) ++bad;
      }
    }
    CHECK(bad == 0);
    // Binomial(n, 1 − p): five standard deviations are ≤ 0.0025 of n.
    CHECK(std::fabs(static_cast<double>(kept) / n - (1 - p)) < 5 * std::sqrt(p * (1 - p) / n));
  }
}

TEST_CASE("dropout is the identity in evaluation or with p = 0, and rejects p outside 0 <= p < 1", "[dropout]") {
  const Tensor x = Tensor::full({3, 5}, 2.0);
  CHECK(dropout(x, 0.5, 1, 1, false).same_storage(x));
  CHECK(dropout(x, 0.0, 1, 1, true).same_storage(x));
  CHECK_THROWS_WITH(dropout(x, 1.0, 1, 1, true), Catch::Contains("[0, 1)"));
  CHECK_THROWS_WITH(dropout(x, -0.1, 1, 1, true), Catch::Contains("dropout"));
  CHECK_THROWS_AS(Dropout(1.5), Error);
}

TEST_CASE("dropout gradient matches finite differences", "[dropout][gradcheck]") {
  Tensor x = Tensor::empty({4, 37}, DType::Float64);
  uniform_fill(x, -1.0, 1.0, RandomStream{6, RandomPurpose::Init, 0});
  x.set_requires_grad(true);
  auto r = gradcheck([](const std::vector<Tensor>& in) { return dropout(in[0], 0.4, 123, 7, true); }, {x});
  INFO(r.report);
  CHECK(r.ok);
  // and the gradient is exactly the mask scaled: zero where dropped, 1/(1 − p) where kept
  x.set_grad(Tensor());
  sum(dropout(x, 0.4, 123, 7, true)).backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  const std::vector<double> y = dropout(x.detach(), 0.4, 123, 7, true).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == (y[i] != 0 ? 1.0 / 0.6 : 0.0));
}

TEST_CASE("Dropout layer keys streams by layer position and step", "[dropout][layers]") {
  auto d1 = std::make_shared<Dropout>(0.5), d2 = std::make_shared<Dropout>(0.5);
  Sequential model;
  model.add("drop1", d1).add("drop2", d2);
  seed_dropout(model, 2024);
  CHECK(d1->layer_id() == 0);
  CHECK(d2->layer_id() == 1);
  CHECK(d2->seed() == 2024);
  CHECK(Dropout::stream_for(1, 5) == (1u << 24) + 5);

  const Tensor x = Tensor::full({1000}, 1.0);
  const std::vector<float> first = d1->forward(x).to_vector<float>();
  CHECK(d1->step() == 1);
  CHECK(first == dropout(x, 0.5, 2024, Dropout::stream_for(0, 0), true).to_vector<float>());
  CHECK(d1->forward(x).to_vector<float>() != first);  // step 1: a fresh mask
  CHECK(d2->forward(x).to_vector<float>() == dropout(x, 0.5, 2024, Dropout::stream_for(1, 0), true).to_vector<float>());

  // Re-seeding restarts the sequence; evaluation neither masks nor counts.
  seed_dropout(model, 2024);
  CHECK(d1->forward(x).to_vector<float>() == first);
  model.eval();
  CHECK(d1->forward(x).to_vector<float>() == x.to_vector<float>());
  CHECK(d1->step() == 1);
  CHECK(d1->describe() == "Dropout(p=0.5, inplace=False)");
}

// The step count is a tensor the kernel reads (so a CUDA graph can replay it): setting it,
// before or after it exists, continues the masks of that step, and the stream keeps only its
// low 24 bits, as the host formula does.
TEST_CASE("Dropout's step count read where the mask is drawn", "[dropout][layers]") {
  Dropout d(0.5);
  d.set_seed(7, 3);
  const Tensor x = Tensor::full({64}, 1.0);
  d.set_step(41);  // before the first forward: the count starts there
  CHECK(d.forward(x).to_vector<float>() == dropout(x, 0.5, 7, Dropout::stream_for(3, 41), true).to_vector<float>());
  CHECK(d.step() == 42);
  d.set_step(5);  // the count now exists: it is written in place
  CHECK(d.forward(x).to_vector<float>() == dropout(x, 0.5, 7, Dropout::stream_for(3, 5), true).to_vector<float>());
  const uint64_t wrap = (1u << 24) + 2;
  d.set_step(wrap);
  CHECK(d.forward(x).to_vector<float>() == dropout(x, 0.5, 7, Dropout::stream_for(3, wrap), true).to_vector<float>());
  CHECK(Dropout::stream_for(3, wrap) == Dropout::stream_for(3, 2));
  CHECK(d.step() == wrap + 1);
  CHECK_THROWS_WITH(d.set_step(uint64_t(1) << 31), Catch::Contains("step count"));
  const Tensor wrong = Tensor::zeros({2}, DType::Int32);
  CHECK_THROWS_WITH(dropout(x, 0.5, 7, 0, true, &wrong), Catch::Contains("the step count must be one int32"));
}
