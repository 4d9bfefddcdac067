// Mixed precision (layers/precision.h): the cast op, bf16 operands on the CPU's float32
// kernels (devices/bf16_widening.h: widened, run, rounded once), and a bf16 model against its
// float32 twin: same weights, float32 masters and gradients, losses within bf16's rounding.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "autograd/ops.h"
#include "core/bfloat16.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/fuse_epilogues.h"
#include "layers/linear.h"
#include "layers/pool.h"
#include "layers/precision.h"
#include "layers/sequential.h"
#include "optim/optimizer.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::random_tensor;
using nnlab_test::require_allclose;

namespace {

// A float32 tensor whose values are bf16 values (so bf16 and float32 hold the same numbers).
Tensor bf16_valued(const Shape& shape, uint32_t stream) {
  return random_tensor(shape, 5, stream, DType::Float32).to(DType::BFloat16).to(DType::Float32);
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Each value rounded to bf16, as a bf16 store rounds it.
std::vector<double> rounded(const Tensor& t) { return values(t.to(DType::BFloat16)); }

// conv (relu + max-pool epilogue), flatten, linear (relu), linear: the zoo's cnn in small,
// fused as the programs run it.
std::shared_ptr<Sequential> small_cnn(bool batchnorm) {
  auto m = std::make_shared<Sequential>();
  m->add("c1", std::make_shared<Conv2d>(2, 4, 3, 1, 1));
  if (batchnorm) m->add("bn1", std::make_shared<BatchNorm2d>(4));
  m->add("relu1", std::make_shared<ReLU>()).add("pool1", std::make_shared<MaxPool2d>(2));
  m->add("flat", std::make_shared<Flatten>());
  m->add("f1", std::make_shared<Linear>(4 * 4 * 4, 16)).add("relu2", std::make_shared<ReLU>());
  m->add("f2", std::make_shared<Linear>(16, 3));
  fuse_epilogues(*m);
  m->initialize(11);
  return m;
}

// Losses of `steps` SGD steps on one fixed batch.
std::vector<double> train_losses(Sequential& model, int steps) {
  const Tensor x = random_tensor({6, 2, 8, 8}, 9, 1, DType::Float32);
  const Tensor labels = Tensor::from_vector<int32_t>({0, 1, 2, 0, 1, 2}, {6});
  SGD sgd(model.parameters(), SgdOptions{0.1, 0.9});
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    sgd.zero_grad();
    Tensor loss = cross_entropy(model.forward(x), labels);
    loss.backward();
    sgd.step();
    losses.push_back(loss.item());
  }
  return losses;
}

}  // namespace

TEST_CASE("cast rounds to bf16 and sends the gradient back in the input's dtype", "[precision]") {
  // 1 + 2⁻⁸ is a tie (to the even 1); 1 + 2⁻⁸ + 2⁻¹⁰ is past it (up to 1 + 2⁻⁷).
  Tensor x = Tensor::from_vector<float>({1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-10f, -3.0f}, {3});
  x.set_requires_grad(true);
  const Tensor y = cast(x, DType::BFloat16);
  CHECK(y.dtype() == DType::BFloat16);
  CHECK(values(y) == std::vector<double>{1.0, 1.0 + 0x1p-7, -3.0});
  CHECK(cast(y, DType::BFloat16).same_storage(y));  // same dtype: the tensor itself, no copy
  const Tensor w = Tensor::from_vector<float>({2.0f, 3.0f, 4.0f}, {3});
  sum(mul(cast(y, DType::Float32), w)).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::Float32);
  CHECK(values(x.grad()) == std::vector<double>{2.0, 3.0, 4.0});
  CHECK_THROWS_WITH(cast(Tensor::zeros({2}, DType::Int32), DType::BFloat16),
                    Catch::Contains("expected a float32, float64 or bfloat16 tensor"));
  CHECK_THROWS_WITH(cast(x, DType::Int32), Catch::Contains("the target dtype must be float32, float64 or bfloat16"));
}

TEST_CASE("the CPU's ops on bf16 compute in float32 and round each output once", "[precision]") {
  const Tensor x = bf16_valued({4, 2, 6, 6}, 1), w = bf16_valued({3, 2, 3, 3}, 2), b = bf16_valued({3}, 3);
  const Tensor xb = x.to(DType::BFloat16), wb = w.to(DType::BFloat16), bb = b.to(DType::BFloat16);
  for (const Epilogue& e : {Epilogue{}, Epilogue::relu(), Epilogue::relu_max_pool(2, 2, 0)}) {
    INFO("epilogue " << e.describe());
    const Tensor y = conv2d(xb, wb, bb, 1, 1, e);
    CHECK(y.dtype() == DType::BFloat16);
    CHECK(values(y) == rounded(conv2d(x, w, b, 1, 1, e)));
  }
  const Tensor a = bf16_valued({5, 7}, 4), lw = bf16_valued({3, 7}, 5), lb = bf16_valued({3}, 6);
  const Tensor ab = a.to(DType::BFloat16), lwb = lw.to(DType::BFloat16), lbb = lb.to(DType::BFloat16);
  CHECK(values(linear(ab, lwb, lbb, Epilogue::relu())) ==
        rounded(linear(a, lw, lb, Epilogue::relu())));
  CHECK(values(relu(ab)) == rounded(relu(a)));
  CHECK(values(add(ab, ab)) == rounded(add(a, a)));
  CHECK(values(max_pool2d(xb, 2)) == rounded(max_pool2d(x, 2)));
}

