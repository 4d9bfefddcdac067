// Convolution on CUDA through cuDNN's legacy API (cudnnConvolutionForward, BackwardData,
// BackwardFilter), the twin of devices/cpu/conv2d_cpu.cpp.
//
// x: (n, c, h, w)  w: (k, c, r, s)  y: (n, k, p, q), NCHW, dilation 1, one group; float32, or
// bf16 throughout (cuDNN's PSEUDO_BFLOAT16: bf16 tensors, float32 sums, tensor cores allowed).
//
// The descriptors are made once per geometry and kept in a ConvPlan. The algorithm for each
// direction is chosen once per geometry too, the first time that direction runs, by timing
// the candidates (cudnnFind*AlgorithmEx, which synchronises — once per shape, not per step)
// with a workspace from the caching allocator. The choice honours the math mode:
// - strict float32 (default): only algorithms running in CUDNN_FMA_MATH (no TF32);
// - set_cuda_math_mode(true): TF32 tensor cores allowed;
// - set_cuda_deterministic(true): only deterministic algorithms, never Winograd or FFT.
#include <algorithm>
#include <vector>

#include "devices/bf16_widening.h"
#include "devices/conv_impl.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/conv2d_algorithm_pick.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace cuda {
ConvPlan::~ConvPlan() {
  for (cudnnTensorDescriptor_t d : {x_desc, y_desc, bias_desc})
    if (d) cudnnDestroyTensorDescriptor(d);
  if (w_desc) cudnnDestroyFilterDescriptor(w_desc);
  if (relu_desc) cudnnDestroyActivationDescriptor(relu_desc);
  for (cudnnConvolutionDescriptor_t d : {fwd_desc, bwd_data_desc, bwd_filter_desc})
    if (d) cudnnDestroyConvolutionDescriptor(d);
}
}  // namespace cuda

namespace {

// The most workspace an algorithm may use; faster algorithms that want more are skipped.
constexpr size_t kWorkspaceLimit = size_t(512) << 20;

cudnnDataType_t cudnn_type(bool bf16) { return bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }

void set_tensor(cudnnTensorDescriptor_t d, bool bf16, int64_t n, int64_t c, int64_t h, int64_t w) {
  NNLAB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, cudnn_type(bf16), int(n), int(c), int(h), int(w)));
}

// Tensor cores: for bf16 data always (that is what bf16 is for), for float32 only as TF32,
// when the math mode allows it.
bool tensor_cores(const cuda::ConvPlan& p) { return p.bf16 || cuda_math_tf32(); }

// The compute type is float32 for both data types: bf16 products summed in float32.
cudnnConvolutionDescriptor_t make_conv_desc(const Conv2dGeometry& g, const cuda::ConvPlan& p) {
  cudnnConvolutionDescriptor_t d = nullptr;
  NNLAB_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
  NNLAB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, int(g.pad_h), int(g.pad_w), int(g.stride_h), int(g.stride_w),
                                                    1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  NNLAB_CUDNN_CHECK(cudnnSetConvolutionMathType(d, tensor_cores(p) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  return d;
}

cuda::ConvPlan& plan_for(cuda::Context& c, const Conv2dGeometry& g, bool bf16) {
  const cuda::ConvKey key{g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.stride_h, g.stride_w, g.pad_h, g.pad_w,
                          cuda_math_tf32() ? 1 : 0, cuda_deterministic() ? 1 : 0, bf16 ? 1 : 0};
  auto it = c.conv_plans.find(key);
  if (it != c.conv_plans.end()) return *it->second;
  auto plan = std::make_unique<cuda::ConvPlan>();
  plan->bf16 = bf16;
  for (cudnnTensorDescriptor_t* d : {&plan->x_desc, &plan->y_desc, &plan->bias_desc})
    NNLAB_CUDNN_CHECK(cudnnCreateTensorDescriptor(d));
  set_tensor(plan->x_desc, bf16, g.n, g.c, g.h, g.w);
  set_tensor(plan->y_desc, bf16, g.n, g.k, g.p, g.q);
  set_tensor(plan->bias_desc, bf16, 1, g.k, 1, 1);
  NNLAB_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w_desc));
  NNLAB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w_desc, cudnn_type(bf16), CUDNN_TENSOR_NCHW, int(g.k), int(g.c),
                                               int(g.r), int(g.s)));
  plan->fwd_desc = make_conv_desc(g, *plan);
  plan->bwd_data_desc = make_conv_desc(g, *plan);
  plan->bwd_filter_desc = make_conv_desc(g, *plan);
  int n = 0, k = 0, p = 0, q = 0;
  NNLAB_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->fwd_desc, plan->x_desc, plan->w_desc, &n, &k, &p, &q));
  NNLAB_CHECK(n == g.n && k == g.k && p == g.p && q == g.q, "conv2d on CUDA: cuDNN computes an output of (", n, ", ",
              k, ", ", p, ", ", q, ") where the geometry says (", g.n, ", ", g.k, ", ", g.p, ", ", g.q, ")");
  return *c.conv_plans.emplace(key, std::move(plan)).first->second;
}

