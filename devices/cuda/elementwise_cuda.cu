// Elementwise kernels on CUDA: binary ops with suffix broadcasting, activations, axpby.
// One thread per element; the twin of devices/cpu/elementwise_cpu.cpp.
#include <initializer_list>

#include "devices/bf16_widening.h"
#include "devices/cuda/cuda_backend.h"
#include "devices/cuda/cuda_context.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

__device__ __forceinline__ float apply_binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
  }
  return 0.0f;
}

// ∂(a op b)/∂a and ∂(a op b)/∂b at one element.
__device__ __forceinline__ void binary_partials(BinaryOp op, float a, float b, float& da, float& db) {
  switch (op) {
    case BinaryOp::Add: da = 1.0f; db = 1.0f; return;
    case BinaryOp::Sub: da = 1.0f; db = -1.0f; return;
    case BinaryOp::Mul: da = b; db = a; return;
    case BinaryOp::Div: da = 1.0f / b; db = -a / (b * b); return;
  }
}

// ---- kernels ----------------------------------------------------------------------------

// Element i of an operand of `count` elements broadcast over n: i % count. A full operand
// (count = n) skips the modulo, a 64-bit division that costs a GPU dozens of instructions per
// element (a residual connection's add is all full operands).
__device__ __forceinline__ int64_t operand_at(int64_t i, int64_t count) { return i < count ? i : i % count; }

// The binary kernels take T = float32, or bf16 (loaded as float, computed in float, each
// output rounded once as it is stored, as the CPU's widened kernels round theirs).

// y: (n)  a: (na)  b: (nb), na and nb divide n     y[i] = a[i % na] op b[i % nb]
template <typename T>
__global__ void binary_forward_kernel(BinaryOp op, const T* a, int64_t na, const T* b, int64_t nb, T* y, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) y[i] = T(apply_binary(op, float(a[operand_at(i, na)]), float(b[operand_at(i, nb)])));
}

// dy: (n)  full operands' gradients: (n)     da[i] = dy[i]·∂a,  db[i] = dy[i]·∂b
template <typename T>
__global__ void binary_backward_full_kernel(BinaryOp op, const T* a, int64_t na, const T* b, int64_t nb, const T* dy,
                                            T* da, T* db, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) {
    float pa = 0.0f, pb = 0.0f;
    binary_partials(op, float(a[operand_at(i, na)]), float(b[operand_at(i, nb)]), pa, pb);
    if (da) da[i] = T(float(dy[i]) * pa);
    if (db) db[i] = T(float(dy[i]) * pb);
  }
}

// dy: (outer, inner)  broadcast operands' gradients: (inner)
// ds[j] = Σ_o dy[o, j]·∂(o, j): one thread per j sums its column in row order (no atomics,
// the same order as the CPU, so results repeat bit for bit).
template <typename T>
__global__ void binary_backward_reduce_kernel(BinaryOp op, const T* a, int64_t na, const T* b, int64_t nb,
                                              const T* dy, T* da, T* db, int64_t outer, int64_t inner) {
  NNLAB_GRID_STRIDE(j, inner) {
    float sa = 0.0f, sb = 0.0f;
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t i = o * inner + j;
      float pa = 0.0f, pb = 0.0f;
      binary_partials(op, float(a[operand_at(i, na)]), float(b[operand_at(i, nb)]), pa, pb);
      sa += float(dy[i]) * pa;
      sb += float(dy[i]) * pb;
    }
    if (da) da[j] = T(sa);
    if (db) db[j] = T(sb);
  }
}

// x, y: (n), float32 or bf16 (loaded as float, computed in float, rounded once as stored)
// relu: max(x, 0);  sigmoid: 1/(1 + e^−x);  tanh
template <typename T>
__global__ void unary_forward_kernel(UnaryOp op, const T* x, T* y, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) {
    const float v = float(x[i]);
    switch (op) {
      case UnaryOp::Relu: y[i] = T(v > 0.0f ? v : 0.0f); break;
      case UnaryOp::Sigmoid: y[i] = T(1.0f / (1.0f + expf(-v))); break;
      case UnaryOp::Tanh: y[i] = T(tanhf(v)); break;
    }
  }
}

