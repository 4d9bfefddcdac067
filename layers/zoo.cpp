#include "layers/zoo.h"

#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/pool.h"
#include "layers/residual.h"

namespace nnlab {

namespace {

template <typename M, typename... Args>
std::shared_ptr<Module> make(Args&&... args) {
  return std::make_shared<M>(std::forward<Args>(args)...);
}

// mlp: flatten, 784-256-128-10 with ReLU (torch_bench.py MLP: fc1, fc2, fc3).
std::shared_ptr<Sequential> build_mlp(const InputSpec& in) {
  auto m = std::make_shared<Sequential>();
  m->add("flatten", make<Flatten>())
      .add("fc1", make<Linear>(in.channels * in.height * in.width, 256))
      .add("relu1", make<ReLU>())
      .add("fc2", make<Linear>(256, 128))
      .add("relu2", make<ReLU>())
      .add("fc3", make<Linear>(128, in.classes));
  return m;
}

// Refuses an input whose feature map would vanish before the classifier (h × w after the
// convolutions and pools).
void check_fits(const char* model, const InputSpec& in, int64_t h, int64_t w) {
  NNLAB_CHECK(h >= 1 && w >= 1, model, ": a ", in.channels, "×", in.height, "×", in.width,
              " input is too small for its convolutions and pooling; use larger images or another model");
}

// cnn (torch_bench.py CNN): conv 1→32 3×3 pad 1, ReLU, maxpool 2; conv 32→64 3×3 pad 1,
// ReLU, maxpool 2; flatten; f1 3136→128, ReLU; f2 128→10. With batchnorm (cnn-bn), a
// BatchNorm2d follows each convolution (before its ReLU) and Dropout(0.25) precedes f2.
std::shared_ptr<Sequential> build_cnn_variant(const InputSpec& in, bool batchnorm) {
  const int64_t h = in.height / 2 / 2, w = in.width / 2 / 2;  // two 2×2 pools, floor
  check_fits(batchnorm ? "cnn-bn" : "cnn", in, h, w);
  auto m = std::make_shared<Sequential>();
  m->add("c1", make<Conv2d>(in.channels, 32, 3, 1, 1));
  if (batchnorm) m->add("bn1", make<BatchNorm2d>(32));
  m->add("relu1", make<ReLU>()).add("pool1", make<MaxPool2d>(2)).add("c2", make<Conv2d>(32, 64, 3, 1, 1));
  if (batchnorm) m->add("bn2", make<BatchNorm2d>(64));
  m->add("relu2", make<ReLU>())
      .add("pool2", make<MaxPool2d>(2))
      .add("flatten", make<Flatten>())
      .add("f1", make<Linear>(64 * h * w, 128))
      .add("relu3", make<ReLU>());
  if (batchnorm) m->add("drop", make<Dropout>(0.25));
  m->add("f2", make<Linear>(128, in.classes));
  return m;
}

std::shared_ptr<Sequential> build_cnn(const InputSpec& in) { return build_cnn_variant(in, false); }
std::shared_ptr<Sequential> build_cnn_bn(const InputSpec& in) { return build_cnn_variant(in, true); }

// lenet5 (torch_bench.py LeNet5): c1 conv →6 5×5 pad 2, ReLU, maxpool 2; c2 conv 6→16 5×5,
// ReLU, maxpool 2; flatten; f1 400→120, ReLU; f2 120→84, ReLU; f3 84→10.
std::shared_ptr<Sequential> build_lenet5(const InputSpec& in) {
  const int64_t h = (in.height / 2 - 4) / 2, w = (in.width / 2 - 4) / 2;  // pool, 5×5 conv, pool
  check_fits("lenet5", in, h, w);
  auto m = std::make_shared<Sequential>();
  m->add("c1", make<Conv2d>(in.channels, 6, 5, 1, 2))
      .add("relu1", make<ReLU>())
      .add("pool1", make<MaxPool2d>(2))
      .add("c2", make<Conv2d>(6, 16, 5))
      .add("relu2", make<ReLU>())
      .add("pool2", make<MaxPool2d>(2))
      .add("flatten", make<Flatten>())
      .add("f1", make<Linear>(16 * h * w, 120))
      .add("relu3", make<ReLU>())
      .add("f2", make<Linear>(120, 84))
      .add("relu4", make<ReLU>())
      .add("f3", make<Linear>(84, in.classes));
  return m;
}

// cifar-cnn (torch_bench.py CifarCNN): c1 conv →32, c2 32→32, pool; c3 32→64, c4 64→64,
// pool (all 3×3 pad 1, each followed by ReLU); flatten; f1 4096→512, ReLU; f2 512→10.
std::shared_ptr<Sequential> build_cifar_cnn(const InputSpec& in) {
  const int64_t h = in.height / 2 / 2, w = in.width / 2 / 2;
  check_fits("cifar-cnn", in, h, w);
  auto m = std::make_shared<Sequential>();
  m->add("c1", make<Conv2d>(in.channels, 32, 3, 1, 1))
      .add("relu1", make<ReLU>())
      .add("c2", make<Conv2d>(32, 32, 3, 1, 1))
      .add("relu2", make<ReLU>())
      .add("pool1", make<MaxPool2d>(2))
      .add("c3", make<Conv2d>(32, 64, 3, 1, 1))
      .add("relu3", make<ReLU>())
      .add("c4", make<Conv2d>(64, 64, 3, 1, 1))
      .add("relu4", make<ReLU>())
      .add("pool2", make<MaxPool2d>(2))
      .add("flatten", make<Flatten>())
      .add("f1", make<Linear>(64 * h * w, 512))
      .add("relu5", make<ReLU>())
      .add("f2", make<Linear>(512, in.classes));
  return m;
}

// A ResNet stage of one basic block, named as torchvision's ("layer2.0.conv1.weight").
std::shared_ptr<Module> stage(int64_t in_channels, int64_t out_channels, int64_t stride) {
  auto s = std::make_shared<Sequential>();
  s->add("0", make<BasicBlock>(in_channels, out_channels, stride));
  return s;
}

// resnet8 for CIFAR-sized images, named as torchvision's ResNet: conv1 3×3 →16 (no bias) +
// bn1 + ReLU; layer1 16→16, layer2 16→32 stride 2, layer3 32→64 stride 2 (one BasicBlock
// each: 1 + 3·2 = 7 convolutions, plus fc = 8 layers); global average pooling; fc 64→10.
std::shared_ptr<Sequential> build_resnet8(const InputSpec& in) {
  check_fits("resnet8", in, in.height, in.width);  // stride-2 stages round up: any size ≥ 1 fits
  auto m = std::make_shared<Sequential>();
  m->add("conv1", make<Conv2d>(Conv2dOptions{in.channels, 16, 3, 3, 1, 1, false}))
      .add("bn1", make<BatchNorm2d>(16))
      .add("relu", make<ReLU>())
      .add("layer1", stage(16, 16, 1))
      .add("layer2", stage(16, 32, 2))
      .add("layer3", stage(32, 64, 2))
      .add("avgpool", make<AdaptiveAvgPool2d>())
      .add("flatten", make<Flatten>())
      .add("fc", make<Linear>(64, in.classes));
  return m;
}

}  // namespace

const std::vector<ModelInfo>& model_zoo() {
  static const std::vector<ModelInfo> zoo = {
      {"mlp", "784-256-128-10 multilayer perceptron, ReLU", {"sgd", 0.05, 0.9, 64, "fashion-mnist"}, build_mlp},
      {"cnn", "conv32-pool-conv64-pool-fc128-fc10, ReLU", {"adam", 1e-3, 0.0, 64, "fashion-mnist"}, build_cnn},
      {"lenet5", "LeNet-5: conv6(5x5)-pool-conv16(5x5)-pool-fc120-fc84-fc10, ReLU",
       {"sgd", 0.05, 0.9, 64, "fashion-mnist"}, build_lenet5},
      {"cifar-cnn", "conv32-conv32-pool-conv64-conv64-pool-fc512-fc10, ReLU", {"sgd", 0.01, 0.9, 64, "cifar10"},
       build_cifar_cnn},
      {"cnn-bn", "cnn with BatchNorm after each conv and Dropout 0.25 before the classifier",
       {"adam", 1e-3, 0.0, 64, "fashion-mnist"}, build_cnn_bn},
      // lr 0.05 with momentum 0.9: BatchNorm after every convolution tolerates the larger
      // step that lenet5 and mlp use, without a warm-up.
      {"resnet8", "ResNet-8 for CIFAR: conv16 + 3 stages of one basic block (16, 32, 64), BatchNorm, global average pool",
       {"sgd", 0.05, 0.9, 64, "cifar10"}, build_resnet8},
  };
  return zoo;
}

std::string model_names() {
  std::string out;
  for (const ModelInfo& m : model_zoo()) out += (out.empty() ? "" : ", ") + m.name;
  return out;
}

const ModelInfo& model_info(const std::string& name) {
  for (const ModelInfo& m : model_zoo())
    if (m.name == name) return m;
  fail("unknown model '", name, "'; choose one of: ", model_names());
}

std::shared_ptr<Sequential> make_model(const std::string& name, const InputSpec& input, uint64_t seed) {
  auto model = model_info(name).build(input);
  model->initialize(seed);
  seed_dropout(*model, seed);
  return model;
}

}  // namespace nnlab
