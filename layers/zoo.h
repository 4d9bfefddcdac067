// The model zoo: each model is identical to its twin in the PyTorch yardstick
// (shared/peers/torch_bench.py) — same layers, same parameter names — and comes with the
// same default training recipe.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "layers/sequential.h"

namespace nnlab {

struct InputSpec {
  int64_t channels = 1, height = 28, width = 28, classes = 10;
};

struct ModelRecipe {
  std::string optimizer;  // "sgd" | "adam" | "adamw"
  double lr = 0.01;
  double momentum = 0.0;
  int64_t batch = 64;
  std::string data;       // the data set it is meant for: "fashion-mnist" or "cifar10"
};

struct ModelInfo {
  std::string name, summary;
  ModelRecipe recipe;
  // Builds the model for this input; throws when the input cannot fit the model.
  std::shared_ptr<Sequential> (*build)(const InputSpec& input);
};

const std::vector<ModelInfo>& model_zoo();
const ModelInfo& model_info(const std::string& name);  // throws with the list of names
std::string model_names();                             // "mlp, cnn, ..."

// Builds `name` for `input` and initialises it from `seed`.
std::shared_ptr<Sequential> make_model(const std::string& name, const InputSpec& input, uint64_t seed);

}  // namespace nnlab
