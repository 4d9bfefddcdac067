// Log-softmax and the fused softmax + cross-entropy on CUDA: one thread per row (class
// counts are small), exponents taken after subtracting the row maximum. The batch loss is
// reduced by one block in a fixed order (no float atomics), so it repeats bit for bit. A
// label outside [0, c) does not trap: it records a fault the host raises at its next
// read-back, and makes the loss NaN (which raises the non-finite flag).
#include <algorithm>

#include "devices/bf16_widening.h"
#include "devices/cuda/block_reduce.cuh"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// ---- kernels ----------------------------------------------------------------------------

// The non-finite flag (core/nonfinite.h): {step, source} of the first fault. Of the threads
// that find a bad value, the one whose compare-and-swap turns flag[0] from 0 into the step
// writes the source; every later one (this kernel's or a later kernel's) leaves the flag alone.
__device__ void raise_nonfinite_flag(int32_t* flag, NonFiniteMark mark) {
  if (atomicCAS(&flag[0], 0, mark.step) == 0) flag[1] = mark.source;
}

// Writes y = x − max − log Σ exp(x − max) for one row of c values (y may alias nothing), in
// float32 whether x is float32 or bf16.
template <typename T>
__device__ void log_softmax_row(const T* x, float* y, int64_t c) {
  float m = float(x[0]);
  for (int64_t j = 1; j < c; ++j) m = float(x[j]) > m ? float(x[j]) : m;
  float s = 0.0f;
  for (int64_t j = 0; j < c; ++j) s += expf(float(x[j]) - m);
  const float log_s = logf(s);
  for (int64_t j = 0; j < c; ++j) y[j] = float(x[j]) - m - log_s;
}

// x, y: (n, c)
__global__ void log_softmax_forward_kernel(const float* x, float* y, int64_t n, int64_t c) {
  NNLAB_GRID_STRIDE(i, n) log_softmax_row(x + i * c, y + i * c, c);
}

// y, dy, dx: (n, c)   dx = dy − exp(y) · Σ_j dy_j   per row
__global__ void log_softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t n, int64_t c) {
  NNLAB_GRID_STRIDE(i, n) {
    float s = 0.0f;
    for (int64_t j = 0; j < c; ++j) s += dy[i * c + j];
    for (int64_t j = 0; j < c; ++j) dx[i * c + j] = dy[i * c + j] - expf(y[i * c + j]) * s;
  }
}

// logits (float32 or bf16), probs: (n, c)  labels: (n)  row_loss: (n)
// row_loss[i] = −log softmax(logits[i])[label_i];  probs = softmax(logits), float32
template <typename T>
__global__ void softmax_xent_rows_kernel(const T* x, const int32_t* labels, float* p, float* row_loss, int64_t n,
                                         int64_t c, int32_t* fault) {
  NNLAB_GRID_STRIDE(i, n) {
    float* pr = p + i * c;
    log_softmax_row(x + i * c, pr, c);  // log-probabilities first ...
    const int32_t label = labels[i];
    if (label >= 0 && label < c) {
      row_loss[i] = -pr[label];
    } else {
      row_loss[i] = __int_as_float(0x7fc00000);  // NaN: the loss of a bad batch is not a number
      if (atomicCAS(&fault[0], 0, static_cast<int32_t>(cuda::DeviceFault::LabelOutOfRange)) == 0) {
        fault[1] = label;
        fault[2] = static_cast<int32_t>(i);
        fault[3] = static_cast<int32_t>(c);
      }
    }
    for (int64_t j = 0; j < c; ++j) pr[j] = expf(pr[j]);  // ... then probabilities
  }
}

// row_loss: (n)  loss: scalar   loss = (Σ row_loss in double) / n, one block; raises the
// non-finite flag (may be null) with mark if the loss is not finite.
__global__ void xent_mean_kernel(const float* row_loss, int64_t n, float* loss, int32_t* flag, NonFiniteMark mark) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += row_loss[i];
  s = cuda::block_sum(s);
  if (threadIdx.x == 0) {
    const float l = static_cast<float>(s / static_cast<double>(n));
    *loss = l;
    if (flag && !isfinite(l)) raise_nonfinite_flag(flag, mark);
  }
}

// probs, dlogits: (n, c)  labels: (n)  dloss: scalar   dlogits = dloss · (probs − onehot) / n,
// computed in float32 and stored in the logits' dtype (bf16: rounded once)
template <typename T>
__global__ void softmax_xent_backward_kernel(const float* p, const int32_t* labels, const float* dloss, T* dx,
                                             int64_t n, int64_t c) {
  const float scale = *dloss / static_cast<float>(n);
  NNLAB_GRID_STRIDE(e, n * c) {
    const int64_t i = e / c, j = e % c;
    dx[e] = T(scale * (p[e] - (j == labels[i] ? 1.0f : 0.0f)));
  }
}