template <typename Perf>
cudnnMathType_t math_for(const cuda::ConvPlan& p, const Perf& chosen) {
  return tensor_cores(p) ? chosen.mathType : CUDNN_FMA_MATH;
}

// The three directions differ only in which descriptors and buffers each cuDNN call takes;
// these describe that, so one choose_algorithm serves all three.
struct ForwardDirection {
  using Algo = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr const char* name = "forward";
  static constexpr int algo_count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static cudnnConvolutionDescriptor_t desc(const cuda::ConvPlan& p) { return p.fwd_desc; }
  static cudnnStatus_t max_results(cudnnHandle_t h, int* n) { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n); }
  static cudnnStatus_t workspace(cudnnHandle_t h, const cuda::ConvPlan& p, int a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, p.x_desc, p.w_desc, p.fwd_desc, p.y_desc, Algo(a), bytes);
  }
  // in0 = x, in1 = w, out = y
  static cudnnStatus_t find(cudnnHandle_t h, const cuda::ConvPlan& p, const void* in0, const void* in1, void* out,
                            int requested, int* count, Perf* perf, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionForwardAlgorithmEx(h, p.x_desc, in0, p.w_desc, in1, p.fwd_desc, p.y_desc, out,
                                                  requested, count, perf, ws, ws_bytes);
  }
  static cudnnStatus_t heuristic(cudnnHandle_t h, const cuda::ConvPlan& p, int requested, int* count, Perf* perf) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, p.x_desc, p.w_desc, p.fwd_desc, p.y_desc, requested, count,
                                                  perf);
  }
  static void keep(cuda::ConvPlan& p, const Perf& best) {
    p.fwd_algo = best.algo, p.fwd_workspace = best.memory, p.have_fwd = true;
  }
};

struct BackwardDataDirection {
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr const char* name = "backward data";
  static constexpr int algo_count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static cudnnConvolutionDescriptor_t desc(const cuda::ConvPlan& p) { return p.bwd_data_desc; }
  static cudnnStatus_t max_results(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const cuda::ConvPlan& p, int a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w_desc, p.y_desc, p.bwd_data_desc, p.x_desc, Algo(a),
                                                        bytes);
  }
  // in0 = w, in1 = dy, out = dx
  static cudnnStatus_t find(cudnnHandle_t h, const cuda::ConvPlan& p, const void* in0, const void* in1, void* out,
                            int requested, int* count, Perf* perf, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w_desc, in0, p.y_desc, in1, p.bwd_data_desc, p.x_desc,
                                                       out, requested, count, perf, ws, ws_bytes);
  }
  static cudnnStatus_t heuristic(cudnnHandle_t h, const cuda::ConvPlan& p, int requested, int* count, Perf* perf) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w_desc, p.y_desc, p.bwd_data_desc, p.x_desc, requested,
                                                       count, perf);
  }
  static void keep(cuda::ConvPlan& p, const Perf& best) {
    p.bwd_data_algo = best.algo, p.bwd_data_workspace = best.memory, p.have_bwd_data = true;
  }
};

