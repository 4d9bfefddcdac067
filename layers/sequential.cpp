#include "layers/sequential.h"

#include "layers/activation.h"
#include "layers/pool.h"

namespace nnlab {

Sequential& Sequential::add(const std::string& name, std::shared_ptr<Module> layer) {
  for (const auto& [existing, child] : children())
    NNLAB_CHECK(existing != name, "Sequential: a layer named '", name, "' already exists");
  register_module(name, std::move(layer));
  return *this;
}

std::vector<Sequential::Child> Sequential::run_order() const {
  std::vector<Child> order = children();
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    if (dynamic_cast<const ReLU*>(order[i].second.get()) && dynamic_cast<const MaxPool2d*>(order[i + 1].second.get())) {
      std::swap(order[i], order[i + 1]);
      ++i;
    }
  }
  return order;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [name, layer] : run_order()) h = layer->forward(h);
  return h;
}

std::string Sequential::describe() const {
  std::string out = "Sequential(\n";
  for (const auto& [name, layer] : children()) out += "  (" + name + "): " + layer->describe() + "\n";
  return out + ")";
}

}  // namespace nnlab
