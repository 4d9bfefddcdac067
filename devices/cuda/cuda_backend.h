// The CUDA backend: the kernel table of devices/backend.h on cuBLAS (GEMM, or with
// --gemm-impl nnlab's own GEMM kernels: devices/gemm_impl.h), cuDNN
// (convolution) and nnlab's own kernels (everything else). Each kernel family lives in
// devices/cuda/<family>_cuda.cu beside its CPU twin devices/cpu/<family>_cpu.cpp.
//
// This header needs no CUDA headers, so the CLI and the tests can include it with a plain
// C++ compiler; the stream, the cuBLAS and cuDNN handles and the convolution plans live in
// cuda::Context (devices/cuda/cuda_context.h), which only the backend's own files see.
//
// Float32 only: the CUDA kernels reject float64 with a clear error (gradient checks in
// float64 run on the CPU). Strict float32 by default: no TF32 in cuBLAS or cuDNN, cuDNN
// FMA math; set_cuda_math_mode(TF32 or bf16) opts into tensor cores as an explicit, recorded choice.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "devices/backend.h"

namespace nnlab {

// Whether CUDA can be used here and, if not, why — one of: no driver, driver too old for
// the runtime nnlab was built with, no GPU, or the error cudaGetDeviceCount gave. Never
// crashes without a driver or a GPU.
CudaStatus cuda_probe();
// The backend of CUDA device `index` (created on first use, never destroyed: tensors may
// outlive static destructors). Throws when the device cannot be used.
Backend& cuda_backend(int index);
// One paragraph per GPU (name, memory, compute capability, driver, runtime, cuBLAS and
// cuDNN versions), or the reason no GPU is usable; for `nnlab devices` and run records.
std::string cuda_device_report();

// Math modes, process-wide: mode is a CudaMath (devices/backend.h); fp32, the default, is
// strict float32.
void set_cuda_math_mode(int mode);
int cuda_math_mode();
bool cuda_math_tf32();  // TF32 or bf16: tensor cores allowed (cuDNN's convolutions in TF32)
bool cuda_math_bf16();  // bf16: cuBLAS and cuBLASLt's products on bf16 tensor cores
// true: cuDNN only deterministic algorithms, never Winograd or FFT, chosen by cuDNN's
// heuristics instead of by timing, so a run repeats bit for bit and matches the CPU's
// direct/im2col arithmetic as closely as float32 allows.
void set_cuda_deterministic(bool on);
bool cuda_deterministic();

// out: uint32 words as int32 (n)   out[i] = philox_u32(seed, purpose, stream, first + i),
// computed on out's CUDA device (the host/device bit-equality test uses it).
void philox_fill_u32_cuda(Tensor& out, uint64_t seed, uint32_t purpose, uint32_t stream, uint64_t first);

namespace cuda {
struct Context;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index);
  ~CudaBackend() override;
  std::string name() const override;
  std::string bf16_obstacle() const override;
  CachingAllocator& allocator() override { return *allocator_; }
  void synchronize() override;
  cuda::Context& context() { return *ctx_; }
  // graph_cuda.cpp
  std::unique_ptr<StepGraph> capture(const std::function<void()>& work) override;
  bool device_counts(DeviceCounts* counts) const override;
  std::unique_ptr<DeviceTimeline> timeline() override;

