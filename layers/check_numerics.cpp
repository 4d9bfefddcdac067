#include "layers/check_numerics.h"

#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/error.h"

namespace nnlab {

NumericsCheck::NumericsCheck() {
  set_backward_hook([this](const Node& node, const std::vector<Tensor>& grads) { on_backward(node, grads); });
}

NumericsCheck::~NumericsCheck() { set_backward_hook(nullptr); }

Tensor NumericsCheck::forward(Sequential& model, const Tensor& x) {
  layer_of_.clear();  // last step's nodes are gone; their addresses may be reused
  NNLAB_CHECK(all_finite(x), prefix(), "the input batch holds NaN or infinite values; check the data");
  // In the model's compute dtype, as Sequential::forward runs it (layers/precision.h).
  Tensor h = cast(x, model.compute_dtype() == DType::BFloat16 ? DType::BFloat16 : x.dtype());
  // The layers one by one, not Sequential's fused pairs: a ReLU fused into the layer before it
  // would turn that layer's NaN into 0 before the check could see it, and the fault would be
  // named at a later layer, or not at all.
  for (const auto& [name, child] : model.children()) {
    h = child->forward(h);
    NNLAB_CHECK(all_finite(h), prefix(), "the output of layer '", name, "' (", child->describe(),
                ") holds NaN or infinite values although its input was finite; lower --lr, add "
                "--clip-grad-norm, or check the data");
    label_new_nodes(h, name);
  }
  return cast(h, x.dtype());
}

void NumericsCheck::check_loss(const Tensor& loss) const {
  NNLAB_CHECK(all_finite(loss), prefix(),
              "the loss is NaN or infinite although every layer's output was finite (logits too large for the "
              "loss); lower --lr or add --clip-grad-norm");
}

std::string NumericsCheck::prefix() const {
  return step_.empty() ? "--check-numerics: " : "--check-numerics, " + step_ + ": ";
}

// Every node reachable from `out` that no earlier child made belongs to `layer` (children run
// in order, so the walk stops at the previous layer's nodes).
void NumericsCheck::label_new_nodes(const Tensor& out, const std::string& layer) {
  std::vector<const Node*> stack;
  if (out.grad_fn() && !layer_of_.count(out.grad_fn().get())) stack.push_back(out.grad_fn().get());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!layer_of_.emplace(n, layer).second) continue;
    for (const Tensor& in : n->inputs())
      if (in.defined() && in.grad_fn() && !layer_of_.count(in.grad_fn().get())) stack.push_back(in.grad_fn().get());
  }
}

// Backward runs from the loss towards the input: the first non-finite gradient met is the
// one closest to the loss, where the fault entered the backward pass.
void NumericsCheck::on_backward(const Node& node, const std::vector<Tensor>& input_grads) const {
  for (const Tensor& g : input_grads) {
    if (!g.defined() || all_finite(g)) continue;
    const auto it = layer_of_.find(&node);
    const std::string where = it == layer_of_.end() ? "the loss" : "layer '" + it->second + "'";
    fail(prefix(), "the backward pass of ", where, " (", node.name(),
         ") produced NaN or infinite gradients from finite ones; lower --lr or add --clip-grad-norm");
  }
}

}  // namespace nnlab
