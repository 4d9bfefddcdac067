// Shared by the model tests (test_zoo.cpp, test_model_file.cpp): MNIST's input shape and a
// model's parameter names in the order it lists them (PyTorch's state_dict order).
#pragma once
#include <string>
#include <vector>

#include "layers/model_file.h"
#include "layers/module.h"

namespace nnlab_test {

inline const nnlab::InputSpec kMnist{1, 28, 28, 10};

inline std::vector<std::string> names_of(const nnlab::Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.named_parameters()) out.push_back(name);
  return out;
}

}  // namespace nnlab_test