  // memory_cuda.cu
  void copy_from_host(Tensor& dst, const void* src) override;
  void copy_to_host(const Tensor& src, void* dst) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, double value) override;
  void cast(const Tensor& src, Tensor& dst) override;
  void cast_all(const std::vector<Tensor>& src, std::vector<Tensor>& dst) override;
  void gather_rows(const Tensor& rows, const Tensor& index, Tensor& out) override;
  void increment_counter(Tensor& counter) override;
  void gather_rows_at(const Tensor& rows, const Tensor& order, const Tensor& position, Tensor& out) override;
  void gather_images_at(const Tensor& rows, const Tensor& order, const Tensor& shifts, const Tensor& position,
                        const Tensor& mean_std, Tensor& out) override;
  void gather_images(const Tensor& rows, const Tensor& index, const Tensor& shifts, const Tensor& mean_std,
                     Tensor& out) override;

  // gemm_cuda.cu
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
            const Tensor& b, double beta, Tensor& c) override;
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu) override;
  void linear_backward(const Tensor& dy, const Tensor* relu_output, const Tensor& x, const Tensor& w, Tensor* dx,
                       Tensor* dw, Tensor* db) override;

  // elementwise_cuda.cu
  void binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) override;
  void binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                       Tensor* db) override;
  void unary_forward(UnaryOp op, const Tensor& x, Tensor& y) override;
  void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void axpby(double alpha, const Tensor& x, double beta, Tensor& y) override;

  // reduce_cuda.cu
  void bias_forward(Tensor& y, const Tensor& b, int64_t inner) override;
  void bias_backward(const Tensor& dy, Tensor& db, int64_t inner) override;
  void relu_bias_backward(const Tensor& y, const Tensor& dy, Tensor& dz, Tensor* db, int64_t inner) override;
  void sum_all(const Tensor& x, double scale, Tensor& out) override;
  void sum_squares(const Tensor& x, Tensor& out) override;

  // softmax_xent_cuda.cu
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

  // optim_cuda.cu
  void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& hp, bool first_step,
                const Tensor* skip_flag) override;
  void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamParams& hp,
                 int64_t step, const Tensor* skip_flag) override;
  void sgd_step_all(const std::vector<SgdSlot>& slots, const SgdParams& hp, Tensor* skip_flag) override;
  void adam_step_all(const std::vector<AdamSlot>& slots, const AdamParams& hp, const Tensor* skip_flag) override;

  // conv2d_cuda.cu: with a ReLU epilogue one fused cuDNN call; with a max-pool epilogue, the
  // bias is added by the pool's kernel; a shallow layer with either epilogue runs nnlab's
  // direct kernels (conv2d_direct_cuda.cu), and a first one's filter gradient too
  void conv2d_forward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& x, const Tensor& w,
                      const Tensor* b, Tensor& y, Tensor* argmax) override;
  void conv2d_backward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& dy, const Tensor& saved,
                       const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, Tensor& db) override;

  // pool2d_cuda.cu
  void maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax) override;
  // The same with a per-channel bias (c values, or null) added to each window's maximum.
  void maxpool2d_bias_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor* bias, Tensor& y,
                              Tensor& argmax);
  void maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx) override;
  void avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y) override;
  void avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx) override;

  // batchnorm_cuda.cu
  void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                               Tensor& running_var, double momentum, double eps, Tensor& y, Tensor& save_mean,
                               Tensor& save_invstd) override;
  void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              const Tensor& running_mean, const Tensor& running_var, double eps,
                              Tensor& y) override;
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) override;

  // dropout_cuda.cu
  void dropout_forward(const Tensor& x, double p, uint64_t seed, uint32_t stream, const Tensor* step_count, Tensor& y,
                       Tensor& mask) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx) override;

 private:
  // gemm_cuda.cu: gemm on bf16 A and B
  void gemm_bf16_storage(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                         const Tensor& b, double beta, Tensor& c);
  // gemm_cuda.cu: linear_forward on bf16 x, w, b and y
  void linear_forward_bf16(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu);

  std::unique_ptr<CachingAllocator> allocator_;
  std::unique_ptr<cuda::Context> ctx_;
 protected:
  // conv2d_cuda.cu: cuDNN (or the reference kernels); the epilogues are nnlab's own kernels.
  void convolve(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& z) override;
  void convolve_backward_data(const Conv2dGeometry& g, const Tensor& dz, const Tensor& w, Tensor& dx) override;
  void convolve_backward_filter(const Conv2dGeometry& g, const Tensor& dz, const Tensor& x, Tensor& dw,
                                Tensor* db) override;
};

}  // namespace nnlab