// A bf16 model's logits go to the loss as they are (Sequential::forward_for_loss): the same
// float32 loss as after their cast to float32, and the same gradient, rounded to bf16 once.
TEST_CASE("cross-entropy on bf16 logits is the float32 loss of their values", "[precision]") {
  Tensor z = random_tensor({6, 10}, 8, 2, DType::Float32).to(DType::BFloat16);
  z.set_requires_grad(true);
  Tensor z32 = z.detach();
  z32.set_requires_grad(true);
  const Tensor labels = Tensor::from_vector<int32_t>({0, 3, 9, 2, 2, 7}, {6});
  const Tensor loss = cross_entropy(z, labels), want = cross_entropy(cast(z32, DType::Float32), labels);
  CHECK(loss.dtype() == DType::Float32);
  CHECK(loss.item() == want.item());
  loss.backward();
  want.backward();
  REQUIRE(z.grad().dtype() == DType::BFloat16);
  CHECK(values(z.grad()) == values(z32.grad()));
  // A model: forward is forward_for_loss cast to float32.
  auto model = small_cnn(false);
  model->set_compute_dtype(DType::BFloat16);
  const Tensor x = random_tensor({2, 2, 8, 8}, 9, 3, DType::Float32);
  const Tensor for_loss = model->forward_for_loss(x);
  CHECK(for_loss.dtype() == DType::BFloat16);
  CHECK(values(model->forward(x)) == values(for_loss));
}

TEST_CASE("a bf16 model keeps float32 masters and trains like its float32 twin", "[precision]") {
  for (const bool batchnorm : {false, true}) {
    INFO((batchnorm ? "with" : "without") << " BatchNorm");
    auto fp32 = small_cnn(batchnorm), bf16 = small_cnn(batchnorm);
    bf16->set_compute_dtype(DType::BFloat16);
    // One forward: float32 logits from a bf16 model, within bf16's rounding of the float32 ones.
    const Tensor x = random_tensor({6, 2, 8, 8}, 9, 1, DType::Float32);
    const Tensor logits = bf16->forward(x);
    CHECK(logits.dtype() == DType::Float32);
    require_allclose(values(logits), values(fp32->forward(x)), 0.05, 0.02, "logits");
    const std::vector<double> want = train_losses(*fp32, 30), got = train_losses(*bf16, 30);
    for (const Tensor& p : bf16->parameters()) {
      CHECK(p.dtype() == DType::Float32);
      REQUIRE(p.grad().defined());
      CHECK(p.grad().dtype() == DType::Float32);
    }
    for (const auto& [name, buffer] : bf16->named_buffers())
      if (name.find("running") != std::string::npos) CHECK(buffer.dtype() == DType::Float32);
    CHECK(got.back() < 0.5 * got.front());  // it learns the batch
    require_allclose(got, want, 0.1, 0.02, "losses, bf16 against float32");
    // Not the float32 run itself: the rounding shows.
    CHECK(got != want);
  }
}

// From its second forward on, a bf16 model casts its weights in one call (WeightCopies, the
// list learned in the first): the same copies as the first forward's casts one by one, so the
// same logits and gradients, bit for bit.
TEST_CASE("a bf16 model's weight copies made in one call equal the casts one by one", "[precision]") {
  auto model = small_cnn(false);
  model->set_compute_dtype(DType::BFloat16);
  const Tensor x = random_tensor({6, 2, 8, 8}, 9, 1, DType::Float32);
  const auto step = [&] {
    for (Tensor p : model->parameters()) p.set_grad(Tensor());
    const Tensor logits = model->forward(x);
    sum(logits).backward();
    std::vector<std::vector<double>> out{values(logits)};
    for (const Tensor& p : model->parameters()) out.push_back(values(p.grad()));
    return out;
  };
  const auto one_by_one = step(), in_one_call = step();
  CHECK(in_one_call == one_by_one);
}

TEST_CASE("each precision names its storage dtype, and others are refused", "[precision]") {
  CHECK(precision_storage_dtype("fp32", "--precision") == DType::Float32);
  CHECK(precision_storage_dtype("tf32", "--precision") == DType::Float32);
  CHECK(precision_storage_dtype("bf16", "--precision") == DType::BFloat16);
  CHECK_THROWS_WITH(precision_storage_dtype("fp16", "--precision"),
                    Catch::Contains("--precision: 'fp16' is not a precision (fp32, tf32 or bf16)"));
  Sequential s;
  CHECK_THROWS_WITH(s.set_compute_dtype(DType::Float64), Catch::Contains("must be float32 or bfloat16"));
}
