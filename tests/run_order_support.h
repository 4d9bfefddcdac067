// The names Sequential runs its layers under (fused groups joined by "+"), for the tests of
// its fusions.
#pragma once
#include <string>
#include <vector>

#include "layers/sequential.h"

namespace nnlab_test {

inline std::vector<std::string> run_order_names(const nnlab::Sequential& model) {
  std::vector<std::string> names;
  for (const auto& [name, layer] : model.run_order()) names.push_back(name);
  return names;
}

}  // namespace nnlab_test
