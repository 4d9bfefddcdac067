#include "layers/sequential.h"

#include "layers/activation.h"
#include "layers/pool.h"

namespace nnlab {

namespace {

// The MaxPool2d of a (MaxPool2d, ReLU) or (ReLU, MaxPool2d) pair, else null.
const MaxPool2d* pool_of_pair(const Module& a, const Module& b) {
  if (dynamic_cast<const ReLU*>(&b)) return dynamic_cast<const MaxPool2d*>(&a);
  if (dynamic_cast<const ReLU*>(&a)) return dynamic_cast<const MaxPool2d*>(&b);
  return nullptr;
}

}  // namespace

Sequential& Sequential::add(const std::string& name, std::shared_ptr<Module> layer) {
  for (const auto& [existing, child] : children())
    NNLAB_CHECK(existing != name, "Sequential: a layer named '", name, "' already exists");
  register_module(name, std::move(layer));
  // The run order, pairs fused. Built once per add, so a forward pass allocates nothing here.
  run_order_.clear();
  const std::vector<Child>& all = children();
  for (size_t i = 0; i < all.size(); ++i) {
    const MaxPool2d* pool = i + 1 < all.size() ? pool_of_pair(*all[i].second, *all[i + 1].second) : nullptr;
    if (!pool) {
      run_order_.push_back(all[i]);
      continue;
    }
    const bool pool_first = all[i].second.get() == pool;
    const std::string& pool_name = all[pool_first ? i : i + 1].first;
    const std::string& relu_name = all[pool_first ? i + 1 : i].first;
    run_order_.emplace_back(pool_name + "+" + relu_name, std::make_shared<MaxPool2dReLU>(*pool));
    ++i;
  }
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [name, layer] : run_order_) h = layer->forward(h);
  return h;
}

std::string Sequential::describe() const {
  std::string out = "Sequential(\n";
  for (const auto& [name, layer] : children()) out += "  (" + name + "): " + layer->describe() + "\n";
  return out + ")";
}

}  // namespace nnlab
