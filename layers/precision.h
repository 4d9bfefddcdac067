// Mixed precision (`--precision bf16`): bf16 activations and weight copies, float32 master
// weights, optimizer state, BatchNorm statistics and loss.
//
// How it flows, all through autograd's cast (autograd/ops.h), so backward needs nothing of its
// own: the model's input is cast to bf16 at the top of the model (Sequential's compute dtype);
// every layer computes in its input's dtype, so a Linear or Conv2d meeting a bf16 input casts
// its float32 weight and bias to bf16 copies in the graph (compute_copy), and their bf16
// gradients come back through the cast as float32 gradients of the masters, which the
// optimizer updates in float32; BatchNorm normalises bf16 activations with float32 parameters
// and statistics (autograd/ops/batchnorm.cpp); the model's output is cast back to float32
// (Sequential::forward), except in training, where cross_entropy takes the bf16 logits as they
// are (Sequential::forward_for_loss) and computes the softmax and loss in float32.
#pragma once
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace nnlab {

// The activations' dtype for a --precision value: float32 for "fp32" and "tf32" (tf32 is a
// math mode of float32 tensors), bfloat16 for "bf16"; anything else is an error naming `option`.
DType precision_storage_dtype(const std::string& precision, const char* option);
// The same, for a model that runs on `device`: bf16 where the device cannot run it (a GPU
// without bf16 tensor cores: Backend::bf16_obstacle) is an error saying why.
DType precision_storage_dtype(const std::string& precision, Device device, const char* option);

// param as a layer computes with it on input x: a bf16 copy (cast in the graph, so the float32
// master receives its gradient) when x is bf16 and param is not, else param itself (an
// undefined param stays undefined). Inside a WeightCopies scope the copy comes from it.
Tensor compute_copy(const Tensor& param, const Tensor& x);

// The bf16 copies of a model's weights for one forward, made in one multi-tensor cast
// (Backend::cast_all) instead of one cast per weight. Which weights: those compute_copy was
// asked for in the model's previous forward, which it notes in `wanted` (so the first forward
// learns the list, and a weight not in it is cast on its own, as without a scope). While the
// scope lives, compute_copy takes each copy from it. Sequential::forward opens one for a bf16
// model; one scope per thread at a time.
class WeightCopies {
 public:
  explicit WeightCopies(std::vector<Tensor>& wanted);
  ~WeightCopies();
  WeightCopies(const WeightCopies&) = delete;
  WeightCopies& operator=(const WeightCopies&) = delete;
  // The copy of param made by the scope (undefined when it made none), and a note that it was
  // wanted.
  Tensor take(const Tensor& param);

 private:
  std::vector<Tensor>& wanted_;
  std::vector<Tensor> masters_, copies_;
  WeightCopies* enclosing_;
};

}  // namespace nnlab
