#include "layers/activation.h"

#include "autograd/ops.h"

namespace nnlab {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return nnlab::tanh(x); }
Tensor Flatten::forward(const Tensor& x) { return flatten(x); }

}  // namespace nnlab
