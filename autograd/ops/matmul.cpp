// Matrix products: matmul and the Linear layer's op, both one GEMM per direction.
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
    const Tensor& x = inputs()[0];
    const Tensor& w = inputs()[1];
    const Tensor& b = inputs()[2];
    const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    Backend& be = backend_for(dy.device());
    Tensor dx, dw, db;
    if (needs_grad(0)) {
      dx = Tensor::empty(x.shape(), x.dtype(), x.device());
      be.gemm(false, false, n, in, out, 1.0, dy, w, 0.0, dx);
    }
    if (needs_grad(1)) {
      dw = Tensor::empty(w.shape(), w.dtype(), w.device());
      be.gemm(true, false, out, in, n, 1.0, dy, x, 0.0, dw);
    }
    if (b.defined() && needs_grad(2)) {
      db = Tensor::empty(b.shape(), b.dtype(), b.device());
      be.bias_backward(dy, db, 1);
    }
    return {dx, dw, db};
  }
};

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
  if (b.defined()) check_same_device("linear", {&x, &w, &b});
  else check_same_device("linear", {&x, &w});
  check_float("linear", x);
  NNLAB_CHECK(x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1) && x.dtype() == w.dtype(),
              "linear: input ", x.describe(), " does not fit weight ", w.describe(),
              " (need input (n, in) and weight (out, in); flatten images first)");
  NNLAB_CHECK(!b.defined() || (b.ndim() == 1 && b.dim(0) == w.dim(0)), "linear: bias ", b.describe(),
              " does not match weight ", w.describe());
  Tensor y = Tensor::empty({x.dim(0), w.dim(0)}, x.dtype(), x.device());
  Backend& be = backend_for(x.device());
  be.linear_forward(x, w, b.defined() ? &b : nullptr, y);
  if (needs_graph({&x, &w, &b})) attach(y, std::make_shared<LinearBackward>(x, w, b));
  return y;
}

}  // namespace nnlab
