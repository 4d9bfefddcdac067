#include "layers/residual.h"

#include "autograd/ops.h"

namespace nnlab {

Residual::Residual(std::vector<Sequential::Child> body, std::string shortcut_name,
                   std::shared_ptr<Sequential> shortcut, std::shared_ptr<Module> activation)
    : body_(std::move(body)),
      shortcut_name_(std::move(shortcut_name)),
      shortcut_(std::move(shortcut)),
      activation_(std::move(activation)) {
  NNLAB_CHECK(!body_.empty(), "Residual: the body needs at least one layer");
  // Registration order is the initialisation order: the body first, then the shortcut.
  for (const auto& [name, layer] : body_) {
    NNLAB_CHECK(name != shortcut_name_ || !shortcut_, "Residual: the shortcut's name '", name,
                "' is also a body layer's name");
    register_module(name, layer);
  }
  if (shortcut_) register_module(shortcut_name_, shortcut_);
}

// The body runs before the shortcut, as in torchvision's BasicBlock.forward.
Tensor Residual::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [name, layer] : body_) h = layer->forward(h);
  const Tensor s = shortcut_ ? shortcut_->forward(x) : x;
  h = add(h, s);
  return activation_ ? activation_->forward(h) : h;
}

std::string Residual::describe() const {
  std::string out = "Residual(body:";
  for (const auto& [name, layer] : body_) out += " " + name;
  out += shortcut_ ? "; shortcut: " + shortcut_name_ : "; identity shortcut";
  return out + (activation_ ? "; then " + activation_->describe() : "") + ")";
}

}  // namespace nnlab
