// cast: a tensor's values in another float dtype, with the gradient flowing back in the
// input's. Mixed precision is built from it (layers/precision.h): the model's input cast to
// bf16, each layer's float32 weights cast to its input's dtype (their bf16 copies), and the
// logits cast back to float32 for the loss.
#include "autograd/engine.h"
#include "autograd/ops.h"

namespace nnlab {

namespace {

// y = round(x) in y's dtype   ->   dx = dy in x's dtype. The rounding's derivative is taken as
// 1 (a straight-through estimate: rounding is a step function whose true derivative is 0 almost
// everywhere, and the master weights must still see their gradient).
class CastBackward : public Node {
 public:
  explicit CastBackward(const Tensor& x) : Node({x}), dtype_(x.dtype()) {}
  std::string name() const override { return "CastBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override { return {dy.to(dtype_)}; }
  bool only_casts() const override { return true; }

 private:
  DType dtype_;
};

}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  check_float("cast", x);
  NNLAB_CHECK(dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16,
              "cast: the target dtype must be float32, float64 or bfloat16, got ", dtype_name(dtype));
  if (x.dtype() == dtype) return x;
  Tensor y = x.to(dtype);
  if (needs_graph({&x})) attach(y, std::make_shared<CastBackward>(x));
  return y;
}

Tensor cast_made(const Tensor& x, const Tensor& y) {
  check_float("cast", x);
  NNLAB_CHECK(y.shape() == x.shape() && y.device() == x.device() && y.is_leaf() && !y.requires_grad(),
              "cast: ", y.describe(), " is not a fresh copy of ", x.describe());
  if (x.dtype() == y.dtype()) return x;
  return needs_graph({&x}) ? attach(y, std::make_shared<CastBackward>(x)) : y;
}

}  // namespace nnlab