// logits: (n, c)  labels: (n)  correct: int32 scalar
// correct += #{i : argmax(logits[i]) == label_i}  (first maximum wins, as torch.argmax).
// Integer atomics are exact, so the count is deterministic.
__global__ void count_correct_kernel(const float* x, const int32_t* labels, int64_t n, int64_t c, int32_t* correct) {
  int32_t hits = 0;
  NNLAB_GRID_STRIDE(i, n) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (x[i * c + j] > x[i * c + best]) best = j;
    hits += best == labels[i];
  }
  hits = cuda::block_sum(hits);
  if (threadIdx.x == 0 && hits) atomicAdd(correct, hits);
}

// x: (n)  flag: int32 (2)   flag = {mark.step, mark.source} if flag[0] == 0 and any x is NaN or ±inf
__global__ void check_finite_kernel(const float* x, int64_t n, int32_t* flag, NonFiniteMark mark) {
  NNLAB_GRID_STRIDE(i, n) {
    if (!isfinite(x[i])) raise_nonfinite_flag(flag, mark);
  }
}

// Up to kListTensors tensors checked by one launch: blockIdx.y picks the tensor, the blocks
// along x stride over its elements. Passed by value (1 KB of kernel parameters).
constexpr int kListTensors = 32;
struct FiniteList {
  const float* x[kListTensors];
  int64_t n[kListTensors];
  NonFiniteMark mark[kListTensors];
  int count;
};

// first: int32, all bits 0x7f beforehand   first = min { t : x_t holds a NaN or ±inf }
__global__ void find_first_nonfinite_kernel(FiniteList list, int32_t* first) {
  const int t = static_cast<int>(blockIdx.y);
  const float* x = list.x[t];
  NNLAB_GRID_STRIDE(i, list.n[t]) {
    if (!isfinite(x[i])) {
      atomicMin(first, t);
      return;
    }
  }
}

// flag = list.mark[first] if a tensor was bad and the flag is not raised yet: the first bad
// tensor in list order names the fault, whichever thread found its NaN first. Then first is
// reset to all bits 0x7f for the next check.
__global__ void raise_first_mark_kernel(FiniteList list, int32_t* first, int32_t* flag, const int32_t* step_number) {
  if (threadIdx.x != 0) return;
  if (*first < list.count) {
    NonFiniteMark mark = list.mark[*first];
    if (step_number) mark.step = *step_number;  // read now: a graph's replay names its own step
    raise_nonfinite_flag(flag, mark);
  }
  *first = 0x7f7f7f7f;
}

int64_t rows_of(const Tensor& t) { return t.ndim() ? t.dim(0) : 1; }
int64_t cols_of(const Tensor& t) { return t.numel() / (rows_of(t) ? rows_of(t) : 1); }

}  // namespace

// ---- launchers --------------------------------------------------------------------------

void CudaBackend::log_softmax_forward(const Tensor& x, Tensor& y) {
  NNLAB_LOG_KERNEL("log_softmax_forward", x);  // nnlab explain: record the call
  cuda::require_f32("log_softmax_forward", x);
  const int64_t n = rows_of(x), c = cols_of(x);
  if (!n || !c) return;
  cuda::launch("log_softmax_forward_kernel", log_softmax_forward_kernel, cuda::grid_for(*ctx_, n), cuda::kThreads,
               ctx_->stream, cuda::ptr<float>(x), cuda::ptr<float>(y), n, c);
}

void CudaBackend::log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  NNLAB_LOG_KERNEL("log_softmax_backward", y);  // nnlab explain: record the call
  cuda::require_f32("log_softmax_backward", y);
  const int64_t n = rows_of(y), c = cols_of(y);
  if (!n || !c) return;
  cuda::launch("log_softmax_backward_kernel", log_softmax_backward_kernel, cuda::grid_for(*ctx_, n), cuda::kThreads,
               ctx_->stream, cuda::ptr<float>(y), cuda::ptr<float>(dy), cuda::ptr<float>(dx), n, c);
}

void CudaBackend::softmax_xent_forward(const Tensor& logits, const Tensor& labels, Tensor& probs, Tensor& loss,
                                       Tensor* nonfinite_flag, NonFiniteMark mark) {
  NNLAB_LOG_KERNEL("softmax_xent_forward", logits);  // nnlab explain: record the call
  const bool bf16_logits = logits.dtype() == DType::BFloat16;  // a bf16 model's: read as they are
  if (!bf16_logits) cuda::require_f32("softmax_xent_forward", logits);
  cuda::require_f32("softmax_xent_forward (probabilities)", probs);
  cuda::require_f32("softmax_xent_forward (loss)", loss);
  check_dtype("softmax_xent_forward", labels, DType::Int32);
  const int64_t n = logits.dim(0), c = logits.dim(1);
  NNLAB_CHECK(n > 0 && c > 0, "cross_entropy: empty logits ", logits.describe());
  cuda::Context& ctx = *ctx_;
  cuda::Scratch row_loss(*ctx.allocator, static_cast<size_t>(n) * sizeof(float));
  const auto rows = [&](auto* x, auto kernel) {
    cuda::launch("softmax_xent_rows_kernel", kernel, cuda::grid_for(ctx, n), cuda::kThreads, ctx.stream, x,
                 cuda::ptr<int32_t>(labels), cuda::ptr<float>(probs), row_loss.as<float>(), n, c, ctx.fault_device);
  };
  if (bf16_logits) rows(cuda::ptr<BFloat16>(logits), softmax_xent_rows_kernel<BFloat16>);
  else rows(cuda::ptr<float>(logits), softmax_xent_rows_kernel<float>);
  int32_t* flag = nonfinite_flag && nonfinite_flag->defined() ? cuda::ptr<int32_t>(*nonfinite_flag) : nullptr;
  cuda::launch("xent_mean_kernel", xent_mean_kernel, 1, cuda::kThreads, ctx.stream, row_loss.as<float>(), n,
               cuda::ptr<float>(loss), flag, mark);
}

