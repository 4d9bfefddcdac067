// The differentiable ops. Each is defined in autograd/ops/<family>.cpp together with its
// Backward node: check the inputs, allocate the output, call the device's kernel, attach
// the node when a gradient is needed.
#pragma once
#include <cstdint>
#include <string>

#include "core/nonfinite.h"
#include "core/tensor.h"

namespace nnlab {

// ---- elementwise.cpp: a ∘ b with suffix broadcasting ----------------------------------
// The smaller operand's shape must be a suffix of the larger's (a row vector (d) over a
// batch (n, d), a scalar over anything); the result has the larger shape.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }

// ---- activation.cpp ---------------------------------------------------------------------
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);

// ---- epilogues: what conv2d and linear do to their output inside the same op ------------
// A ReLU after a Linear or Conv2d, or a max-pool and its ReLU after a Conv2d, fused into the
// op: the output is floored (and pooled) as the kernel writes it where the device can, and
// backward the ReLU's mask, the pool's routing and the bias gradient share one pass over dy.
// Values and gradients equal the separate ops' bit for bit on the CPU: max and relu commute,
// and the pool records "no winner" for a window the ReLU zeroes (Pool2dGeometry::relu).
// layers/fuse_epilogues.h finds these groups in a model.
struct Epilogue {
  enum class Kind { None, Relu, ReluMaxPool };
  Kind kind = Kind::None;
  int64_t pool_kernel = 0, pool_stride = 0, pool_padding = 0;  // ReluMaxPool; stride 0 = kernel

  static Epilogue relu() { return {Kind::Relu}; }
  static Epilogue relu_max_pool(int64_t kernel, int64_t stride = 0, int64_t padding = 0) {
    return {Kind::ReluMaxPool, kernel, stride, padding};
  }
  bool none() const { return kind == Kind::None; }
  // " + ReLU()", " + MaxPool2d(kernel_size=2, stride=2, padding=0) + ReLU()", "" for none
  std::string describe() const;
};

// ---- matmul.cpp -------------------------------------------------------------------------
// a: (m, k)  b: (k, n)  ->  (m, n)
Tensor matmul(const Tensor& a, const Tensor& b);
// x: (n, in)  w: (out, in)  b: (out) or undefined  ->  x · wᵀ + b: (n, out), then the epilogue
// (none or a ReLU; below).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const Epilogue& epilogue = {});

// ---- cast.cpp ---------------------------------------------------------------------------
// x in another float dtype (float32, float64 or bfloat16; rounded to nearest even where it
// narrows); x itself when it has that dtype already. The gradient comes back in x's dtype.
Tensor cast(const Tensor& x, DType dtype);
// cast(x, y.dtype()) where y already holds those values (made by Backend::cast_all with other
// tensors' casts in one call): y with cast's gradient, no kernel run.
Tensor cast_made(const Tensor& x, const Tensor& y);

// ---- reduce.cpp -------------------------------------------------------------------------
Tensor sum(const Tensor& x);   // scalar (shape [])
Tensor mean(const Tensor& x);  // scalar (shape [])

// ---- reshape.cpp ------------------------------------------------------------------------
// One extent may be -1 (inferred).
Tensor reshape(const Tensor& x, Shape shape);
// (n, d1, d2, ...) -> (n, d1·d2·...)
Tensor flatten(const Tensor& x);

// ---- softmax_xent.cpp -------------------------------------------------------------------
// x: (n, c) -> (n, c), log of the row-wise softmax
Tensor log_softmax(const Tensor& x);
// logits: (n, c)  labels: int32 (n)  ->  scalar mean of −log softmax(logits)[label].
// Fused and numerically stable. When nonfinite_flag (make_nonfinite_flag, on the logits'
// device) is given, the kernel raises it with `mark` if the loss is not finite and the flag is
// not raised yet; nothing synchronises here. bf16 logits give a float32 loss (the softmax in
// float32) and a bf16 gradient.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* nonfinite_flag = nullptr,
                     NonFiniteMark mark = {});
// Not differentiable: correct (int32 scalar) += number of rows whose argmax equals the label.
void accumulate_correct(const Tensor& logits, const Tensor& labels, Tensor& correct);

