// The differentiable ops. Each is defined in autograd/ops/<family>.cpp together with its
// Backward node: check the inputs, allocate the output, call the device's kernel, attach
// the node when a gradient is needed.
#pragma once
#include <cstdint>

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

// ---- matmul.cpp -------------------------------------------------------------------------
// a: (m, k)  b: (k, n)  ->  (m, n)
Tensor matmul(const Tensor& a, const Tensor& b);
// x: (n, in)  w: (out, in)  b: (out) or undefined  ->  x · wᵀ + b: (n, out)
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);

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
// Fused and numerically stable. When nonfinite_flag (int32 scalar on the logits' device) is
// given, the kernel raises it if the loss is not finite; nothing synchronises here.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* nonfinite_flag = nullptr);

}  // namespace nnlab
