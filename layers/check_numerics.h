// --check-numerics: finds the first layer whose output or gradient is not finite.
//
// The training loop's own fault detection (docs/design.md, "Numerical faults") never
// synchronises inside a step: a device flag raised by the loss and gradient checks is read
// once per log interval, which names the step but not the place. This checker trades speed
// for the place: it runs the model one child at a time, reads back whether each layer's
// output is finite, and, through the engine's backward hook, whether each gradient the
// backward pass computes is finite, throwing an Error that names the first layer at fault.
#pragma once
#include <string>
#include <unordered_map>
#include <utility>

#include "autograd/node.h"
#include "layers/sequential.h"

namespace nnlab {

class NumericsCheck {
 public:
  NumericsCheck();   // installs the backward hook
  ~NumericsCheck();  // removes it
  NumericsCheck(const NumericsCheck&) = delete;
  NumericsCheck& operator=(const NumericsCheck&) = delete;

  // model.forward(x), child by child. Throws naming the first child whose output is not
  // finite; records which child made each graph node so that the backward pass can name it.
  Tensor forward(Sequential& model, const Tensor& x);
  // Throws unless the loss is finite.
  void check_loss(const Tensor& loss) const;
  // Where the model is, for the messages: "step 7 (epoch 1, step 7 of 16)"; "" = unnamed.
  void set_step(std::string step) { step_ = std::move(step); }

 private:
  // "--check-numerics: " or "--check-numerics, step 7 (…): "
  std::string prefix() const;
  void on_backward(const Node& node, const std::vector<Tensor>& input_grads) const;
  void label_new_nodes(const Tensor& out, const std::string& layer);

  std::unordered_map<const Node*, std::string> layer_of_;  // this step's graph nodes → layer
  std::string step_;
};

}  // namespace nnlab