struct BackwardFilterDirection {
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr const char* name = "backward filter";
  static constexpr int algo_count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static cudnnConvolutionDescriptor_t desc(const cuda::ConvPlan& p) { return p.bwd_filter_desc; }
  static cudnnStatus_t max_results(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const cuda::ConvPlan& p, int a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x_desc, p.y_desc, p.bwd_filter_desc, p.w_desc, Algo(a),
                                                          bytes);
  }
  // in0 = x, in1 = dy, out = dw
  static cudnnStatus_t find(cudnnHandle_t h, const cuda::ConvPlan& p, const void* in0, const void* in1, void* out,
                            int requested, int* count, Perf* perf, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p.x_desc, in0, p.y_desc, in1, p.bwd_filter_desc, p.w_desc,
                                                         out, requested, count, perf, ws, ws_bytes);
  }
  static cudnnStatus_t heuristic(cudnnHandle_t h, const cuda::ConvPlan& p, int requested, int* count, Perf* perf) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x_desc, p.y_desc, p.bwd_filter_desc, p.w_desc,
                                                         requested, count, perf);
  }
  static void keep(cuda::ConvPlan& p, const Perf& best) {
    p.bwd_filter_algo = best.algo, p.bwd_filter_workspace = best.memory, p.have_bwd_filter = true;
  }
};

