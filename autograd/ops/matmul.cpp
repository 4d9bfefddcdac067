// Matrix products: matmul and the Linear layer's op (alone or with the ReLU after it), one GEMM
// per direction.
#include <utility>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// y = a · b   ->   da = dy · bᵀ ;  db = aᵀ · dy
class MatmulBackward : public Node {
 public:
  MatmulBackward(const Tensor& a, const Tensor& b) : Node({a, b}) {}
  std::string name() const override { return "MatmulBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& a = inputs()[0];
    const Tensor& b = inputs()[1];
    const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
    Backend& be = backend_for(dy.device());
    Tensor da, db;
    if (needs_grad(0)) {
      da = Tensor::empty(a.shape(), a.dtype(), a.device());
      be.gemm(false, true, m, k, n, 1.0, dy, b, 0.0, da);
    }
    if (needs_grad(1)) {
      db = Tensor::empty(b.shape(), b.dtype(), b.device());
      be.gemm(true, false, k, n, m, 1.0, a, dy, 0.0, db);
    }
    return {da, db};
  }
};

// y = x · wᵀ + b   ->   dx = dy · w ;  dw = dyᵀ · x ;  db = Σ_rows dy
class LinearBackward : public Node {
 public:
  LinearBackward(const Tensor& x, const Tensor& w, const Tensor& b) : Node({x, w, b}) {}
  std::string name() const override { return "LinearBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor db;
    if (wants_bias_gradient()) {
      db = Tensor::empty(inputs()[2].shape(), dy.dtype(), dy.device());
      backend_for(dy.device()).bias_backward(dy, db, 1);
    }
    auto [dx, dw] = products(dy);
    return {dx, dw, db};
  }

 protected:
  bool wants_bias_gradient() const { return inputs()[2].defined() && needs_grad(2); }
  // dx = dy · w and dw = dyᵀ · x, each undefined when its input needs none: one backend call,
  // which may run the two at once.
  std::pair<Tensor, Tensor> products(const Tensor& dy) const {
    const Tensor& x = inputs()[0];
    const Tensor& w = inputs()[1];
    Tensor dx = needs_grad(0) ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
    Tensor dw = needs_grad(1) ? Tensor::empty(w.shape(), w.dtype(), w.device()) : Tensor();
    backend_for(dy.device()).linear_backward(dy, x, w, dx.defined() ? &dx : nullptr, dw.defined() ? &dw : nullptr);
    return {dx, dw};
  }
};

// y = relu(z), z = x · wᵀ + b   ->   dz = dy·[y > 0] ;  dx = dz · w ;  dw = dzᵀ · x ;  db = Σ_rows dz
// The mask and the bias gradient are one pass (Backend::relu_bias_backward); y > 0 exactly
// where z > 0, so z need not be kept.
class LinearReluBackward : public LinearBackward {
 public:
  LinearReluBackward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y)
      : LinearBackward(x, w, b), y_(y.detach()) {}
  std::string name() const override { return "LinearReluBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor dz = Tensor::empty(y_.shape(), y_.dtype(), y_.device());
    Tensor db = wants_bias_gradient() ? Tensor::empty(inputs()[2].shape(), dy.dtype(), dy.device()) : Tensor();
    backend_for(dy.device()).relu_bias_backward(y_, dy, dz, db.defined() ? &db : nullptr, 1);
    auto [dx, dw] = products(dz);
    return {dx, dw, db};
  }

 protected:
  void release_saved() override { y_ = Tensor(); }

 private:
  Tensor y_;  // detached: saving y itself would make y → node → y a reference cycle
};

// The checks both Linear ops make; the output, allocated.
Tensor linear_output(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  if (b.defined()) check_same_device(op, {&x, &w, &b});
  else check_same_device(op, {&x, &w});
  check_float(op, x);
  NNLAB_CHECK(x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1) && x.dtype() == w.dtype(), op, ": input ",
              x.describe(), " does not fit weight ", w.describe(),
              " (need input (n, in) and weight (out, in); flatten images first)");
  NNLAB_CHECK(!b.defined() || (b.ndim() == 1 && b.dim(0) == w.dim(0)), op, ": bias ", b.describe(),
              " does not match weight ", w.describe());
  return Tensor::empty({x.dim(0), w.dim(0)}, x.dtype(), x.device());
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", {&a, &b});
  check_float("matmul", a);
  NNLAB_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.dim(1) == b.dim(0) && a.dtype() == b.dtype(),
              "matmul: cannot multiply ", a.describe(), " by ", b.describe(),
              " (need (m, k) · (k, n) of one dtype)");
  Tensor y = Tensor::empty({a.dim(0), b.dim(1)}, a.dtype(), a.device());
  backend_for(a.device()).gemm(false, false, a.dim(0), b.dim(1), a.dim(1), 1.0, a, b, 0.0, y);
  if (needs_graph({&a, &b})) attach(y, std::make_shared<MatmulBackward>(a, b));
  return y;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = linear_output("linear", x, w, b);
  backend_for(x.device()).linear_forward(x, w, b.defined() ? &b : nullptr, y, false);
  if (needs_graph({&x, &w, &b})) attach(y, std::make_shared<LinearBackward>(x, w, b));
  return y;
}

Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = linear_output("linear_relu", x, w, b);
  backend_for(x.device()).linear_forward(x, w, b.defined() ? &b : nullptr, y, true);
  if (needs_graph({&x, &w, &b})) attach(y, std::make_shared<LinearReluBackward>(x, w, b, y));
  return y;
}

}  // namespace nnlab
