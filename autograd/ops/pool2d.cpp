// Pooling: max and average over square windows, and global average pooling. Each op checks
// the geometry, runs the device's kernel and attaches the node that routes dy back to the
// window cells.
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/pool2d_geometry.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// y[i, j] = x[argmax[i, j]]   ->   dx[argmax[i, j]] += dy[i, j]   (0 elsewhere)
// With the fused ReLU, y[i, j] = relu(max) and argmax is −1 where that is 0: no cell gets dy.
class MaxPool2dBackward : public Node {
 public:
  MaxPool2dBackward(const Tensor& x, const Pool2dGeometry& g, const Tensor& argmax)
      : Node({x}), g_(g), argmax_(argmax) {}
  std::string name() const override { return g_.relu ? "MaxPool2dReluBackward" : "MaxPool2dBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& x = inputs()[0];
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    backend_for(x.device()).maxpool2d_backward(g_, dy, argmax_, dx);
    return {dx};
  }

 protected:
  void release_saved() override { argmax_ = Tensor(); }

 private:
  Pool2dGeometry g_;
  Tensor argmax_;
};

// y[i, j] = Σ_window x / |window|   ->   dx[r, s] = Σ_{windows ∋ (r, s)} dy[i, j] / |window|
class AvgPool2dBackward : public Node {
 public:
  AvgPool2dBackward(const Tensor& x, const Pool2dGeometry& g, const char* name) : Node({x}), g_(g), name_(name) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& x = inputs()[0];
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    backend_for(x.device()).avgpool2d_backward(g_, dy, dx);
    return {dx};
  }

 private:
  Pool2dGeometry g_;
  const char* name_;
};

Pool2dGeometry pool_geometry(const char* op, const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  check_float(op, x);
  NNLAB_CHECK(x.ndim() == 4, op, ": expected an (n, c, h, w) input, got ", x.describe());
  return pool2d_geometry(op, x.dim(0), x.dim(1), x.dim(2), x.dim(3), x.describe(), kernel, stride, padding);
}

Tensor avg_pool_with(const Tensor& x, const Pool2dGeometry& g, const char* node_name) {
  Tensor y = Tensor::empty({g.n, g.c, g.p, g.q}, x.dtype(), x.device());
  backend_for(x.device()).avgpool2d_forward(g, x, y);
  if (needs_graph({&x})) attach(y, std::make_shared<AvgPool2dBackward>(x, g, node_name));
  return y;
}

Tensor max_pool_with(const Tensor& x, const Pool2dGeometry& g) {
  Tensor y = Tensor::empty({g.n, g.c, g.p, g.q}, x.dtype(), x.device());
  Tensor argmax = Tensor::empty({g.n, g.c, g.p, g.q}, DType::Int32, x.device());
  backend_for(x.device()).maxpool2d_forward(g, x, y, argmax);
  if (needs_graph({&x})) attach(y, std::make_shared<MaxPool2dBackward>(x, g, argmax));
  return y;
}

}  // namespace

Pool2dGeometry pool2d_geometry(const char* op, int64_t n, int64_t c, int64_t h, int64_t w, const std::string& x_text,
                               int64_t kernel, int64_t stride, int64_t padding) {
  if (stride == 0) stride = kernel;
  NNLAB_CHECK(kernel > 0 && stride > 0 && padding >= 0, op, ": kernel ", kernel, ", stride ", stride,
              " and padding ", padding, " must be positive (padding may be 0)");
  NNLAB_CHECK(2 * padding <= kernel, op, ": padding ", padding, " is more than half the kernel ", kernel,
              " (PyTorch's rule: a window must hold at least one input cell)");
  Pool2dGeometry g{n, c, h, w, kernel, kernel, stride, stride, padding, padding, 0, 0};
  g.p = (g.h + 2 * padding - kernel) / stride + 1;
  g.q = (g.w + 2 * padding - kernel) / stride + 1;
  NNLAB_CHECK(g.h + 2 * padding >= kernel && g.w + 2 * padding >= kernel, op, ": a ", kernel, "×", kernel,
              " window with padding ", padding, " does not fit input ", x_text,
              "; use a smaller kernel or a larger image");
  return g;
}

Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  return max_pool_with(x, pool_geometry("max_pool2d", x, kernel, stride, padding));
}

Tensor max_pool2d_relu(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  Pool2dGeometry g = pool_geometry("max_pool2d_relu", x, kernel, stride, padding);
  g.relu = true;
  return max_pool_with(x, g);
}

Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  return avg_pool_with(x, pool_geometry("avg_pool2d", x, kernel, stride, padding), "AvgPool2dBackward");
}

// Global average pooling is an average pool whose one window is the whole h × w plane
// (kernel = input size, stride = input size, no padding): the same maths, so it reuses the
// avgpool kernels (and, on CUDA, their cuDNN pooling twin) instead of a kernel of its own.
// Every window holds h·w real cells, so the divisor is exactly h·w.
Tensor adaptive_avg_pool2d_1x1(const Tensor& x) {
  check_float("adaptive_avg_pool2d", x);
  NNLAB_CHECK(x.ndim() == 4 && x.dim(2) > 0 && x.dim(3) > 0, "adaptive_avg_pool2d: expected an (n, c, h, w) input, got ",
              x.describe());
  const Pool2dGeometry g{x.dim(0), x.dim(1), x.dim(2), x.dim(3), x.dim(2), x.dim(3), x.dim(2), x.dim(3), 0, 0, 1, 1};
  return avg_pool_with(x, g, "AdaptiveAvgPool2dBackward");
}

}  // namespace nnlab
