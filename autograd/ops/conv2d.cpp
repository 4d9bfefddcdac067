// 2-D convolution (PyTorch's Conv2d: cross-correlation, dilation 1, one group) with its
// epilogue (none, ReLU, or max-pool + ReLU): the op and its Backward node. The kernels are
// devices/cpu/conv2d_cpu.cpp (which runs the plan conv2d_plan.cpp makes per layer: Winograd,
// direct loops or im2col + GEMM) and devices/cuda/conv2d_cuda.cu (cuDNN).
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/pool2d_geometry.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// y = e(z), z = W ⋆ x + b   ->   dz = e's backward of dy:  dy itself (none), dy·[y > 0] (ReLU),
//                                 or dy routed to each window's winner (max-pool + ReLU);
//                                 dx = col2im(Wᵀ · dz) ;  dW = Σ_n dz · im2col(x)ᵀ ;  db = Σ_{n,p,q} dz
// Inputs are {x, w, b}; an absent bias is an undefined Tensor (autograd/node.h), so it gets
// no gradient, as in LinearBackward. z itself is never kept: y > 0 exactly where z > 0, and the
// pool's winners are all the pool's backward needs.
class Conv2dBackward : public Node {
 public:
  Conv2dBackward(const Conv2dGeometry& g, const ConvEpilogue& e, std::vector<Tensor> inputs, const Tensor& saved)
      : Node(std::move(inputs)), g_(g), e_(e), saved_(saved.defined() ? saved.detach() : Tensor()) {}
  std::string name() const override { return "Conv2dBackward"; }
  Shape hidden_output_shape() const override {
    if (e_.kind == ConvEpilogue::Kind::ReluMaxPool) return {g_.n, g_.k, g_.p, g_.q};
    return {};
  }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor &x = inputs()[0], &w = inputs()[1];
    Tensor dx = needs_grad(0) ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
    Tensor dw = needs_grad(1) ? Tensor::empty(w.shape(), w.dtype(), w.device()) : Tensor();
    Tensor db = needs_grad(2) ? Tensor::empty({g_.k}, dy.dtype(), dy.device()) : Tensor();
    backend_for(dy.device()).conv2d_backward(g_, e_, dy, saved_, x, w, dx, dw, db);
    return {dx, dw, db};
  }

 protected:
  void release_saved() override { saved_ = Tensor(); }

 private:
  Conv2dGeometry g_;
  ConvEpilogue e_;
  // y for the ReLU, the pool's argmax for max-pool + ReLU, undefined for none; detached: saving
  // y itself would make y → node → y a reference cycle
  Tensor saved_;
};

// Checks the inputs the way a user would want to hear about them, and works out p and q.
Conv2dGeometry conv2d_geometry(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride_h,
                               int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  NNLAB_CHECK(x.ndim() == 4, "conv2d: input ", x.describe(),
              " must be 4-D (n, c, h, w); add a batch or channel dimension with reshape");
  NNLAB_CHECK(w.ndim() == 4, "conv2d: weight ", w.describe(), " must be 4-D (k, c, r, s)");
  NNLAB_CHECK(x.dtype() == w.dtype(), "conv2d: input ", x.describe(), " and weight ", w.describe(),
              " have different dtypes");
  NNLAB_CHECK(x.dim(1) == w.dim(1), "conv2d: input ", x.describe(), " has ", x.dim(1), " channels but weight ",
              w.describe(), " expects ", w.dim(1), " (weight is (out_channels, in_channels, kh, kw))");
  NNLAB_CHECK(stride_h >= 1 && stride_w >= 1, "conv2d: stride must be at least 1, got (", stride_h, ", ", stride_w,
              ")");
  NNLAB_CHECK(pad_h >= 0 && pad_w >= 0, "conv2d: padding must not be negative, got (", pad_h, ", ", pad_w, ")");
  NNLAB_CHECK(b.defined() == false || (b.ndim() == 1 && b.dim(0) == w.dim(0) && b.dtype() == w.dtype()),
              "conv2d: bias ", b.defined() ? b.describe() : "", " does not match weight ", w.describe(),
              " (need one bias per output channel, of the weight's dtype)");
  Conv2dGeometry g{};
  g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.k = w.dim(0), g.r = w.dim(2), g.s = w.dim(3);
  g.stride_h = stride_h, g.stride_w = stride_w, g.pad_h = pad_h, g.pad_w = pad_w;
  NNLAB_CHECK(g.r <= g.h + 2 * pad_h && g.s <= g.w + 2 * pad_w, "conv2d: kernel ", g.r, "×", g.s,
              " is larger than the padded input ", g.h + 2 * pad_h, "×", g.w + 2 * pad_w, " (input ", x.describe(),
              ", padding (", pad_h, ", ", pad_w, ")); use a smaller kernel or more padding");
  g.p = (g.h + 2 * pad_h - g.r) / stride_h + 1;
  g.q = (g.w + 2 * pad_w - g.s) / stride_w + 1;
  return g;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride_h, int64_t stride_w, int64_t pad_h,
              int64_t pad_w, const Epilogue& epilogue) {
  const char* op = "conv2d";
  if (b.defined()) check_same_device(op, {&x, &w, &b});
  else check_same_device(op, {&x, &w});
  check_float(op, x);
  const Conv2dGeometry g = conv2d_geometry(x, w, b, stride_h, stride_w, pad_h, pad_w);
  ConvEpilogue e;
  Shape out_shape{g.n, g.k, g.p, g.q};
  if (epilogue.kind == Epilogue::Kind::Relu) e.kind = ConvEpilogue::Kind::Relu;
  if (epilogue.kind == Epilogue::Kind::ReluMaxPool) {
    e.kind = ConvEpilogue::Kind::ReluMaxPool;
    e.pool = pool2d_geometry("conv2d's max-pool", g.n, g.k, g.p, g.q,
                             std::string("the convolution's output ") + dtype_name(x.dtype()) + shape_str(out_shape),
                             epilogue.pool_kernel, epilogue.pool_stride, epilogue.pool_padding);
    e.pool.relu = true;
    out_shape = {e.pool.n, e.pool.c, e.pool.p, e.pool.q};
  }
  Tensor y = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor argmax = e.kind == ConvEpilogue::Kind::ReluMaxPool ? Tensor::empty(out_shape, DType::Int32, x.device())
                                                            : Tensor();
  const Tensor* bias = b.defined() ? &b : nullptr;
  if (y.numel() > 0)
    backend_for(x.device()).conv2d_forward(g, e, x, w, bias, y, argmax.defined() ? &argmax : nullptr);
  if (needs_graph({&x, &w, &b})) {
    const Tensor saved = e.kind == ConvEpilogue::Kind::Relu ? y : argmax;
    attach(y, std::make_shared<Conv2dBackward>(g, e, std::vector<Tensor>{x, w, b}, saved));
  }
  return y;
}

std::string Epilogue::describe() const {
  switch (kind) {
    case Kind::None: return "";
    case Kind::Relu: return " + ReLU()";
    case Kind::ReluMaxPool:
      return " + MaxPool2d(kernel_size=" + std::to_string(pool_kernel) +
             ", stride=" + std::to_string(pool_stride == 0 ? pool_kernel : pool_stride) +
             ", padding=" + std::to_string(pool_padding) + ") + ReLU()";
  }
  return "";
}

}  // namespace nnlab
