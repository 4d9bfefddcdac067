#include "layers/zoo.h"

#include "layers/activation.h"
#include "layers/linear.h"

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

}  // namespace

const std::vector<ModelInfo>& model_zoo() {
  static const std::vector<ModelInfo> zoo = {
      {"mlp", "784-256-128-10 multilayer perceptron, ReLU", {"sgd", 0.05, 0.9, 64, "fashion-mnist"}, build_mlp},
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
  return model;
}

}  // namespace nnlab
