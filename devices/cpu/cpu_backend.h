// The CPU backend: OpenBLAS for matrix products, plain loops (OpenMP where it pays) for the
// rest. Each kernel family lives in devices/cpu/<family>_cpu.cpp, beside its CUDA twin
// devices/cuda/<family>_cuda.cu. Kernels are templates over the dtype (float, double), so
// gradient checks in float64 run exactly the code that trains in float32.
#pragma once
#include "devices/backend.h"

namespace nnlab {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  std::string name() const override { return "CPU (OpenBLAS + OpenMP)"; }
  CachingAllocator& allocator() override;

  // memory_cpu.cpp
  void copy_from_host(Tensor& dst, const void* src) override;
  void copy_to_host(const Tensor& src, void* dst) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, double value) override;
  void cast(const Tensor& src, Tensor& dst) override;
  void gather_rows(const Tensor& rows, const Tensor& index, Tensor& out) override;
  void increment_counter(Tensor& counter) override;
  void gather_rows_at(const Tensor& rows, const Tensor& order, const Tensor& position, Tensor& out) override;
  void gather_images_at(const Tensor& rows, const Tensor& order, const Tensor& shifts, const Tensor& position,
                        const Tensor& mean_std, Tensor& out) override;
  void gather_images(const Tensor& rows, const Tensor& index, const Tensor& shifts, const Tensor& mean_std,
                     Tensor& out) override;

  // gemm_cpu.cpp
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
            const Tensor& b, double beta, Tensor& c) override;
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu) override;
  void linear_products(const Tensor& dz, const Tensor& x, const Tensor& w, Tensor* dx, Tensor* dw) override;

  // elementwise_cpu.cpp
  void binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) override;
  void binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                       Tensor* db) override;
  void unary_forward(UnaryOp op, const Tensor& x, Tensor& y) override;
  void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void axpby(double alpha, const Tensor& x, double beta, Tensor& y) override;

  // reduce_cpu.cpp
  void bias_forward(Tensor& y, const Tensor& b, int64_t inner) override;
  void bias_backward(const Tensor& dy, Tensor& db, int64_t inner) override;
  void relu_bias_backward(const Tensor& y, const Tensor& dy, Tensor& dz, Tensor* db, int64_t inner) override;
  void sum_all(const Tensor& x, double scale, Tensor& out) override;
  void sum_squares(const Tensor& x, Tensor& out) override;

  // softmax_xent_cpu.cpp
  void log_softmax_forward(const Tensor& x, Tensor& y) override;
  void log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void softmax_xent_forward(const Tensor& logits, const Tensor& labels, Tensor& probs, Tensor& loss,
                            Tensor* nonfinite_flag, NonFiniteMark mark) override;
  void softmax_xent_backward(const Tensor& probs, const Tensor& labels, const Tensor& dloss,
                             Tensor& dlogits) override;
  void count_correct(const Tensor& logits, const Tensor& labels, Tensor& correct) override;
  void check_finite(const Tensor& x, Tensor& flag, NonFiniteMark mark) override;
  void check_finite_all(const std::vector<Tensor>& xs, Tensor& flag, const std::vector<NonFiniteMark>& marks,
                        const Tensor* step_number) override;

  // optim_cpu.cpp
  void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& hp, bool first_step,
                const Tensor* skip_flag) override;
  void sgd_step_all(const std::vector<SgdSlot>& slots, const SgdParams& hp, Tensor* skip_flag) override;
  void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamParams& hp,
                 int64_t step, const Tensor* skip_flag) override;

  // conv2d_cpu.cpp: each call runs its plan (conv2d_plan.h)
  void conv2d_forward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& x, const Tensor& w,
                      const Tensor* b, Tensor& y, Tensor* argmax) override;
  void conv2d_backward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& dy, const Tensor& saved,
                       const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& db) override;

  // pool2d_cpu.cpp
  void maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax) override;
  void maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx) override;
  void avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y) override;
  void avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx) override;

  // batchnorm_cpu.cpp
  void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                               Tensor& running_var, double momentum, double eps, Tensor& y, Tensor& save_mean,
                               Tensor& save_invstd) override;
  void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                              const Tensor& running_var, double eps, Tensor& y) override;
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) override;

  // dropout_cpu.cpp
  void dropout_forward(const Tensor& x, double p, uint64_t seed, uint32_t stream, const Tensor* step_count, Tensor& y,
                       Tensor& mask) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx) override;
 protected:
  // conv2d_cpu.cpp
  void convolve(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& z) override;
  void convolve_backward_data(const Conv2dGeometry& g, const Tensor& dz, const Tensor& w, Tensor& dx) override;
  void convolve_backward_filter(const Conv2dGeometry& g, const Tensor& dz, const Tensor& x, Tensor& dw,
                                Tensor* db) override;
};

// conv2d_reference_cpu.cpp: the teaching convolution (direct loops), run by the conv2d
// kernels above when --conv-impl reference is selected (devices/conv_impl.h).
namespace cpu {
void conv2d_reference_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y);
void conv2d_reference_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx);
void conv2d_reference_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw);
}  // namespace cpu

}  // namespace nnlab
