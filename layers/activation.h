// Parameter-free layers wrapping one op each: ReLU, Sigmoid, Tanh, Flatten.
#pragma once
#include "layers/module.h"

namespace nnlab {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string describe() const override { return "ReLU()"; }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string describe() const override { return "Sigmoid()"; }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string describe() const override { return "Tanh()"; }
};

// (n, d1, d2, ...) -> (n, d1·d2·...)
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string describe() const override { return "Flatten()"; }
};

}  // namespace nnlab
