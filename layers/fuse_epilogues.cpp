#include "layers/fuse_epilogues.h"

#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/pool.h"

namespace nnlab {

namespace {

using Child = Sequential::Child;
using Step = Sequential::Step;

bool is_relu(const Module& m) { return dynamic_cast<const ReLU*>(&m) != nullptr; }
bool is_max_pool(const Module& m) { return dynamic_cast<const MaxPool2d*>(&m) != nullptr; }
bool takes_relu(const Module& m) {
  return dynamic_cast<const Conv2d*>(&m) != nullptr || dynamic_cast<const Linear*>(&m) != nullptr;
}

// The index of the MaxPool2d in a (MaxPool2d, ReLU) or (ReLU, MaxPool2d) pair at a, a + 1,
// else -1.
long pool_of_pair(const std::vector<Child>& all, size_t a) {
  if (a + 1 >= all.size()) return -1;
  const Module &first = *all[a].second, &second = *all[a + 1].second;
  if (is_max_pool(first) && is_relu(second)) return long(a);
  if (is_relu(first) && is_max_pool(second)) return long(a + 1);
  return -1;
}

Epilogue max_pool_relu_of(const Module& pool) {
  const Pool2dOptions& o = dynamic_cast<const MaxPool2d&>(pool).options();
  return Epilogue::relu_max_pool(o.kernel, o.stride, o.padding);
}

std::vector<Step> grouped(const std::vector<Child>& all, int& groups) {
  std::vector<Step> steps;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& [name, layer] = all[i];
    // A Conv2d, then a max-pool and ReLU pair: the three as one op, whose convolution output
    // is never stored.
    const long pool_after = pool_of_pair(all, i + 1);
    if (dynamic_cast<const Conv2d*>(layer.get()) && pool_after >= 0) {
      const size_t relu = size_t(pool_after) == i + 1 ? i + 2 : i + 1;
      steps.push_back({name + "+" + all[size_t(pool_after)].first + "+" + all[relu].first, layer,
                       max_pool_relu_of(*all[size_t(pool_after)].second)});
      ++groups, i += 2;
      continue;
    }
    // A max-pool and ReLU pair: the pool with the ReLU.
    const long pool = pool_of_pair(all, i);
    if (pool >= 0) {
      const size_t relu = size_t(pool) == i ? i + 1 : i;
      steps.push_back({all[size_t(pool)].first + "+" + all[relu].first, all[size_t(pool)].second, Epilogue::relu()});
      ++groups, ++i;
      continue;
    }
    // A Conv2d or Linear and the ReLU after it, unless a max-pool follows that ReLU (then the
    // ReLU goes to the pool).
    const bool relu_next = i + 1 < all.size() && is_relu(*all[i + 1].second) &&
                           !(i + 2 < all.size() && is_max_pool(*all[i + 2].second));
    if (relu_next && takes_relu(*layer)) {
      steps.push_back({name + "+" + all[i + 1].first, layer, Epilogue::relu()});
      ++groups, ++i;
      continue;
    }
    steps.push_back({name, layer, Epilogue{}});
  }
  return steps;
}

}  // namespace

int fuse_epilogues(Module& model) {
  int groups = 0;
  for (const auto& [name, child] : model.children()) groups += fuse_epilogues(*child);
  if (auto* sequential = dynamic_cast<Sequential*>(&model))
    sequential->set_run_order(grouped(sequential->children(), groups));
  return groups;
}

std::vector<std::string> fused_groups(const Module& model) {
  std::vector<std::string> names;
  if (const auto* sequential = dynamic_cast<const Sequential*>(&model)) {
    for (const Step& step : sequential->run_order()) {
      if (!step.epilogue.none()) names.push_back(step.name);
      for (const std::string& inner : fused_groups(*step.layer)) names.push_back(inner);
    }
    return names;
  }
  for (const auto& [name, child] : model.children())
    for (const std::string& inner : fused_groups(*child)) names.push_back(inner);
  return names;
}

}  // namespace nnlab
