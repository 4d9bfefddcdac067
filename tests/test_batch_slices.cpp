// --batch-slices (apps/batch_slices.h): the batch cut into slices, each run forward and
// backward on one thread, the gradients summed in slice order. The sum is the unsliced step's
// gradient up to the order of its additions, and the same bits on any number of threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "apps/batch_slices.h"
#include "autograd/ops.h"
#include "cli_support.h"
#include "core/random.h"
#include "datasets/dataloader.h"
#include "devices/host_cpu.h"
#include "layers/fuse_epilogues.h"
#include "layers/zoo.h"
#include "model_support.h"

using namespace nnlab;
using nnlab_test::kMnist;

namespace {

constexpr uint64_t kSlicesSeed = 11;

std::shared_ptr<Sequential> fused_model(const std::string& name) {
  std::shared_ptr<Sequential> m = make_model(name, kMnist, kSlicesSeed);
  fuse_epilogues(*m);
  return m;
}

// A batch of n random images and labels.
Batch random_batch(int64_t n) {
  Batch b;
  b.images = Tensor::empty({n, kMnist.channels, kMnist.height, kMnist.width});
  uniform_fill(b.images, 0.0, 1.0, RandomStream{kSlicesSeed, RandomPurpose::Init, 7});
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + 3) % 10);
  b.labels = Tensor::from_vector(labels, {n});
  b.whole = n;
  return b;
}

std::vector<std::vector<float>> gradients_of(Sequential& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.grad().to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("batch slices give the unsliced gradient, the same bits on 1 or 2 threads", "[slices]") {
  const int threads_before = host_cpu::threads();
  // 13 samples in 4 slices (3, 3, 3, 4), and a short batch of 3 samples, fewer than the slices.
  for (const int64_t n : {13, 3}) {
    INFO(n << " samples, 4 slices");
    const Batch batch = random_batch(n);
    std::shared_ptr<Sequential> model = fused_model("lenet5");
    // The unsliced step's loss and gradients.
    for (Tensor& p : model->parameters()) p.set_grad(Tensor());
    const Tensor whole_loss = cross_entropy(model->forward(batch.images), batch.labels);
    whole_loss.backward();
    const std::vector<std::vector<float>> whole = gradients_of(*model);

    BatchSlices slices(4, *model, [] { return fused_model("lenet5"); });
    std::vector<std::vector<std::vector<float>>> sliced;
    for (const int threads : {1, 2}) {
      host_cpu::set_threads(threads);
      for (Tensor& p : model->parameters()) p.set_grad(Tensor());
      Tensor flag = Tensor::zeros({kNonFiniteFlagSize}, DType::Int32);
      const Tensor loss = slices.forward_backward(batch, flag, NonFiniteMark{5, 0});
      CHECK(std::abs(loss.item() - whole_loss.item()) <= 1e-6 * std::abs(whole_loss.item()));
      CHECK(flag.to_vector<int32_t>() == std::vector<int32_t>{0, 0});
      sliced.push_back(gradients_of(*model));
    }
    host_cpu::set_threads(threads_before);
    CHECK(sliced[0] == sliced[1]);  // bit for bit, whatever the thread count
    REQUIRE(sliced[0].size() == whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      double largest = 0, worst = 0;
      for (size_t j = 0; j < whole[i].size(); ++j) {
        largest = std::max(largest, std::abs(double(whole[i][j])));
        worst = std::max(worst, std::abs(double(sliced[0][i][j]) - whole[i][j]));
      }
      INFO("parameter " << i << ": largest gradient " << largest << ", largest difference " << worst);
      CHECK(worst <= 1e-5 * std::max(largest, 1e-3));
    }
  }
}

TEST_CASE("batch slices share the model's weights: an update reaches every slice", "[slices]") {
  std::shared_ptr<Sequential> model = fused_model("mlp");
  BatchSlices slices(2, *model, [] { return fused_model("mlp"); });
  const Batch batch = random_batch(8);
  Tensor flag = Tensor::zeros({kNonFiniteFlagSize}, DType::Int32);
  const double before = slices.forward_backward(batch, flag, {}).item();
  for (Tensor& p : model->parameters()) p.fill_(0.0);  // in place, as an optimizer's step
  // With every weight and bias zero the logits are zero in both slices: the loss is ln 10.
  CHECK(slices.forward_backward(batch, flag, {}).item() == Approx(std::log(10.0)).epsilon(1e-6));
  CHECK(before != Approx(std::log(10.0)).epsilon(1e-6));
}

TEST_CASE("train --batch-slices trains, and refuses what it cannot slice in one message", "[slices][cli]") {
  const nnlab_test::CliResult ok = nnlab_test::run_cli(
      "train --model lenet5 --batch 16 --batch-slices 3 --max-steps 4 --epochs 1 --test-images 64 --threads 2");
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.output, Catch::Contains("final test accuracy"));
  const struct {
    std::string args, message;
  } refused[] = {
      {"--model lenet5 --batch-slices 0", "--batch-slices must be between 1 and 4096, got 0"},
      {"--model lenet5 --batch 8 --batch-slices 9", "--batch-slices 9 is more than the 8 samples of a batch"},
      {"--model cnn-bn --batch-slices 2", "the model cannot be sliced: it has BatchNorm ('bn1')"},
      {"--model lenet5 --batch-slices 2 --check-numerics", "--check-numerics follows one forward pass"},
  };
  for (const auto& r : refused) {
    const nnlab_test::CliResult bad = nnlab_test::run_cli("train --max-steps 1 --epochs 1 " + r.args);
    INFO(r.args << ": " << bad.output);
    CHECK(bad.exit_code != 0);
    CHECK_THAT(bad.output, Catch::Contains(r.message));
  }
}
