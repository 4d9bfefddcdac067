// Uses nnlab as a library: its own model (a Module subclass), synthetic data, a training
// loop written with the public API, and a safetensors checkpoint of the weights.
//
// The task: points x in [-1, 1]² labelled by the quadrant they lie in (4 classes), which a
// linear model cannot fit but a one-hidden-layer MLP learns in a few hundred steps.
//
// Usage: nnlab_example OUT.safetensors   (exit 0 when the loss fell and the file reloads)
#include <cstdio>
#include <memory>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "core/serialization.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "optim/optimizer.h"

namespace {

// Two linear layers with a ReLU between them; the parameter names come from the child names
// ("hidden.weight", "out.bias", ...), as in PyTorch.
class QuadrantNet : public nnlab::Module {
 public:
  QuadrantNet() {
    hidden_ = register_module("hidden", std::make_shared<nnlab::Linear>(2, 32));
    out_ = register_module("out", std::make_shared<nnlab::Linear>(32, 4));
  }
  nnlab::Tensor forward(const nnlab::Tensor& x) override { return out_->forward(nnlab::relu(hidden_->forward(x))); }
  std::string describe() const override { return "QuadrantNet(2 -> 32 -> 4)"; }

 private:
  std::shared_ptr<nnlab::Linear> hidden_, out_;
};

// n points drawn uniformly from [-1, 1]², label = quadrant index 0..3.
void make_data(int64_t n, uint64_t seed, nnlab::Tensor& x, nnlab::Tensor& y) {
  x = nnlab::Tensor::empty({n, 2});
  nnlab::uniform_fill(x, -1.0, 1.0, nnlab::RandomStream{seed, nnlab::RandomPurpose::Init, 1000});
  std::vector<int32_t> labels(static_cast<size_t>(n));
  const float* p = x.data<float>();
  for (int64_t i = 0; i < n; ++i) labels[i] = (p[2 * i] < 0 ? 1 : 0) + (p[2 * i + 1] < 0 ? 2 : 0);
  y = nnlab::Tensor::from_vector(labels, {n});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  try {
    QuadrantNet model;
    model.initialize(42);
    nnlab::Tensor x, y;
    make_data(512, 7, x, y);
    nnlab::SGD sgd(model.parameters(), nnlab::SgdOptions{0.1, 0.9});

    double first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
      sgd.zero_grad();
      nnlab::Tensor loss = nnlab::cross_entropy(model.forward(x), y);
      loss.backward();
      sgd.step();
      if (step == 0) first = loss.item();
      last = loss.item();
    }
    std::printf("loss %.4f -> %.4f after 300 steps\n", first, last);

    nnlab::save_safetensors(argv[1], model.named_parameters(), {{"model", model.describe()}});
    const nnlab::SafetensorsFile file = nnlab::load_safetensors(argv[1]);
    std::printf("saved %zu tensors to %s\n", file.tensors.size(), argv[1]);
    if (!(last < 0.5 * first) || !file.contains("hidden.weight")) {
      std::fprintf(stderr, "the loss did not halve or the checkpoint is incomplete\n");
      return 1;
    }
    return 0;
  } catch (const nnlab::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
