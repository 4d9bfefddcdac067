// Convolution on CUDA through cuDNN's legacy API (cudnnConvolutionForward, BackwardData,
// BackwardFilter), the twin of devices/cpu/conv2d_cpu.cpp.
//
// x: (n, c, h, w)  w: (k, c, r, s)  y: (n, k, p, q), NCHW float32, dilation 1, one group.
//
// The descriptors are made once per geometry and kept in a ConvPlan. The algorithm for each
// direction is chosen once per geometry too, the first time that direction runs, by timing
// the candidates (cudnnFind*AlgorithmEx, which synchronises — once per shape, not per step)
// with a workspace from the caching allocator. The choice honours the math mode:
// - strict float32 (default): only algorithms running in CUDNN_FMA_MATH (no TF32);
// - set_cuda_math_mode(true): TF32 tensor cores allowed;
// - set_cuda_deterministic(true): only deterministic algorithms, never Winograd or FFT.
#include <algorithm>

#include "devices/conv_impl.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace cuda {
ConvPlan::~ConvPlan() {
  for (cudnnTensorDescriptor_t d : {x_desc, y_desc, bias_desc})
    if (d) cudnnDestroyTensorDescriptor(d);
  if (w_desc) cudnnDestroyFilterDescriptor(w_desc);
  for (cudnnConvolutionDescriptor_t d : {fwd_desc, bwd_data_desc, bwd_filter_desc})
    if (d) cudnnDestroyConvolutionDescriptor(d);
}
}  // namespace cuda

namespace {

// The most workspace an algorithm may use; faster algorithms that want more are skipped.
constexpr size_t kWorkspaceLimit = size_t(512) << 20;

void set_tensor(cudnnTensorDescriptor_t d, int64_t n, int64_t c, int64_t h, int64_t w) {
  NNLAB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(n), int(c), int(h), int(w)));
}

cudnnConvolutionDescriptor_t make_conv_desc(const Conv2dGeometry& g) {
  cudnnConvolutionDescriptor_t d = nullptr;
  NNLAB_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
  NNLAB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, int(g.pad_h), int(g.pad_w), int(g.stride_h), int(g.stride_w),
                                                    1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  NNLAB_CUDNN_CHECK(cudnnSetConvolutionMathType(d, cuda_math_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  return d;
}

cuda::ConvPlan& plan_for(cuda::Context& c, const Conv2dGeometry& g) {
  const cuda::ConvKey key{g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.stride_h, g.stride_w, g.pad_h, g.pad_w,
                          cuda_math_tf32() ? 1 : 0, cuda_deterministic() ? 1 : 0};
  auto it = c.conv_plans.find(key);
  if (it != c.conv_plans.end()) return *it->second;
  auto plan = std::make_unique<cuda::ConvPlan>();
  for (cudnnTensorDescriptor_t* d : {&plan->x_desc, &plan->y_desc, &plan->bias_desc})
    NNLAB_CUDNN_CHECK(cudnnCreateTensorDescriptor(d));
  set_tensor(plan->x_desc, g.n, g.c, g.h, g.w);
  set_tensor(plan->y_desc, g.n, g.k, g.p, g.q);
  set_tensor(plan->bias_desc, 1, g.k, 1, 1);
  NNLAB_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w_desc));
  NNLAB_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(plan->w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(g.k), int(g.c), int(g.r), int(g.s)));
  plan->fwd_desc = make_conv_desc(g);
  plan->bwd_data_desc = make_conv_desc(g);
  plan->bwd_filter_desc = make_conv_desc(g);
  int n = 0, k = 0, p = 0, q = 0;
  NNLAB_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->fwd_desc, plan->x_desc, plan->w_desc, &n, &k, &p, &q));
  NNLAB_CHECK(n == g.n && k == g.k && p == g.p && q == g.q, "conv2d on CUDA: cuDNN computes an output of (", n, ", ",
              k, ", ", p, ", ", q, ") where the geometry says (", g.n, ", ", g.k, ", ", g.p, ", ", g.q, ")");
  return *c.conv_plans.emplace(key, std::move(plan)).first->second;
}

bool is_winograd_or_fft(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING;
}
bool is_winograd_or_fft(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING;
}
bool is_winograd_or_fft(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING;
}

