// a ∘ b for ∘ in {+, −, ×, ÷}, with suffix broadcasting (the smaller operand repeats over
// the leading dimensions of the larger).
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

bool is_suffix(const Shape& small, const Shape& big) {
  if (small.size() > big.size()) return false;
  const size_t off = big.size() - small.size();
  for (size_t i = 0; i < small.size(); ++i)
    if (small[i] != big[off + i]) return false;
  return true;
}

// A one-element operand broadcasts over anything.
bool broadcasts_to(const Tensor& small, const Tensor& big) {
  return small.numel() == 1 || is_suffix(small.shape(), big.shape());
}

// d(a+b) = (dy, dy);  d(a−b) = (dy, −dy);  d(a·b) = (dy·b, dy·a);  d(a/b) = (dy/b, −dy·a/b²)
// A broadcast operand's gradient is summed over the rows it was repeated on.
class BinaryBackward : public Node {
 public:
  BinaryBackward(BinaryOp op, const Tensor& a, const Tensor& b) : Node({a, b}), op_(op) {}
  std::string name() const override {
    const char* names[] = {"AddBackward", "SubBackward", "MulBackward", "DivBackward"};
    return names[static_cast<int>(op_)];
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& a = inputs()[0];
    const Tensor& b = inputs()[1];
    // A sum hands dy on unchanged to an operand of dy's shape (a residual connection's two
    // branches): no kernel, no copy. The engine never writes into a gradient it was handed
    // (autograd/engine.cpp), so both operands may hold the same dy.
    const bool pass_a = op_ == BinaryOp::Add && a.shape() == dy.shape();
    const bool pass_b = op_ == BinaryOp::Add && b.shape() == dy.shape();
    Tensor da = pass_a && needs_grad(0) ? dy : Tensor(), db = pass_b && needs_grad(1) ? dy : Tensor();
    const bool compute_a = needs_grad(0) && !pass_a, compute_b = needs_grad(1) && !pass_b;
    if (compute_a) da = Tensor::empty(a.shape(), a.dtype(), a.device());
    if (compute_b) db = Tensor::empty(b.shape(), b.dtype(), b.device());
    if (compute_a || compute_b)
      backend_for(dy.device()).binary_backward(op_, a, b, dy, compute_a ? &da : nullptr, compute_b ? &db : nullptr);
    return {da, db};
  }

 private:
  BinaryOp op_;
};

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_same_device(name, {&a, &b});
  check_float(name, a);
  NNLAB_CHECK(a.dtype() == b.dtype(), name, ": dtypes differ: ", a.describe(), " and ", b.describe());
  const bool a_big = a.numel() >= b.numel();
  const Tensor& big = a_big ? a : b;
  const Tensor& small = a_big ? b : a;
  NNLAB_CHECK(broadcasts_to(small, big), name, ": shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
              " do not broadcast (the smaller shape must be a suffix of the larger, or a single element)");
  Tensor y = Tensor::empty(big.shape(), big.dtype(), big.device());
  backend_for(y.device()).binary_forward(op, a, b, y);
  if (needs_graph({&a, &b})) attach(y, std::make_shared<BinaryBackward>(op, a, b));
  return y;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }

}  // namespace nnlab
