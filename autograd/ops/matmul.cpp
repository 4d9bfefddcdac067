// Matrix products: matmul and the Linear layer's op (alone or with the ReLU after it as its
// epilogue), one GEMM per direction.
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

// y = e(z), z = x · wᵀ + b   ->   dz = dy (no epilogue) or dy·[y > 0] (ReLU) ;
//                                 dx = dz · w ;  dw = dzᵀ · x ;  db = Σ_rows dz
// One backend call (Backend::linear_backward) does it all: the CPU takes the mask and the bias
// gradient in one pass, CUDA the bias gradient inside dw's product. y > 0 exactly where z > 0,
// so z need not be kept.
class LinearBackward : public Node {
 public:
  LinearBackward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& relu_output)
      : Node({x, w, b}), y_(relu_output.defined() ? relu_output.detach() : Tensor()) {}
  std::string name() const override { return "LinearBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& x = inputs()[0];
    const Tensor& w = inputs()[1];
    const bool bias = inputs()[2].defined() && needs_grad(2);
    // Each gradient undefined when its input needs none.
    Tensor db = bias ? Tensor::empty(inputs()[2].shape(), dy.dtype(), dy.device()) : Tensor();
    Tensor dx = needs_grad(0) ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
    Tensor dw = needs_grad(1) ? Tensor::empty(w.shape(), w.dtype(), w.device()) : Tensor();
    backend_for(dy.device())
        .linear_backward(dy, y_.defined() ? &y_ : nullptr, x, w, dx.defined() ? &dx : nullptr,
                         dw.defined() ? &dw : nullptr, bias ? &db : nullptr);
    return {dx, dw, db};
  }

 protected:
  void release_saved() override { y_ = Tensor(); }

 private:
  Tensor y_;  // the output, with the ReLU; detached: saving y itself would make y → node → y a cycle
};

// The Linear op's checks; the output, allocated.
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

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const Epilogue& epilogue) {
  NNLAB_CHECK(epilogue.kind != Epilogue::Kind::ReluMaxPool,
              "linear: a max-pool epilogue needs a convolution (a Linear's output has no planes)");
  const bool relu = epilogue.kind == Epilogue::Kind::Relu;
  Tensor y = linear_output("linear", x, w, b);
  backend_for(x.device()).linear_forward(x, w, b.defined() ? &b : nullptr, y, relu);
  if (needs_graph({&x, &w, &b})) attach(y, std::make_shared<LinearBackward>(x, w, b, relu ? y : Tensor()));
  return y;
}

}  // namespace nnlab
