// Activations y = f(x), elementwise.
#include <cctype>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// relu: dx = dy·[x > 0];  sigmoid: dx = dy·y·(1 − y);  tanh: dx = dy·(1 − y²)
class UnaryBackward : public Node {
 public:
  UnaryBackward(UnaryOp op, const Tensor& x, const Tensor& y) : Node({x}), op_(op), y_(y.detach()) {}
  std::string name() const override {  // "relu" -> "ReluBackward"
    std::string op = unary_op_name(op_);
    op[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(op[0])));
    return op + "Backward";
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& x = inputs()[0];
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    backend_for(x.device()).unary_backward(op_, x, y_, dy, dx);
    return {dx};
  }

 protected:
  void release_saved() override { y_ = Tensor(); }

 private:
  UnaryOp op_;
  Tensor y_;  // detached: saving y itself would make y → node → y a reference cycle
};

Tensor unary(UnaryOp op, const Tensor& x) {
  check_float(unary_op_name(op), x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend_for(x.device()).unary_forward(op, x, y);
  if (needs_graph({&x})) attach(y, std::make_shared<UnaryBackward>(op, x, y));
  return y;
}

}  // namespace

Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::Sigmoid, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }

}  // namespace nnlab