// ---- conv2d.cpp -------------------------------------------------------------------------
// x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or undefined  ->  (n, k, p, q) with
// p = (h + 2·pad_h − r) / stride_h + 1,  q = (w + 2·pad_w − s) / stride_w + 1  (PyTorch's Conv2d),
// then the epilogue: relu(·), or max_pool2d_relu(·, kernel, stride, padding), whose output is
// the op's (the convolution's own is then not kept: backward needs only the pool's winners).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride_h, int64_t stride_w, int64_t pad_h,
              int64_t pad_w, const Epilogue& epilogue = {});
inline Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride = 1, int64_t padding = 0,
                     const Epilogue& epilogue = {}) {
  return conv2d(x, w, b, stride, stride, padding, padding, epilogue);
}

// ---- pool2d.cpp -------------------------------------------------------------------------
// x: (n, c, h, w) -> (n, c, p, q), p = (h + 2·padding − kernel) / stride + 1 (floor), q alike.
// PyTorch's semantics: stride 0 means stride = kernel; padding ≤ kernel / 2; padded cells
// never win a max and count as zeros in an average (count_include_pad=True).
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
// relu(max_pool2d(x)) as one op: one pass over x forward and one over dx backward, where the
// pair takes two each (Sequential runs every ReLU next to a max-pool this way). The same
// values and gradients bit for bit: max and relu commute, and the fused kernel records "no
// winner" for a window the ReLU zeroes (Pool2dGeometry::relu).
Tensor max_pool2d_relu(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0);
// x: (n, c, h, w) -> (n, c, 1, 1), the mean of each plane (global average pooling).
Tensor adaptive_avg_pool2d_1x1(const Tensor& x);

// ---- batchnorm.cpp ----------------------------------------------------------------------
// x: (n, c, h, w)  gamma, beta, running_mean, running_var: (c)  ->  (n, c, h, w)
// training: normalise with the batch's mean and biased variance, then update running_mean
// and running_var in place with momentum (running_var from the unbiased variance), and
// differentiate through the batch statistics. Otherwise normalise with the running ones.
Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                    Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

// ---- dropout.cpp ------------------------------------------------------------------------
// Zeroes element i unless philox_u32(seed, Dropout, stream, i) ≥ ⌊p·2³²⌋, scales survivors
// by 1/(1 − p). The identity (x itself) when not training or p = 0. p in [0, 1).
// With step_count (int32 scalar on x's device), the stream is dropout_stream(stream, count)
// (core/philox.h), the count read on the device as the mask is drawn; it is not advanced here.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint32_t stream, bool training,
               const Tensor* step_count = nullptr);

// ---- numerics.cpp: finiteness checks (not differentiable) -------------------------------
// The non-finite flag (core/nonfinite.h): int32 {step, source} on `device`, {0, 0}.
Tensor make_nonfinite_flag(Device device);
// Throws, naming op, unless flag is a non-finite flag on `device` and mark.step ≥ 1.
void check_nonfinite_flag(const char* op, const Tensor& flag, Device device, NonFiniteMark mark);
// flag: a non-finite flag on x's device. When x holds a NaN or ±inf and the flag is not
// raised yet, stores mark (mark.step ≥ 1) in it; a raised flag is never changed. No read-back.
void raise_if_not_finite(const Tensor& x, Tensor& flag, NonFiniteMark mark = {});
// The same over a list, in one pass where the device can: flag = marks[i] for the first i whose
// tensor is not all finite (undefined or empty tensors are skipped).
// step_number (int32 scalar on the device, may be null): read there in place of the marks'
// step (Backend::check_finite_all), for a check recorded in a CUDA graph.
void raise_if_any_not_finite(const std::vector<Tensor>& xs, Tensor& flag, const std::vector<NonFiniteMark>& marks,
                             const Tensor* step_number = nullptr);
// Reads the flag back (synchronises): {0, 0} while it is not raised, else the first mark.
NonFiniteMark read_nonfinite_flag(const Tensor& flag);
// Whether every element of x is finite; reads the answer back (synchronises).
bool all_finite(const Tensor& x);

}  // namespace nnlab