// The fastest timed candidate (cuDNN sorts them by time) that the math mode allows.
template <typename Perf>
const Perf& pick_algorithm(const Perf* perf, int count, size_t workspace, const char* direction,
                           const Conv2dGeometry& g) {
  const bool tf32 = cuda_math_tf32(), deterministic = cuda_deterministic();
  for (int i = 0; i < count; ++i) {
    const Perf& a = perf[i];
    if (a.status != CUDNN_STATUS_SUCCESS || a.memory > workspace) continue;
    // Strict: FMA math only. cuDNN may report a plain algorithm as DEFAULT_MATH; it is
    // accepted and then pinned to FMA math (see math_for), which rules TF32 out.
    if (!tf32 && a.mathType != CUDNN_FMA_MATH && a.mathType != CUDNN_DEFAULT_MATH) continue;
    if (deterministic && (a.determinism != CUDNN_DETERMINISTIC || is_winograd_or_fft(a.algo))) continue;
    return a;
  }
  fail("conv2d ", direction, " on CUDA: cuDNN offers no ", tf32 ? "" : "strict float32 (FMA) ",
       deterministic ? "deterministic " : "", "algorithm for x (", g.n, ", ", g.c, ", ", g.h, ", ", g.w, "), w (", g.k,
       ", ", g.c, ", ", g.r, ", ", g.s, "), stride (", g.stride_h, ", ", g.stride_w, "), pad (", g.pad_h, ", ", g.pad_w,
       ") within ", workspace >> 20, " MiB of workspace; try --math tf32 or without --deterministic");
}

template <typename Perf>
cudnnMathType_t math_for(const Perf& chosen) {
  return cuda_math_tf32() ? chosen.mathType : CUDNN_FMA_MATH;
}

// Workspace to time the candidates with: what the hungriest wants, within the limit.
template <typename SizeOf>
size_t trial_workspace(int algo_count, SizeOf size_of) {
  size_t most = 0;
  for (int a = 0; a < algo_count; ++a) {
    size_t bytes = 0;
    if (size_of(a, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kWorkspaceLimit) most = std::max(most, bytes);
  }
  return most;
}

void choose_forward(cuda::Context& c, cuda::ConvPlan& pl, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                    Tensor& y) {
  const size_t ws = trial_workspace(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, [&](int a, size_t* b) {
    return cudnnGetConvolutionForwardWorkspaceSize(c.cudnn, pl.x_desc, pl.w_desc, pl.fwd_desc, pl.y_desc,
                                                   cudnnConvolutionFwdAlgo_t(a), b);
  });
  cuda::Scratch scratch(*c.allocator, ws);
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  NNLAB_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
      c.cudnn, pl.x_desc, x.raw_data(), pl.w_desc, w.raw_data(), pl.fwd_desc, pl.y_desc, y.raw_data(),
      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf, scratch.as<void>(), ws));
  const auto& best = pick_algorithm(perf, count, ws, "forward", g);
  NNLAB_CUDNN_CHECK(cudnnSetConvolutionMathType(pl.fwd_desc, math_for(best)));
  pl.fwd_algo = best.algo;
  pl.fwd_workspace = best.memory;
  pl.have_fwd = true;
}

void choose_backward_data(cuda::Context& c, cuda::ConvPlan& pl, const Conv2dGeometry& g, const Tensor& dy,
                          const Tensor& w, Tensor& dx) {
  const size_t ws = trial_workspace(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, [&](int a, size_t* b) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(c.cudnn, pl.w_desc, pl.y_desc, pl.bwd_data_desc, pl.x_desc,
                                                        cudnnConvolutionBwdDataAlgo_t(a), b);
  });
  cuda::Scratch scratch(*c.allocator, ws);
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int count = 0;
  NNLAB_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
      c.cudnn, pl.w_desc, w.raw_data(), pl.y_desc, dy.raw_data(), pl.bwd_data_desc, pl.x_desc, dx.raw_data(),
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf, scratch.as<void>(), ws));
  const auto& best = pick_algorithm(perf, count, ws, "backward data", g);
  NNLAB_CUDNN_CHECK(cudnnSetConvolutionMathType(pl.bwd_data_desc, math_for(best)));
  pl.bwd_data_algo = best.algo;
  pl.bwd_data_workspace = best.memory;
  pl.have_bwd_data = true;
}

void choose_backward_filter(cuda::Context& c, cuda::ConvPlan& pl, const Conv2dGeometry& g, const Tensor& dy,
                            const Tensor& x, Tensor& dw) {
  const size_t ws = trial_workspace(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, [&](int a, size_t* b) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(c.cudnn, pl.x_desc, pl.y_desc, pl.bwd_filter_desc,
                                                          pl.w_desc, cudnnConvolutionBwdFilterAlgo_t(a), b);
  });
  cuda::Scratch scratch(*c.allocator, ws);
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int count = 0;
  NNLAB_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      c.cudnn, pl.x_desc, x.raw_data(), pl.y_desc, dy.raw_data(), pl.bwd_filter_desc, pl.w_desc, dw.raw_data(),
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf, scratch.as<void>(), ws));
  const auto& best = pick_algorithm(perf, count, ws, "backward filter", g);
  NNLAB_CUDNN_CHECK(cudnnSetConvolutionMathType(pl.bwd_filter_desc, math_for(best)));
  pl.bwd_filter_algo = best.algo;
  pl.bwd_filter_workspace = best.memory;
  pl.have_bwd_filter = true;
}