// relu: dx = dy·[x > 0];  sigmoid: dx = dy·y·(1 − y);  tanh: dx = dy·(1 − y²)   (T as above)
template <typename T>
__global__ void unary_backward_kernel(UnaryOp op, const T* x, const T* y, const T* dy, T* dx, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) {
    const float g = float(dy[i]);
    switch (op) {
      case UnaryOp::Relu: dx[i] = T(float(x[i]) > 0.0f ? g : 0.0f); break;
      case UnaryOp::Sigmoid: dx[i] = T(g * float(y[i]) * (1.0f - float(y[i]))); break;
      case UnaryOp::Tanh: dx[i] = T(g * (1.0f - float(y[i]) * float(y[i]))); break;
    }
  }
}

template <typename T>
void launch_unary_forward(const cuda::Context& ctx, UnaryOp op, const Tensor& x, Tensor& y) {
  cuda::launch("unary_forward_kernel", unary_forward_kernel<T>, cuda::grid_for(ctx, x.numel()), cuda::kThreads,
               ctx.stream, op, cuda::ptr<T>(x), cuda::ptr<T>(y), x.numel());
}

// relu reads x only, sigmoid/tanh read y only; the other may be undefined.
template <typename T>
void launch_unary_backward(const cuda::Context& ctx, UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor& dx) {
  const T* xp = x.defined() ? cuda::ptr<T>(x) : nullptr;
  const T* yp = y.defined() ? cuda::ptr<T>(y) : nullptr;
  NNLAB_CHECK(op == UnaryOp::Relu ? xp != nullptr : yp != nullptr, "unary_backward (", unary_op_name(op),
              "): the forward ", op == UnaryOp::Relu ? "input" : "output", " is missing");
  cuda::launch("unary_backward_kernel", unary_backward_kernel<T>, cuda::grid_for(ctx, dy.numel()), cuda::kThreads,
               ctx.stream, op, xp, yp, cuda::ptr<T>(dy), cuda::ptr<T>(dx), dy.numel());
}


// x, y: (n)   y = alpha·x + beta·y; beta = 0 overwrites (NaNs in y included)
__global__ void axpby_kernel(float alpha, const float* x, float beta, float* y, int64_t n) {
  NNLAB_GRID_STRIDE(i, n) y[i] = beta == 0.0f ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

struct Broadcast {
  int64_t n, na, nb, inner, outer;
};

Broadcast broadcast_of(const Tensor& a, const Tensor& b, const Tensor& y) {
  const int64_t n = y.numel(), na = a.numel(), nb = b.numel();
  const int64_t inner = na < nb ? na : nb;
  NNLAB_CHECK((na == n || nb == n) && inner > 0 && n % inner == 0, "binary kernel: operands of ", na, " and ", nb,
              " elements do not broadcast to ", n);
  return {n, na, nb, inner, n / inner};
}

// Runs launch(BFloat16{}) when every tensor given is bf16, launch(float{}) otherwise.
template <typename Launch>
void with_element_type(std::initializer_list<const Tensor*> tensors, Launch launch) {
  if (bf16::all(tensors)) return launch(BFloat16{});
  launch(float{});
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------

void CudaBackend::binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  if (!bf16::all({&a, &b, &y}) && bf16::widened(*this, &CudaBackend::binary_forward, op, a, b, y)) return;
  NNLAB_LOG_KERNEL(std::string("binary_forward ") + binary_op_name(op), a);  // nnlab explain: record the call
  if (!bf16::all({&a, &b, &y})) cuda::require_f32("binary_forward", y);
  const Broadcast B = broadcast_of(a, b, y);
  if (!B.n) return;
  with_element_type({&a, &b, &y}, [&](auto element) {
    using T = decltype(element);
    cuda::launch("binary_forward_kernel", binary_forward_kernel<T>, cuda::grid_for(*ctx_, B.n), cuda::kThreads,
                 ctx_->stream, op, cuda::ptr<T>(a), B.na, cuda::ptr<T>(b), B.nb, cuda::ptr<T>(y), B.n);
  });
}

void CudaBackend::binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                                  Tensor* db) {
  const bool bf16_kernel = bf16::all({&a, &b, &dy, da, db});
  if (!bf16_kernel && bf16::widened(*this, &CudaBackend::binary_backward, op, a, b, dy, da, db)) return;
  NNLAB_LOG_KERNEL(std::string("binary_backward ") + binary_op_name(op), a);  // nnlab explain: record the call
  if (!bf16_kernel) cuda::require_f32("binary_backward", dy);
  const Broadcast B = broadcast_of(a, b, dy);
  if (!B.n) return;
  const bool want_a = da && da->defined(), want_b = db && db->defined();
  with_element_type({&a, &b, &dy, da, db}, [&](auto element) {
    using T = decltype(element);
    T* da_full = want_a && B.na == B.n ? cuda::ptr<T>(*da) : nullptr;
    T* db_full = want_b && B.nb == B.n ? cuda::ptr<T>(*db) : nullptr;
    T* da_small = want_a && B.na != B.n ? cuda::ptr<T>(*da) : nullptr;
    T* db_small = want_b && B.nb != B.n ? cuda::ptr<T>(*db) : nullptr;
    const T* ap = cuda::ptr<T>(a);
    const T* bp = cuda::ptr<T>(b);
    if (da_full || db_full)
      cuda::launch("binary_backward_full_kernel", binary_backward_full_kernel<T>, cuda::grid_for(*ctx_, B.n),
                   cuda::kThreads, ctx_->stream, op, ap, B.na, bp, B.nb, cuda::ptr<T>(dy), da_full, db_full, B.n);
    if (da_small || db_small)
      cuda::launch("binary_backward_reduce_kernel", binary_backward_reduce_kernel<T>, cuda::grid_for(*ctx_, B.inner),
                   cuda::kThreads, ctx_->stream, op, ap, B.na, bp, B.nb, cuda::ptr<T>(dy), da_small, db_small,
                   B.outer, B.inner);
  });
}

