// Batch normalisation over the channels of an (n, c, h, w) batch, float32 or float64, or bf16
// activations with float32 parameters and statistics. In training the batch's
// own statistics normalise it (so the gradient flows through them) and the running
// statistics are updated in place; in evaluation the running statistics normalise it (so
// each channel is a fixed affine map).
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

// x̂ = (x − mean_B) · invstd_B,  y = γ·x̂ + β   ->
//   dβ = Σ dy ;  dγ = Σ dy·x̂ ;  dx = γ·invstd_B·(dy − dβ/m − x̂·dγ/m)   (m = n·h·w)
class BatchNormBackward : public Node {
 public:
  BatchNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& save_mean,
                    const Tensor& save_invstd)
      : Node({x, gamma, beta}), save_mean_(save_mean), save_invstd_(save_invstd) {}
  std::string name() const override { return "BatchNormBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& x = inputs()[0];
    const Tensor& gamma = inputs()[1];
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    Tensor dgamma = Tensor::empty(gamma.shape(), gamma.dtype(), gamma.device());
    Tensor dbeta = Tensor::empty(gamma.shape(), gamma.dtype(), gamma.device());
    backend_for(x.device()).batchnorm_backward(x, dy, gamma, save_mean_, save_invstd_, dx, dgamma, dbeta);
    return {needs_grad(0) ? dx : Tensor(), needs_grad(1) ? dgamma : Tensor(), needs_grad(2) ? dbeta : Tensor()};
  }

 protected:
  void release_saved() override { save_mean_ = save_invstd_ = Tensor(); }

 private:
  Tensor save_mean_, save_invstd_;
};

// x̂ = (x − μ) / √(σ² + eps),  y = γ·x̂ + β  with fixed running μ, σ²   ->
//   dx = γ·dy / √(σ² + eps) ;  dγ = Σ dy·x̂ ;  dβ = Σ dy
// No kernel of its own: dx is the eval kernel applied to dy with mean 0 and β = 0; x̂ is the
// eval kernel with γ = 1, β = 0; the channel sums are the bias-gradient kernel.
class BatchNormEvalBackward : public Node {
 public:
  BatchNormEvalBackward(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                        const Tensor& running_var, double eps)
      : Node({x, gamma, beta}), mean_(running_mean.clone()), var_(running_var.clone()), eps_(eps) {}
  std::string name() const override { return "BatchNormEvalBackward"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    const Tensor& x = inputs()[0];
    const Tensor& gamma = inputs()[1];
    Backend& be = backend_for(x.device());
    const int64_t inner = x.dim(2) * x.dim(3);  // (n, c, h, w); never numel / (n·c), which n = 0 breaks
    const Tensor zeros = Tensor::zeros(gamma.shape(), gamma.dtype(), gamma.device());
    Tensor dx, dgamma, dbeta;
    if (needs_grad(0)) {
      dx = Tensor::empty(x.shape(), x.dtype(), x.device());
      be.batchnorm_forward_eval(dy, gamma, zeros, zeros, var_, eps_, dx);
    }
    if (needs_grad(1)) {
      const Tensor ones = Tensor::full(gamma.shape(), 1.0, gamma.dtype(), gamma.device());
      Tensor xhat = Tensor::empty(x.shape(), x.dtype(), x.device());
      be.batchnorm_forward_eval(x, ones, zeros, mean_, var_, eps_, xhat);
      Tensor dy_xhat = Tensor::empty(x.shape(), x.dtype(), x.device());
      be.binary_forward(BinaryOp::Mul, dy, xhat, dy_xhat);
      dgamma = Tensor::empty(gamma.shape(), gamma.dtype(), gamma.device());
      be.bias_backward(dy_xhat, dgamma, inner);
    }
    if (needs_grad(2)) {
      dbeta = Tensor::empty(gamma.shape(), gamma.dtype(), gamma.device());
      be.bias_backward(dy, dbeta, inner);
    }
    return {dx, dgamma, dbeta};
  }

 protected:
  void release_saved() override { mean_ = var_ = Tensor(); }

 private:
  Tensor mean_, var_;  // copies: a later training step must not change this graph's maths
  double eps_;
};

void check_inputs(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training) {
  check_same_device("batch_norm2d", {&x, &gamma, &beta, &running_mean, &running_var});
  check_float("batch_norm2d", x);
  NNLAB_CHECK(x.ndim() == 4, "batch_norm2d: expected an (n, c, h, w) input, got ", x.describe());
  const int64_t c = x.dim(1);
  // The parameters and statistics are x's dtype, or float32 for bf16 activations (mixed
  // precision: the statistics are sums of many values, which bf16's 8 bits would lose).
  const DType param_dtype = x.dtype() == DType::BFloat16 ? DType::Float32 : x.dtype();
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var})
    NNLAB_CHECK(t->ndim() == 1 && t->dim(0) == c && t->dtype() == param_dtype, "batch_norm2d: input ",
                x.describe(), " has ", c, " channels but a parameter or running statistic is ", t->describe(),
                " (want ", dtype_name(param_dtype), ")");
  NNLAB_CHECK(c > 0, "batch_norm2d: the input ", x.describe(), " has no channels");
  NNLAB_CHECK(!training || x.dim(0) * x.dim(2) * x.dim(3) > 1, "batch_norm2d: training needs more than one value per channel, got ",
              x.describe(), " (use a larger batch or call eval())");
}

}  // namespace

Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                    Tensor& running_var, bool training, double momentum, double eps) {
  check_inputs(x, gamma, beta, running_mean, running_var, training);
  NNLAB_CHECK(momentum >= 0 && momentum <= 1 && eps > 0, "batch_norm2d: need momentum in [0, 1] and eps > 0, got ",
              momentum, " and ", eps);
  Backend& be = backend_for(x.device());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (training) {
    Tensor save_mean = Tensor::empty(gamma.shape(), gamma.dtype(), x.device());
    Tensor save_invstd = Tensor::empty(gamma.shape(), gamma.dtype(), x.device());
    be.batchnorm_forward_train(x, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean, save_invstd);
    if (needs_graph({&x, &gamma, &beta}))
      attach(y, std::make_shared<BatchNormBackward>(x, gamma, beta, save_mean, save_invstd));
  } else {
    be.batchnorm_forward_eval(x, gamma, beta, running_mean, running_var, eps, y);
    if (needs_graph({&x, &gamma, &beta}))
      attach(y, std::make_shared<BatchNormEvalBackward>(x, gamma, beta, running_mean, running_var, eps));
  }
  return y;
}

}  // namespace nnlab
