// 2-D convolution (PyTorch's Conv2d: cross-correlation, dilation 1, one group): the
// forward op and its Backward node. The kernels are devices/cpu/conv2d_cpu.cpp (which picks
// Winograd, direct loops or im2col + GEMM per layer) and devices/cuda/conv2d_cuda.cu.
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/pool2d_geometry.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// y = W ⋆ x + b   ->   dx = col2im(Wᵀ · dy) ;  dW = dy · im2col(x)ᵀ ;  db = Σ_{n,p,q} dy
// Inputs are {x, w, b}; an absent bias is an undefined Tensor (autograd/node.h), so it gets
// no gradient, as in LinearBackward.
class Conv2dBackward : public Node {
 public:
  Conv2dBackward(const Conv2dGeometry& g, std::vector<Tensor> inputs) : Node(std::move(inputs)), g_(g) {}
  std::string name() const override { return "Conv2dBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor db;
    if (needs_grad(2)) db = Tensor::empty({g_.k}, dy.dtype(), dy.device());
    if (needs_grad(1) && needs_grad(2)) {
      // Both from one pass over dy where the backend can (the CPU's filter gradients).
      const Tensor& w = inputs()[1];
      Tensor dw = Tensor::empty(w.shape(), w.dtype(), w.device());
      backend_for(dy.device()).conv2d_backward_params(g_, dy, inputs()[0], dw, db);
      return {input_gradient(dy), dw, db};
    }
    if (needs_grad(2)) backend_for(dy.device()).bias_backward(dy, db, g_.p * g_.q);  // dy as (n, k, p·q)
    return {input_gradient(dy), filter_gradient(dy), db};
  }

 protected:
  // dx = col2im(Wᵀ · dy)  (undefined when x needs none)
  Tensor input_gradient(const Tensor& dy) const {
    if (!needs_grad(0)) return Tensor();
    const Tensor& x = inputs()[0];
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    backend_for(dy.device()).conv2d_backward_data(g_, dy, inputs()[1], dx);
    return dx;
  }
  // dW = dy · im2col(x)ᵀ  (undefined when W needs none)
  Tensor filter_gradient(const Tensor& dy) const {
    if (!needs_grad(1)) return Tensor();
    const Tensor& w = inputs()[1];
    Tensor dw = Tensor::empty(w.shape(), w.dtype(), w.device());
    backend_for(dy.device()).conv2d_backward_filter(g_, dy, inputs()[0], dw);
    return dw;
  }

  Conv2dGeometry g_;
};

// y = relu(z), z = W ⋆ x + b   ->   dz = dy·[y > 0] ;  dx = col2im(Wᵀ · dz) ;  dW = dz · im2col(x)ᵀ ;
//                                   db = Σ_{n,p,q} dz
// The mask and the bias gradient are one pass (Backend::relu_bias_backward); y > 0 exactly
// where z > 0, so z need not be kept.
class Conv2dReluBackward : public Conv2dBackward {
 public:
  Conv2dReluBackward(const Conv2dGeometry& g, std::vector<Tensor> inputs, const Tensor& y)
      : Conv2dBackward(g, std::move(inputs)), y_(y.detach()) {}
  std::string name() const override { return "Conv2dReluBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor db = needs_grad(2) ? Tensor::empty({g_.k}, dy.dtype(), dy.device()) : Tensor();
    Backend& be = backend_for(dy.device());
    if (!needs_grad(0) && needs_grad(1)) {
      // A first layer: dz feeds the filter gradient alone, so the backend may make it piece by
      // piece and never store it whole.
      const Tensor& w = inputs()[1];
      Tensor dw = Tensor::empty(w.shape(), w.dtype(), w.device());
      be.conv2d_relu_backward_params(g_, y_, dy, inputs()[0], dw, db.defined() ? &db : nullptr);
      return {Tensor(), dw, db};
    }
    Tensor dz = Tensor::empty(y_.shape(), y_.dtype(), y_.device());
    be.relu_bias_backward(y_, dy, dz, db.defined() ? &db : nullptr, g_.p * g_.q);
    return {input_gradient(dz), filter_gradient(dz), db};
  }

 protected:
  void release_saved() override { y_ = Tensor(); }

 private:
  Tensor y_;  // detached: saving y itself would make y → node → y a reference cycle
};

