// The model zoo: parameter counts and names as in the PyTorch twins (scripts/torch_reference.py,
// scripts/torch_model.py: state_dict order), output shapes, recipes, seeding, and a few steps of
// training on a fixed batch for the models with BatchNorm, Dropout and residual blocks.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "core/random.h"
#include "devices/registry.h"
#include "layers/batchnorm.h"
#include "layers/zoo.h"
#include "model_support.h"
#include "optim/optimizer.h"

using namespace nnlab;
using nnlab_test::kMnist;
using nnlab_test::names_of;

namespace {

Tensor random_images(int64_t n, const InputSpec& in, uint32_t stream) {
  Tensor x = Tensor::empty({n, in.channels, in.height, in.width});
  uniform_fill(x, 0.0, 1.0, RandomStream{3, RandomPurpose::Init, stream});
  return x;
}

const InputSpec kCifar{3, 32, 32, 10};

}  // namespace

TEST_CASE("zoo models have the PyTorch twins' parameter counts and output shapes", "[zoo]") {
  // resnet8 by hand (3×3 convolutions without bias; BatchNorm has γ and β per channel):
  //   conv1 3·16·9 = 432, bn1 32                                               ->    464
  //   layer1 16→16: conv 16·16·9 = 2304 twice, two bn 32                       ->  4,672
  //   layer2 16→32: conv 16·32·9 = 4608, conv 32·32·9 = 9216, 1×1 16·32 = 512,
  //                 three bn 64                                                -> 14,528
  //   layer3 32→64: conv 32·64·9 = 18432, conv 64·64·9 = 36864, 1×1 32·64 = 2048,
  //                 three bn 128                                               -> 57,728
  //   fc 64·10 + 10                                                            ->    650
  //                                                                     total    78,042
  // cnn-bn: cnn's 421,642 + bn1 2·32 + bn2 2·64 = 421,834.
  struct Expect {
    const char* name;
    InputSpec input;
    int64_t params;
  };
  const Expect expected[] = {{"mlp", kMnist, 235146},      {"cnn", kMnist, 421642},      {"lenet5", kMnist, 61706},
                             {"cifar-cnn", kCifar, 2168362}, {"cnn-bn", kMnist, 421834}, {"resnet8", kCifar, 78042}};
  for (const Expect& e : expected) {
    INFO(e.name);
    auto model = make_model(e.name, e.input, 0);
    CHECK(model->parameter_count() == e.params);
    model->eval();
    const Tensor y = model->forward(random_images(3, e.input, 1));
    CHECK(y.shape() == Shape{3, 10});
  }
  CHECK(model_names() == "mlp, cnn, lenet5, cifar-cnn, cnn-bn, resnet8");
}

TEST_CASE("zoo parameter names follow the PyTorch twins", "[zoo]") {
  CHECK(names_of(*make_model("cnn", kMnist, 0)) ==
        std::vector<std::string>{"c1.weight", "c1.bias", "c2.weight", "c2.bias", "f1.weight", "f1.bias", "f2.weight",
                                 "f2.bias"});
  CHECK(names_of(*make_model("lenet5", kMnist, 0)) ==
        std::vector<std::string>{"c1.weight", "c1.bias", "c2.weight", "c2.bias", "f1.weight", "f1.bias", "f2.weight",
                                 "f2.bias", "f3.weight", "f3.bias"});
  CHECK(names_of(*make_model("cifar-cnn", kCifar, 0)) ==
        std::vector<std::string>{"c1.weight", "c1.bias", "c2.weight", "c2.bias", "c3.weight", "c3.bias", "c4.weight",
                                 "c4.bias", "f1.weight", "f1.bias", "f2.weight", "f2.bias"});
  CHECK(names_of(*make_model("cnn-bn", kMnist, 0)) ==
        std::vector<std::string>{"c1.weight", "c1.bias", "bn1.weight", "bn1.bias", "c2.weight", "c2.bias",
                                 "bn2.weight", "bn2.bias", "f1.weight", "f1.bias", "f2.weight", "f2.bias"});
  // resnet8: torchvision's ResNet/BasicBlock names.
  const std::vector<std::string> resnet = names_of(*make_model("resnet8", kCifar, 0));
  REQUIRE(resnet.size() == 29);
  CHECK(std::vector<std::string>(resnet.begin(), resnet.begin() + 9) ==
        std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight",
                                 "layer1.0.bn1.weight", "layer1.0.bn1.bias", "layer1.0.conv2.weight",
                                 "layer1.0.bn2.weight", "layer1.0.bn2.bias"});
  CHECK(std::vector<std::string>(resnet.begin() + 15, resnet.begin() + 18) ==
        std::vector<std::string>{"layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
                                 "layer2.0.downsample.1.bias"});
  CHECK(resnet.back() == "fc.bias");
  const auto buffers = make_model("resnet8", kCifar, 0)->named_buffers();
  CHECK(buffers.front().first == "bn1.running_mean");
  CHECK(buffers.back().first == "layer3.0.downsample.1.num_batches_tracked");
}