// Chooses once for this geometry, and keeps the fastest candidate the math mode allows.
// Normally the candidates are timed (cudnnFind*AlgorithmEx), with the workspace the hungriest
// wants within the limit. Timings vary from run to run, and so may the winner, whose sums
// differ in the last bit from another's: --deterministic asks cuDNN's heuristics instead
// (cudnnGet*Algorithm_v7), which rank by the geometry alone, so every run takes the same
// algorithms and repeats bit for bit. Both return (algorithm, math type) pairs, so the
// request is sized by cuDNN's own maximum count, not by the number of algorithms.
template <typename Direction>
void choose_algorithm(cuda::Context& c, cuda::ConvPlan& pl, const Conv2dGeometry& g, const Tensor& in0,
                      const Tensor& in1, Tensor& out) {
  int requested = 0, count = 0;
  NNLAB_CUDNN_CHECK(Direction::max_results(c.cudnn, &requested));
  std::vector<typename Direction::Perf> perf(static_cast<size_t>(std::max(requested, 1)));
  size_t ws = kWorkspaceLimit;
  if (cuda_deterministic()) {
    NNLAB_CUDNN_CHECK(Direction::heuristic(c.cudnn, pl, requested, &count, perf.data()));
  } else {
    ws = 0;
    for (int a = 0; a < Direction::algo_count; ++a) {
      size_t bytes = 0;
      if (Direction::workspace(c.cudnn, pl, a, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kWorkspaceLimit)
        ws = std::max(ws, bytes);
    }
    cuda::Scratch scratch(*c.allocator, ws);
    NNLAB_CUDNN_CHECK(Direction::find(c.cudnn, pl, in0.raw_data(), in1.raw_data(), out.raw_data(), requested, &count,
                                      perf.data(), scratch.as<void>(), ws));
  }
  const auto& best =
      cuda::pick_algorithm(perf.data(), count, ws, tensor_cores(pl), cuda_deterministic(), Direction::name, g);
  NNLAB_CUDNN_CHECK(cudnnSetConvolutionMathType(Direction::desc(pl), math_for(pl, best)));
  Direction::keep(pl, best);
}

// Throws when the selected implementation is not one CUDA runs on the tensor's device.
bool use_reference(const Tensor& x) {
  check_conv_impl(conv_impl(), x.device());
  return conv_impl() == ConvImpl::Reference;
}

// --conv-impl auto on a shallow layer with a ReLU (and max-pool) epilogue: nnlab's direct
// kernels (conv2d_direct_cuda.cu) instead of cuDNN's.
bool use_direct(const Tensor& x, const Conv2dGeometry& g, const ConvEpilogue& e) {
  check_conv_impl(conv_impl(), x.device());
  return conv_impl() == ConvImpl::Auto && cuda::direct_applies(g, e);
}

// nnlab explain: "cudnnConvolutionForward algo=1 x 64×32×14×14 w 64×32×3×3 s1 p1" (" bf16" after it
// for bf16 data)
size_t log_cudnn(const char* call, const cuda::ConvPlan& p, int algo, const Conv2dGeometry& g) {
  return record_kernel(call, "algo=" + std::to_string(algo) + " x " + dims_text({g.n, g.c, g.h, g.w}) + " w " +
                                 dims_text({g.k, g.c, g.r, g.s}) + " s" + std::to_string(g.stride_h) + " p" +
                                 std::to_string(g.pad_h) + (p.bf16 ? " bf16" : ""));
}

// cuDNN runs a convolution on these operands itself: all float32, or all bf16 (the present
// ones); the reference kernels are float32 only. Anything else is widened (bf16_widening.h).
bool cudnn_takes(std::initializer_list<const Tensor*> operands) {
  bool f32 = true;
  for (const Tensor* t : operands)
    if (t && t->defined() && t->dtype() != DType::Float32) f32 = false;
  return f32 || (bf16::all(operands) && conv_impl() != ConvImpl::Reference);
}

bool is_bf16(const Tensor& t) { return t.dtype() == DType::BFloat16; }

// y = max(0, conv(x, w) + b) in one cuDNN call, where cuDNN runs it for the plan's forward
// algorithm: true when queued. The first call per geometry finds out (and is not logged); a
// NOT_SUPPORTED answer queues nothing, and the caller runs the separate calls from then on.
bool convolve_bias_relu(cuda::Context& c, const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b,
                        Tensor& y) {
  cuda::ConvPlan& pl = plan_for(c, g, false);
  if (pl.fused_relu_tried && !pl.fused_relu_runs) return false;
  if (!pl.have_fwd) choose_algorithm<ForwardDirection>(c, pl, g, x, w, y);
  if (!pl.relu_desc) {
    NNLAB_CUDNN_CHECK(cudnnCreateActivationDescriptor(&pl.relu_desc));
    // NaN → 0, as nnlab's ReLU kernels do (v > 0 ? v : 0)
    NNLAB_CUDNN_CHECK(cudnnSetActivationDescriptor(pl.relu_desc, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  cuda::Scratch workspace(*c.allocator, pl.fwd_workspace);
  const float one = 1.0f, zero = 0.0f;
  const auto run = [&] {  // alpha2 = 0: z (given as y) is not read
    return cudnnConvolutionBiasActivationForward(c.cudnn, &one, pl.x_desc, x.raw_data(), pl.w_desc, w.raw_data(),
                                                 pl.fwd_desc, pl.fwd_algo, workspace.as<void>(), pl.fwd_workspace,
                                                 &zero, pl.y_desc, y.raw_data(), pl.bias_desc, b.raw_data(),
                                                 pl.relu_desc, pl.y_desc, y.raw_data());
  };
  if (!pl.fused_relu_tried) {
    const cudnnStatus_t st = run();
    pl.fused_relu_tried = true;
    pl.fused_relu_runs = st == CUDNN_STATUS_SUCCESS;
    if (st != CUDNN_STATUS_NOT_SUPPORTED) NNLAB_CUDNN_CHECK(st);
    return pl.fused_relu_runs;
  }
  KernelTiming timing(kernel_log_enabled()
                          ? log_cudnn("cudnnConvolutionBiasActivationForward", pl, int(pl.fwd_algo), g)
                          : kNotRecorded);
  NNLAB_CUDNN_CHECK(run());
  return true;
}

}  // namespace

// A shallow layer (at most 32 taps, stride 1) with a ReLU or ReLU + max-pool epilogue: nnlab's
// direct kernels (use_direct). Otherwise, with a ReLU epilogue and a bias: one fused cuDNN call
// where cuDNN runs it (convolve_bias_relu). With a max-pool (and ReLU) epilogue and a bias: the bias is added after the
// pool, by the pool's kernel (maxpool2d_bias_forward: max(z + b) = max(z) + b for a bias that
// is constant over each window), so the convolution's output is written once, by cuDNN, and
// neither read nor written again by cudnnAddTensor. The rest is Backend::conv2d_forward's.
// bf16 takes Backend::conv2d_forward's separate steps: the direct kernels and the fused call
// are float32, and the bias goes into cuDNN's sum (convolve), not after the pool.
void CudaBackend::conv2d_forward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& x, const Tensor& w,
                                 const Tensor* b, Tensor& y, Tensor* argmax) {
  if (!cudnn_takes({&x, &w, b, &y}) && bf16::widened(*this, &CudaBackend::conv2d_forward, g, e, x, w, b, y, argmax))
    return;
  if (is_bf16(x)) return Backend::conv2d_forward(g, e, x, w, b, y, argmax);
  const bool bias = b && b->defined();
  if (use_direct(x, g, e)) {
    cuda::require_f32("conv2d_forward", x);
    NNLAB_CHECK(argmax || e.kind != ConvEpilogue::Kind::ReluMaxPool,
                "conv2d_forward: a max-pool epilogue needs its argmax tensor");
    return cuda::conv2d_direct_forward(*ctx_, g, e, x, w, bias ? b : nullptr, y, argmax);
  }
  if (e.kind == ConvEpilogue::Kind::Relu && bias && !use_reference(x)) {
    cuda::require_f32("conv2d_forward", x);
    if (convolve_bias_relu(*ctx_, g, x, w, *b, y)) return;
  }
  if (e.kind != ConvEpilogue::Kind::ReluMaxPool || !bias || use_reference(x))
    return Backend::conv2d_forward(g, e, x, w, b, y, argmax);
  NNLAB_CHECK(argmax, "conv2d_forward: a max-pool epilogue needs its argmax tensor");
  Tensor z = Tensor::empty({g.n, g.k, g.p, g.q}, x.dtype(), x.device());
  convolve(g, x, w, nullptr, z);
  maxpool2d_bias_forward(e.pool, z, b, y, *argmax);
}

// A shallow first layer with a ReLU (and max-pool) epilogue, no dx wanted: its filter gradient
// and bias straight from dy and the epilogue's saved tensor, one kernel and its final sums; the
// convolution's gradient dz is never stored. The rest (and all of bf16) is
// Backend::conv2d_backward's.
void CudaBackend::conv2d_backward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& dy,
                                  const Tensor& saved, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                                  Tensor& db) {
  const Tensor* saved_activation = e.kind == ConvEpilogue::Kind::ReluMaxPool ? nullptr : &saved;  // else int32 argmax
  if (!cudnn_takes({&dy, saved_activation, &x, &w, &dx, &dw, &db}) &&
      bf16::widened(*this, &CudaBackend::conv2d_backward, g, e, dy, saved, x, w, dx, dw, db))
    return;
  if (is_bf16(dy)) return Backend::conv2d_backward(g, e, dy, saved, x, w, dx, dw, db);
  if (!dx.defined() && dw.defined() && use_direct(dy, g, e)) {
    cuda::require_f32("conv2d_backward", dy);
    return cuda::conv2d_direct_backward_filter(*ctx_, g, e, dy, saved, x, dw, db.defined() ? &db : nullptr);
  }
  Backend::conv2d_backward(g, e, dy, saved, x, w, dx, dw, db);
}

// y = conv(x, w) (+ b broadcast over (n, ·, p, q))
// In bf16 the bias enters cuDNN's own sum: y is set to b first and the call computes
// y = conv + 1·y in float32, rounding once, as the CPU's widened kernel does. Adding b after a
// bf16 convolution would round the product first, off by up to a bf16 step of the product
// where the bias nearly cancels it.
void CudaBackend::convolve(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  if (!cudnn_takes({&x, &w, b, &y}) && bf16::widened(*this, &CudaBackend::convolve, g, x, w, b, y)) return;
  const bool bf16 = is_bf16(x), bias = b && b->defined();
  if (!bf16) cuda::require_f32("conv2d_forward", x);
  cuda::Context& c = *ctx_;
  if (use_reference(x)) return cuda::conv2d_reference_forward(c, g, x, w, b, y);  // --conv-impl reference
  cuda::ConvPlan& pl = plan_for(c, g, bf16);
  if (!pl.have_fwd) choose_algorithm<ForwardDirection>(c, pl, g, x, w, y);
  const bool bias_in_sum = bias && bf16;
  if (bias_in_sum) cuda::bias_broadcast(c, y, *b, g.p * g.q);
  KernelTiming timing(kernel_log_enabled() ? log_cudnn("cudnnConvolutionForward", pl, int(pl.fwd_algo), g)
                                           : kNotRecorded);
  cuda::Scratch workspace(*c.allocator, pl.fwd_workspace);
  const float one = 1.0f, zero = 0.0f;
  NNLAB_CUDNN_CHECK(cudnnConvolutionForward(c.cudnn, &one, pl.x_desc, x.raw_data(), pl.w_desc, w.raw_data(),
                                            pl.fwd_desc, pl.fwd_algo, workspace.as<void>(), pl.fwd_workspace,
                                            bias_in_sum ? &one : &zero, pl.y_desc, y.raw_data()));
  if (bias && !bf16)
    NNLAB_CUDNN_CHECK(cudnnAddTensor(c.cudnn, &one, pl.bias_desc, b->raw_data(), &one, pl.y_desc, y.raw_data()));
}

// dx = the transposed convolution of dy with w
void CudaBackend::convolve_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  if (!cudnn_takes({&dy, &w, &dx}) && bf16::widened(*this, &CudaBackend::convolve_backward_data, g, dy, w, dx)) return;
  const bool bf16 = is_bf16(dy);
  if (!bf16) cuda::require_f32("conv2d_backward_data", dy);
  cuda::Context& c = *ctx_;
  if (use_reference(dy)) return cuda::conv2d_reference_backward_data(c, g, dy, w, dx);  // --conv-impl reference
  cuda::ConvPlan& pl = plan_for(c, g, bf16);
  if (!pl.have_bwd_data) choose_algorithm<BackwardDataDirection>(c, pl, g, w, dy, dx);
  KernelTiming timing(kernel_log_enabled()
                          ? log_cudnn("cudnnConvolutionBackwardData", pl, int(pl.bwd_data_algo), g)
                          : kNotRecorded);
  cuda::Scratch workspace(*c.allocator, pl.bwd_data_workspace);
  const float one = 1.0f, zero = 0.0f;
  NNLAB_CUDNN_CHECK(cudnnConvolutionBackwardData(c.cudnn, &one, pl.w_desc, w.raw_data(), pl.y_desc, dy.raw_data(),
                                                 pl.bwd_data_desc, pl.bwd_data_algo, workspace.as<void>(),
                                                 pl.bwd_data_workspace, &zero, pl.x_desc, dx.raw_data()));
}

