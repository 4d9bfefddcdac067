#include "layers/sequential.h"

#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/pool.h"

namespace nnlab {

namespace {

// The MaxPool2d of a (MaxPool2d, ReLU) or (ReLU, MaxPool2d) pair, else null.
const MaxPool2d* pool_of_pair(const Module& a, const Module& b) {
  if (dynamic_cast<const ReLU*>(&b)) return dynamic_cast<const MaxPool2d*>(&a);
  if (dynamic_cast<const ReLU*>(&a)) return dynamic_cast<const MaxPool2d*>(&b);
  return nullptr;
}

bool is_relu(const Module& m) { return dynamic_cast<const ReLU*>(&m) != nullptr; }
bool is_max_pool(const Module& m) { return dynamic_cast<const MaxPool2d*>(&m) != nullptr; }

// The fused module of a Linear or Conv2d and the ReLU after it, else null.
std::shared_ptr<Module> with_relu(const std::shared_ptr<Module>& layer) {
  if (auto linear = std::dynamic_pointer_cast<Linear>(layer)) return std::make_shared<LinearReLU>(linear);
  if (auto conv = std::dynamic_pointer_cast<Conv2d>(layer)) return std::make_shared<Conv2dReLU>(conv);
  return nullptr;
}

}  // namespace

Sequential& Sequential::add(const std::string& name, std::shared_ptr<Module> layer) {
  for (const auto& [existing, child] : children())
    NNLAB_CHECK(existing != name, "Sequential: a layer named '", name, "' already exists");
  register_module(name, std::move(layer));
  // The run order, pairs (and a convolution's pool) fused. Built once per add, so a forward
  // pass allocates nothing here.
  // A ReLU between a layer and a max-pool goes to the pool: pooled, it is a quarter the size.
  run_order_.clear();
  const std::vector<Child>& all = children();
  for (size_t i = 0; i < all.size(); ++i) {
    // A Conv2d followed by a max-pool and ReLU pair: the three as one op, whose convolution
    // output is never stored (conv2d_max_pool2d_relu).
    const auto conv = std::dynamic_pointer_cast<Conv2d>(all[i].second);
    const MaxPool2d* pool_after = i + 2 < all.size() ? pool_of_pair(*all[i + 1].second, *all[i + 2].second) : nullptr;
    if (conv && pool_after) {
      const bool pool_first = all[i + 1].second.get() == pool_after;
      run_order_.emplace_back(all[i].first + "+" + all[pool_first ? i + 1 : i + 2].first + "+" +
                                  all[pool_first ? i + 2 : i + 1].first,
                              std::make_shared<Conv2dMaxPoolReLU>(conv, *pool_after));
      i += 2;
      continue;
    }
    const Module* next = i + 1 < all.size() ? all[i + 1].second.get() : nullptr;
    const MaxPool2d* pool = next ? pool_of_pair(*all[i].second, *next) : nullptr;
    const bool relu_next = next && is_relu(*next) && !(i + 2 < all.size() && is_max_pool(*all[i + 2].second));
    std::shared_ptr<Module> fused = relu_next ? with_relu(all[i].second) : nullptr;
    if (pool) {
      const bool pool_first = all[i].second.get() == pool;
      const std::string& pool_name = all[pool_first ? i : i + 1].first;
      const std::string& relu_name = all[pool_first ? i + 1 : i].first;
      run_order_.emplace_back(pool_name + "+" + relu_name, std::make_shared<MaxPool2dReLU>(*pool));
      ++i;
    } else if (fused) {
      run_order_.emplace_back(all[i].first + "+" + all[i + 1].first, std::move(fused));
      ++i;
    } else {
      run_order_.push_back(all[i]);
    }
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