// Throws when the selected implementation is not one CUDA runs (im2col is the CPU's path).
bool use_reference() {
  check_conv_impl(conv_impl(), Device::cuda(0));
  return conv_impl() == ConvImpl::Reference;
}

// nnlab explain: "cudnnConvolutionForward algo=1 x 64×32×14×14 w 64×32×3×3"
void log_cudnn(const char* call, int algo, const Conv2dGeometry& g) {
  record_kernel(call, "algo=" + std::to_string(algo) + " x " + dims_text({g.n, g.c, g.h, g.w}) + " w " +
                          dims_text({g.k, g.c, g.r, g.s}) + " s" + std::to_string(g.stride_h) + " p" +
                          std::to_string(g.pad_h));
}

}  // namespace

// y = conv(x, w) (+ b broadcast over (n, ·, p, q))
void CudaBackend::conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                                 Tensor& y) {
  cuda::require_f32("conv2d_forward", x);
  cuda::Context& c = *ctx_;
  if (use_reference()) return cuda::conv2d_reference_forward(c, g, x, w, b, y);  // --conv-impl reference
  cuda::ConvPlan& pl = plan_for(c, g);
  if (!pl.have_fwd) choose_forward(c, pl, g, x, w, y);
  if (kernel_log_enabled()) log_cudnn("cudnnConvolutionForward", int(pl.fwd_algo), g);
  cuda::Scratch workspace(*c.allocator, pl.fwd_workspace);
  const float one = 1.0f, zero = 0.0f;
  NNLAB_CUDNN_CHECK(cudnnConvolutionForward(c.cudnn, &one, pl.x_desc, x.raw_data(), pl.w_desc, w.raw_data(),
                                            pl.fwd_desc, pl.fwd_algo, workspace.as<void>(), pl.fwd_workspace, &zero,
                                            pl.y_desc, y.raw_data()));
  if (b && b->defined())
    NNLAB_CUDNN_CHECK(cudnnAddTensor(c.cudnn, &one, pl.bias_desc, b->raw_data(), &one, pl.y_desc, y.raw_data()));
}

// dx = the transposed convolution of dy with w
void CudaBackend::conv2d_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  cuda::require_f32("conv2d_backward_data", dy);
  cuda::Context& c = *ctx_;
  if (use_reference()) return cuda::conv2d_reference_backward_data(c, g, dy, w, dx);  // --conv-impl reference
  cuda::ConvPlan& pl = plan_for(c, g);
  if (!pl.have_bwd_data) choose_backward_data(c, pl, g, dy, w, dx);
  if (kernel_log_enabled()) log_cudnn("cudnnConvolutionBackwardData", int(pl.bwd_data_algo), g);
  cuda::Scratch workspace(*c.allocator, pl.bwd_data_workspace);
  const float one = 1.0f, zero = 0.0f;
  NNLAB_CUDNN_CHECK(cudnnConvolutionBackwardData(c.cudnn, &one, pl.w_desc, w.raw_data(), pl.y_desc, dy.raw_data(),
                                                 pl.bwd_data_desc, pl.bwd_data_algo, workspace.as<void>(),
                                                 pl.bwd_data_workspace, &zero, pl.x_desc, dx.raw_data()));
}

// dw = Σ_n dy ⋆ x (correlation of each output-gradient plane with the input)
void CudaBackend::conv2d_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw) {
  cuda::require_f32("conv2d_backward_filter", dy);
  cuda::Context& c = *ctx_;
  if (use_reference()) return cuda::conv2d_reference_backward_filter(c, g, dy, x, dw);  // --conv-impl reference
  cuda::ConvPlan& pl = plan_for(c, g);
  if (!pl.have_bwd_filter) choose_backward_filter(c, pl, g, dy, x, dw);
  if (kernel_log_enabled()) log_cudnn("cudnnConvolutionBackwardFilter", int(pl.bwd_filter_algo), g);
  cuda::Scratch workspace(*c.allocator, pl.bwd_filter_workspace);
  const float one = 1.0f, zero = 0.0f;
  NNLAB_CUDNN_CHECK(cudnnConvolutionBackwardFilter(c.cudnn, &one, pl.x_desc, x.raw_data(), pl.y_desc, dy.raw_data(),
                                                   pl.bwd_filter_desc, pl.bwd_filter_algo, workspace.as<void>(),
                                                   pl.bwd_filter_workspace, &zero, pl.w_desc, dw.raw_data()));
}

}  // namespace nnlab
