// The names Sequential runs its layers under (groups fuse_epilogues made joined by "+"), for
// the tests of its fusions.
#pragma once
#include <string>
#include <vector>

#include "layers/sequential.h"

namespace nnlab_test {

inline std::vector<std::string> run_order_names(const nnlab::Sequential& model) {
  std::vector<std::string> names;
  for (const nnlab::Sequential::Step& step : model.run_order()) names.push_back(step.name);
  return names;
}

}  // namespace nnlab_test