TEST_CASE("zoo recipes match torch_bench.py", "[zoo]") {
  CHECK(model_info("cnn").recipe.optimizer == "adam");
  CHECK(model_info("cnn").recipe.lr == 1e-3);
  CHECK(model_info("lenet5").recipe.optimizer == "sgd");
  CHECK(model_info("lenet5").recipe.lr == 0.05);
  CHECK(model_info("lenet5").recipe.momentum == 0.9);
  CHECK(model_info("cifar-cnn").recipe.lr == 0.01);
  CHECK(model_info("cifar-cnn").recipe.data == "cifar10");
  CHECK(model_info("resnet8").recipe.data == "cifar10");
  CHECK(model_info("cnn-bn").recipe.optimizer == "adam");
  CHECK_THROWS_WITH(make_model("cnn", InputSpec{1, 3, 3, 10}, 0), Catch::Contains("too small"));
  CHECK_THROWS_WITH(make_model("lenet5", InputSpec{1, 10, 10, 10}, 0), Catch::Contains("too small"));
}

TEST_CASE("make_model's seed fixes weights and dropout masks", "[zoo]") {
  const Tensor x = random_images(4, kMnist, 2);
  auto a = make_model("cnn-bn", kMnist, 7), b = make_model("cnn-bn", kMnist, 7), c = make_model("cnn-bn", kMnist, 8);
  const std::vector<float> ya = a->forward(x).to_vector<float>();
  CHECK(b->forward(x).to_vector<float>() == ya);
  CHECK(c->forward(x).to_vector<float>() != ya);
  CHECK(a->forward(x).to_vector<float>() != ya);  // the next step draws a fresh dropout mask
}

TEST_CASE("BatchNorm, Dropout and residual models learn a fixed batch", "[zoo][train]") {
  struct Case {
    const char* name;
    InputSpec input;
  };
  for (const Case& cs : {Case{"cnn-bn", InputSpec{1, 12, 12, 4}}, Case{"resnet8", InputSpec{3, 8, 8, 4}}}) {
    INFO(cs.name);
    auto model = make_model(cs.name, cs.input, 1);
    const Tensor x = random_images(12, cs.input, 3);
    std::vector<int32_t> labels(12);
    for (int i = 0; i < 12; ++i) labels[i] = i % 4;
    const Tensor y = Tensor::from_vector(labels, {12});
    SGD opt(model->parameters(), SgdOptions{0.05, 0.9});
    double first = 0, last = 0;
    for (int step = 0; step < 20; ++step) {
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(x), y);
      loss.backward();
      opt.step();
      (step == 0 ? first : last) = loss.item();
    }
    CHECK(last < 0.5 * first);
    // Training moved the running statistics of every BatchNorm away from (0, 1).
    for (const auto& [name, t] : model->named_buffers())
      if (name.size() > 12 && name.substr(name.size() - 12) == "running_mean") CHECK(t.to_vector<float>()[0] != 0.0f);
  }
}

TEST_CASE("no underlying allocation and no growth after the second training step (CPU)", "[zoo][allocator]") {
  // The CPU twin of the GPU test: every tensor of a step (activations, gradients, im2col or
  // Winograd scratch, optimizer state) comes back from the caching allocator's free lists
  // once the first two steps have sized them.
  for (const char* name : {"mlp", "cnn", "cnn-bn"}) {
    INFO(name);
    auto model = make_model(name, kMnist, 5);
    Adam opt(model->parameters(), AdamOptions{});
    std::vector<int32_t> labels(16);
    for (int i = 0; i < 16; ++i) labels[i] = i % 10;
    const Tensor y = Tensor::from_vector(labels, {16});
    auto step = [&](uint32_t s) {
      const Tensor x = random_images(16, kMnist, 10 + s);
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(x), y);
      loss.backward();
      opt.step();
      return loss.item();
    };
    step(0);
    step(1);
    const AllocatorStats after_two = backend_for(Device::cpu()).allocator().stats();
    for (uint32_t s = 2; s < 6; ++s) step(s);
    const AllocatorStats after_six = backend_for(Device::cpu()).allocator().stats();
    CHECK(after_six.underlying_allocs == after_two.underlying_allocs);
    CHECK(after_six.underlying_frees == after_two.underlying_frees);
    CHECK(after_six.current_bytes == after_two.current_bytes);
  }
}
