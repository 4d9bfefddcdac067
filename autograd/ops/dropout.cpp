// Dropout (inverted): in training, each element survives with probability 1 − p and is
// scaled by 1/(1 − p), so the expected output equals the input and evaluation needs no
// rescaling. The mask comes from Philox keyed by (seed, stream, element), never by thread
// layout, so a seed gives the same mask on every device.
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// y = x · mask / (1 − p)   ->   dx = dy · mask / (1 − p)
class DropoutBackward : public Node {
 public:
  DropoutBackward(const Tensor& x, const Tensor& mask, double p) : Node({x}), mask_(mask), p_(p) {}
  std::string name() const override { return "DropoutBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& x = inputs()[0];
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    backend_for(x.device()).dropout_backward(dy, mask_, p_, dx);
    return {dx};
  }

 protected:
  void release_saved() override { mask_ = Tensor(); }

 private:
  Tensor mask_;  // uint8, 1 = kept
  double p_;
};

}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint32_t stream, bool training, const Tensor* step_count) {
  check_float("dropout", x);
  NNLAB_CHECK(p >= 0 && p < 1, "dropout: the drop probability must be in [0, 1), got ", p);
  if (!training || p == 0) return x;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty(x.shape(), DType::UInt8, x.device());
  backend_for(x.device()).dropout_forward(x, p, seed, stream, step_count, y, mask);
  if (needs_graph({&x})) attach(y, std::make_shared<DropoutBackward>(x, mask, p));
  return y;
}

}  // namespace nnlab