// dw = Σ_n dy ⋆ x (correlation of each output-gradient plane with the input); with db, then
// db = Σ_{n,p,q} dy (bias_backward)
void CudaBackend::convolve_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw,
                                           Tensor* db) {
  if (!cudnn_takes({&dy, &x, &dw, db}) &&
      bf16::widened(*this, &CudaBackend::convolve_backward_filter, g, dy, x, dw, db))
    return;
  const bool bf16 = is_bf16(dy);
  if (!bf16) cuda::require_f32("conv2d_backward_filter", dy);
  cuda::Context& c = *ctx_;
  if (use_reference(dy)) {
    cuda::conv2d_reference_backward_filter(c, g, dy, x, dw);  // --conv-impl reference
  } else {
    cuda::ConvPlan& pl = plan_for(c, g, bf16);
    if (!pl.have_bwd_filter) choose_algorithm<BackwardFilterDirection>(c, pl, g, x, dy, dw);
    KernelTiming timing(kernel_log_enabled()
                            ? log_cudnn("cudnnConvolutionBackwardFilter", pl, int(pl.bwd_filter_algo), g)
                            : kNotRecorded);
    cuda::Scratch workspace(*c.allocator, pl.bwd_filter_workspace);
    const float one = 1.0f, zero = 0.0f;
    NNLAB_CUDNN_CHECK(cudnnConvolutionBackwardFilter(c.cudnn, &one, pl.x_desc, x.raw_data(), pl.y_desc, dy.raw_data(),
                                                     pl.bwd_filter_desc, pl.bwd_filter_algo, workspace.as<void>(),
                                                     pl.bwd_filter_workspace, &zero, pl.w_desc, dw.raw_data()));
  }
  if (db) bias_backward(dy, *db, g.p * g.q);
}

}  // namespace nnlab
