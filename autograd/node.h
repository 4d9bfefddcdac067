// A node of the autograd graph: the backward half of one op. It keeps the op's inputs (to
// route gradients to them) and whatever the derivative needs (saved tensors), and turns the
// gradient of its output into one gradient per input.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"

namespace nnlab {

class Node {
 public:
  explicit Node(std::vector<Tensor> inputs) : inputs_(std::move(inputs)) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // "LinearBackward": shown by error messages and by `nnlab explain`.
  virtual std::string name() const = 0;
  // dy: gradient of the op's output. Returns one gradient per input, in input order; an
  // input that does not require a gradient may get an undefined Tensor. An optional input
  // that is absent (a layer without bias) is an undefined Tensor in inputs().
  virtual std::vector<Tensor> backward(const Tensor& dy) = 0;

  // The shape of a result inside the op that the op never stores (a convolution whose output
  // goes straight into a pool: conv2d's max-pool epilogue), else empty: `nnlab explain` counts the
  // op's FLOPs from it.
  virtual Shape hidden_output_shape() const { return {}; }

  // True when backward only casts dy to its one input's dtype (autograd's cast). Where that
  // input is a leaf (a float32 master weight behind its bf16 copy), the engine runs all such
  // casts of one backward together at its end, in one Backend::cast_all (autograd/engine.h).
  virtual bool only_casts() const { return false; }

  const std::vector<Tensor>& inputs() const { return inputs_; }
  bool needs_grad(size_t i) const { return inputs_[i].defined() && inputs_[i].requires_grad(); }
  // Frees the inputs and saved tensors once backward has run (the graph is single-use).
  void release() {
    inputs_.clear();
    release_saved();
    released_ = true;
  }
  bool released() const { return released_; }

 protected:
  virtual void release_saved() {}

 private:
  std::vector<Tensor> inputs_;
  bool released_ = false;
};

}  // namespace nnlab
