// Reductions to a scalar: sum and mean over all elements.
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// y = scale · Σ x   ->   dx = scale · dy  (the scalar dy repeated over x's shape)
class SumBackward : public Node {
 public:
  SumBackward(const Tensor& x, double scale) : Node({x}), scale_(scale) {}
  std::string name() const override { return scale_ == 1.0 ? "SumBackward" : "MeanBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& x = inputs()[0];
    // dx = scale · dy: fill with scale, then multiply by the broadcast scalar dy in place
    // (two kernels on the device, no host synchronisation).
    Tensor dx = Tensor::full(x.shape(), scale_, x.dtype(), x.device());
    backend_for(x.device()).binary_forward(BinaryOp::Mul, dx, dy, dx);
    return {dx};
  }

 private:
  double scale_;
};

Tensor reduce_all(const Tensor& x, double scale) {
  check_float("sum", x);
  Tensor y = Tensor::empty({}, x.dtype(), x.device());
  backend_for(x.device()).sum_all(x, scale, y);
  if (needs_graph({&x})) attach(y, std::make_shared<SumBackward>(x, scale));
  return y;
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce_all(x, 1.0); }
Tensor mean(const Tensor& x) {
  NNLAB_CHECK(x.numel() > 0, "mean of an empty tensor ", x.describe());
  return reduce_all(x, 1.0 / static_cast<double>(x.numel()));
}

}  // namespace nnlab
