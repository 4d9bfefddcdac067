// Module: a piece of a model that owns parameters (and buffers such as BatchNorm's running
// statistics) under PyTorch's names ("fc1.weight"), has children, and switches between
// training and evaluation. Modelled on the PyTorch C++ frontend (torch/nn/module.h).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "core/tensor.h"

namespace nnlab {

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  // forward with an epilogue fused into the layer's op (autograd/ops.h's Epilogue): what a
  // model runs for a layer and the ReLU (and max-pool) after it once fuse_epilogues
  // (layers/fuse_epilogues.h) has grouped them. Conv2d, Linear and MaxPool2d (a ReLU) take
  // one; the default refuses any but none.
  virtual Tensor forward_fused(const Tensor& x, const Epilogue& epilogue);
  // "Linear(in_features=784, out_features=256, bias=true)"
  virtual std::string describe() const = 0;

  // Recursive, in registration order, with dotted names: {"fc1.weight", W}, ...
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<Tensor> parameters() const;
  int64_t parameter_count() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves/converts every parameter and buffer in place (optimizers keep valid handles).
  void to(Device device);
  void to(DType dtype);
  Device device() const;

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

  // Draws every parameter from Philox streams keyed by (seed, Init, ordinal), in
  // registration order, so a seed fixes every weight on every device.
  void initialize(uint64_t seed);
  // A layer with parameters overrides this to initialise its own (PyTorch's defaults) and
  // takes stream numbers from next_stream; the default visits the children in order.
  virtual void reset_parameters(uint64_t seed, uint32_t& next_stream);

 protected:
  Tensor& register_parameter(const std::string& name, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, bool buffers, std::vector<std::pair<std::string, Tensor>>& out) const;

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace nnlab