// y = relu(maxpool(z)), z = W ⋆ x + b   ->   dz = the pool's dy routed to each window's winner
// (maxpool2d_backward; argmax −1, no winner, where the ReLU zeroed the window); then dx, dW,
// db from dz as in Conv2dBackward. z itself is not kept: the winners are all the pool needs.
class Conv2dMaxPoolReluBackward : public Conv2dBackward {
 public:
  Conv2dMaxPoolReluBackward(const Conv2dGeometry& g, std::vector<Tensor> inputs, const Pool2dGeometry& pg,
                            const Tensor& argmax)
      : Conv2dBackward(g, std::move(inputs)), pg_(pg), argmax_(argmax) {}
  std::string name() const override { return "Conv2dMaxPool2dReluBackward"; }
  Shape hidden_output_shape() const override { return {g_.n, g_.k, g_.p, g_.q}; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Backend& be = backend_for(dy.device());
    if (needs_grad(1) && needs_grad(2)) {
      // The weights' and bias's gradients, and x's unless it needs none (a first layer), from
      // the pool's dy, without storing dz where the backend can (the CPU's Winograd and direct
      // kernels route each plane as they read it).
      const Tensor &x = inputs()[0], &w = inputs()[1];
      Tensor dx = needs_grad(0) ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
      Tensor dw = Tensor::empty(w.shape(), w.dtype(), w.device()), db = Tensor::empty({g_.k}, dy.dtype(), dy.device());
      be.conv2d_maxpool_relu_backward(g_, pg_, dy, argmax_, x, w, dx, dw, db);
      return {dx, dw, db};
    }
    Tensor dz = Tensor::empty({g_.n, g_.k, g_.p, g_.q}, dy.dtype(), dy.device());
    be.maxpool2d_backward(pg_, dy, argmax_, dz);
    return Conv2dBackward::backward(dz);
  }

 protected:
  void release_saved() override { argmax_ = Tensor(); }

 private:
  Pool2dGeometry pg_;
  Tensor argmax_;
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

// The convolution, with the ReLU after it fused when relu; both ops are this.
Tensor convolve(const char* op, const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride_h,
                int64_t stride_w, int64_t pad_h, int64_t pad_w, bool relu) {
  if (b.defined()) check_same_device(op, {&x, &w, &b});
  else check_same_device(op, {&x, &w});
  check_float(op, x);
  const Conv2dGeometry g = conv2d_geometry(x, w, b, stride_h, stride_w, pad_h, pad_w);
  Tensor y = Tensor::empty({g.n, g.k, g.p, g.q}, x.dtype(), x.device());
  Backend& be = backend_for(x.device());
  const Tensor* bias = b.defined() ? &b : nullptr;
  if (y.numel() > 0) relu ? be.conv2d_relu_forward(g, x, w, bias, y) : be.conv2d_forward(g, x, w, bias, y);
  if (needs_graph({&x, &w, &b})) {
    if (relu) attach(y, std::make_shared<Conv2dReluBackward>(g, std::vector<Tensor>{x, w, b}, y));
    else attach(y, std::make_shared<Conv2dBackward>(g, std::vector<Tensor>{x, w, b}));
  }
  return y;
}

}  // namespace

Tensor conv2d_max_pool2d_relu(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t padding,
                              int64_t pool_kernel, int64_t pool_stride, int64_t pool_padding) {
  const char* op = "conv2d_max_pool2d_relu";
  if (b.defined()) check_same_device(op, {&x, &w, &b});
  else check_same_device(op, {&x, &w});
  check_float(op, x);
  const Conv2dGeometry g = conv2d_geometry(x, w, b, stride, stride, padding, padding);
  Pool2dGeometry pg = pool2d_geometry(op, g.n, g.k, g.p, g.q,
                                      std::string("the convolution's output ") + dtype_name(x.dtype()) +
                                          shape_str({g.n, g.k, g.p, g.q}),
                                      pool_kernel, pool_stride, pool_padding);
  pg.relu = true;
  Tensor y = Tensor::empty({pg.n, pg.c, pg.p, pg.q}, x.dtype(), x.device());
  Tensor argmax = Tensor::empty(y.shape(), DType::Int32, x.device());
  const Tensor* bias = b.defined() ? &b : nullptr;
  if (y.numel() > 0) backend_for(x.device()).conv2d_maxpool_relu_forward(g, pg, x, w, bias, y, argmax);
  if (needs_graph({&x, &w, &b}))
    attach(y, std::make_shared<Conv2dMaxPoolReluBackward>(g, std::vector<Tensor>{x, w, b}, pg, argmax));
  return y;
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride_h, int64_t stride_w, int64_t pad_h,
              int64_t pad_w) {
  return convolve("conv2d", x, w, b, stride_h, stride_w, pad_h, pad_w, false);
}

Tensor conv2d_relu(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride_h, int64_t stride_w,
                   int64_t pad_h, int64_t pad_w) {
  return convolve("conv2d_relu", x, w, b, stride_h, stride_w, pad_h, pad_w, true);
}

}  // namespace nnlab