void CudaBackend::softmax_xent_backward(const Tensor& probs, const Tensor& labels, const Tensor& dloss,
                                        Tensor& dlogits) {
  NNLAB_LOG_KERNEL("softmax_xent_backward", probs);  // nnlab explain: record the call
  cuda::require_f32("softmax_xent_backward", probs);
  const bool bf16_logits = dlogits.dtype() == DType::BFloat16;
  if (!bf16_logits) cuda::require_f32("softmax_xent_backward (logits' gradient)", dlogits);
  const int64_t n = probs.dim(0), c = probs.dim(1);
  if (!n || !c) return;
  const auto launch = [&](auto* dx, auto kernel) {
    cuda::launch("softmax_xent_backward_kernel", kernel, cuda::grid_for(*ctx_, n * c), cuda::kThreads, ctx_->stream,
                 cuda::ptr<float>(probs), cuda::ptr<int32_t>(labels), cuda::ptr<float>(dloss), dx, n, c);
  };
  if (bf16_logits) launch(cuda::ptr<BFloat16>(dlogits), softmax_xent_backward_kernel<BFloat16>);
  else launch(cuda::ptr<float>(dlogits), softmax_xent_backward_kernel<float>);
}

void CudaBackend::count_correct(const Tensor& logits, const Tensor& labels, Tensor& correct) {
  NNLAB_LOG_KERNEL("count_correct", logits);  // nnlab explain: record the call
  cuda::require_f32("count_correct", logits);
  check_dtype("count_correct", correct, DType::Int32);
  const int64_t n = logits.dim(0), c = logits.dim(1);
  if (!n || !c) return;
  cuda::launch("count_correct_kernel", count_correct_kernel, cuda::grid_for(*ctx_, n), cuda::kThreads, ctx_->stream,
               cuda::ptr<float>(logits), cuda::ptr<int32_t>(labels), n, c, cuda::ptr<int32_t>(correct));
}

// Two launches per 32 tensors (the scan, the mark) instead of one per tensor.
void CudaBackend::check_finite_all(const std::vector<Tensor>& xs, Tensor& flag,
                                   const std::vector<NonFiniteMark>& marks, const Tensor* step_number) {
  NNLAB_CHECK(xs.size() == marks.size(), "check_finite_all: ", xs.size(), " tensors but ", marks.size(), " marks");
  check_dtype("check_finite_all", flag, DType::Int32);
  if (step_number) check_device_counter("check_finite_all", "step number", *step_number, device());
  if (xs.size() == 1 && !step_number) return check_finite(xs[0], flag, marks[0]);  // one launch, not three
  cuda::Context& c = *ctx_;
  for (size_t from = 0; from < xs.size(); from += kListTensors) {
    FiniteList list{};
    int64_t most = 0;
    for (size_t i = from; i < xs.size() && i < from + kListTensors; ++i) {
      NNLAB_LOG_KERNEL("check_finite", xs[i]);  // nnlab explain: one record per tensor, as before
      cuda::require_f32("check_finite_all", xs[i]);
      list.x[list.count] = cuda::ptr<float>(xs[i]);
      list.n[list.count] = xs[i].numel();
      list.mark[list.count++] = marks[i];
      most = std::max(most, xs[i].numel());
    }
    if (!most) continue;
    const dim3 grid(std::min<unsigned>(cuda::grid_for(c, most), 1024), static_cast<unsigned>(list.count));
    cuda::launch("find_first_nonfinite_kernel", find_first_nonfinite_kernel, grid, cuda::kThreads, c.stream, list,
                 c.first_nonfinite);
    cuda::launch("raise_first_mark_kernel", raise_first_mark_kernel, 1, 32, c.stream, list, c.first_nonfinite,
                 cuda::ptr<int32_t>(flag), step_number ? cuda::ptr<int32_t>(*step_number) : nullptr);
  }
}

void CudaBackend::check_finite(const Tensor& x, Tensor& flag, NonFiniteMark mark) {
  if (bf16::widened(*this, &CudaBackend::check_finite, x, flag, mark)) return;
  NNLAB_LOG_KERNEL("check_finite", x);  // nnlab explain: record the call
  cuda::require_f32("check_finite", x);
  check_dtype("check_finite", flag, DType::Int32);
  if (!x.numel()) return;
  cuda::launch("check_finite_kernel", check_finite_kernel, cuda::grid_for(*ctx_, x.numel()), cuda::kThreads,
               ctx_->stream, cuda::ptr<float>(x), x.numel(), cuda::ptr<int32_t>(flag), mark);
}

}  // namespace nnlab
