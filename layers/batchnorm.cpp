#include "layers/batchnorm.h"

#include <sstream>

#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

BatchNorm2d::BatchNorm2d(BatchNorm2dOptions o) : options_(o) {
  NNLAB_CHECK(o.num_features > 0, "BatchNorm2d: num_features must be positive, got ", o.num_features);
  NNLAB_CHECK(o.eps > 0 && o.momentum >= 0 && o.momentum <= 1, "BatchNorm2d: need eps > 0 and momentum in [0, 1], got eps ",
              o.eps, ", momentum ", o.momentum);
  weight_ = register_parameter("weight", Tensor::full({o.num_features}, 1.0));
  bias_ = register_parameter("bias", Tensor::zeros({o.num_features}));
  running_mean_ = register_buffer("running_mean", Tensor::zeros({o.num_features}));
  running_var_ = register_buffer("running_var", Tensor::full({o.num_features}, 1.0));
  num_batches_tracked_ = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::Int32));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  const bool training = is_training();
  // Counted on the device: no read-back, and a CUDA graph's replays each add their one.
  if (training) backend_for(num_batches_tracked_.device()).increment_counter(num_batches_tracked_);
  // bf16 x normalises with the float32 parameters and statistics: sums of many values, which
  // bf16's 8 bits would lose (the kernels compute in float32 and round y once).
  return batch_norm2d(x, weight_, bias_, running_mean_, running_var_, training, options_.momentum, options_.eps);
}

std::string BatchNorm2d::describe() const {
  std::ostringstream os;
  os << "BatchNorm2d(" << options_.num_features << ", eps=" << options_.eps << ", momentum=" << options_.momentum
     << ", affine=True, track_running_stats=True)";
  return os.str();
}

void BatchNorm2d::reset_parameters(uint64_t, uint32_t&) {
  weight_.fill_(1.0);
  bias_.fill_(0.0);
  running_mean_.fill_(0.0);
  running_var_.fill_(1.0);
  num_batches_tracked_.fill_(0.0);
}

}  // namespace nnlab