void CudaBackend::unary_forward(UnaryOp op, const Tensor& x, Tensor& y) {
  const bool bf16_kernel = bf16::all({&x, &y});
  if (!bf16_kernel && bf16::widened(*this, &CudaBackend::unary_forward, op, x, y)) return;
  NNLAB_LOG_KERNEL(std::string("unary_forward ") + unary_op_name(op), x);  // nnlab explain: record the call
  if (!bf16_kernel) cuda::require_f32("unary_forward", x);
  if (!x.numel()) return;
  if (bf16_kernel) return launch_unary_forward<BFloat16>(*ctx_, op, x, y);
  launch_unary_forward<float>(*ctx_, op, x, y);
}

void CudaBackend::unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const bool bf16_kernel = bf16::all({&x, &y, &dy, &dx});
  if (!bf16_kernel && bf16::widened(*this, &CudaBackend::unary_backward, op, x, y, dy, dx)) return;
  NNLAB_LOG_KERNEL(std::string("unary_backward ") + unary_op_name(op), x);  // nnlab explain: record the call
  if (!bf16_kernel) cuda::require_f32("unary_backward", dy);
  if (!dy.numel()) return;
  if (bf16_kernel) return launch_unary_backward<BFloat16>(*ctx_, op, x, y, dy, dx);
  launch_unary_backward<float>(*ctx_, op, x, y, dy, dx);
}

void CudaBackend::axpby(double alpha, const Tensor& x, double beta, Tensor& y) {
  if (bf16::widened(*this, &CudaBackend::axpby, alpha, x, beta, y)) return;
  NNLAB_LOG_KERNEL("axpby", x);  // nnlab explain: record the call
  cuda::require_f32("axpby", y);
  NNLAB_CHECK(x.numel() == y.numel(), "axpby: ", x.describe(), " and ", y.describe());
  if (!y.numel()) return;
  cuda::launch("axpby_kernel", axpby_kernel, cuda::grid_for(*ctx_, y.numel()), cuda::kThreads, ctx_->stream,
               static_cast<float>(alpha), cuda::ptr<float>(x), static_cast<float>(beta), cuda::ptr<float>(y),
               y.numel());
}

}  // namespace nnlab
