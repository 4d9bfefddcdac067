#include "layers/sequential.h"

namespace nnlab {

Sequential& Sequential::add(const std::string& name, std::shared_ptr<Module> layer) {
  for (const auto& [existing, child] : children())
    NNLAB_CHECK(existing != name, "Sequential: a layer named '", name, "' already exists");
  register_module(name, std::move(layer));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [name, layer] : children()) h = layer->forward(h);
  return h;
}

std::string Sequential::describe() const {
  std::string out = "Sequential(\n";
  for (const auto& [name, layer] : children()) out += "  (" + name + "): " + layer->describe() + "\n";
  return out + ")";
}

}  // namespace nnlab
