// Bias add and reductions on the CPU. Sums run over fixed-size chunks whose partial sums are
// combined in chunk order, so a result never depends on the thread count.
#include <algorithm>
#include <vector>

#include "devices/bf16_widening.h"
#include "devices/cpu/bias_lanes.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/kernel_log.h"
#include "devices/reduce_impl.h"

namespace nnlab {

namespace {

constexpr long kChunk = 4096;

// Σ f(x[i]) in double, chunked and combined in a fixed order.
template <typename T, typename F>
double chunked_sum(const T* x, long n, F f) {
  const long chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (n > cpu::kParallelGrain)
  for (long c = 0; c < chunks; ++c) {
    double s = 0;
    const long end = std::min(n, (c + 1) * kChunk);
    for (long i = c * kChunk; i < end; ++i) s += f(x[i]);
    partial[c] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace

// y: (outer, c, inner)  b: (c)   y[o, j, i] += b[j]
void CpuBackend::bias_forward(Tensor& y, const Tensor& b, int64_t inner) {
  if (bf16::widened(*this, &CpuBackend::bias_forward, y, b, inner)) return;
  NNLAB_LOG_KERNEL("bias_forward", y);  // nnlab explain: record the call
  cpu::dispatch_float("bias_forward", y, [&](auto t) {
    using T = decltype(t);
    T* y_data = static_cast<T*>(y.raw_data());
    const T* b_data = static_cast<const T*>(b.raw_data());
    const long c = static_cast<long>(b.numel()), in = static_cast<long>(inner);
    const long outer = static_cast<long>(y.numel()) / (c * in);
    // Loops in storage order (o, j, i) so the innermost loop vectorises, whether inner is 1
    // (Linear: each row gets the bias vector) or a whole feature-map plane (Conv2d).
#pragma omp parallel for schedule(static) if (y.numel() > cpu::kParallelGrain)
    for (long o = 0; o < outer; ++o) {
      T* yo = y_data + o * c * in;
      if (in == 1) {
        for (long j = 0; j < c; ++j) yo[j] += b_data[j];
      } else {
        for (long j = 0; j < c; ++j) {
          const T bj = b_data[j];
          for (long i = 0; i < in; ++i) yo[j * in + i] += bj;
        }
      }
    }
  });
}

namespace {

// bias_lanes.h's sums, as compiled for this library's baseline instruction set.
using cpu::NNLAB_ISA::accumulate_row;
using cpu::NNLAB_ISA::add_image_lanes;
using cpu::NNLAB_ISA::channel_bias;
using cpu::NNLAB_ISA::kBiasLanes;
using cpu::NNLAB_ISA::plane_bias_lanes;

// dy: (outer, c, inner)  db: (c)   db[j] = Σ_o Σ_i dz[o, j, i]
// where dz = dy (Masked false: a bias gradient alone), or dz = dy·[y > 0], written out as well
// (Masked true: a ReLU's backward fused with the bias gradient of the layer under it). One
// loop nest for both, so the fused pair sums in exactly the order bias_backward does.
template <typename T, bool Masked>
void bias_gradient(const T* dy, const T* y, T* dz, T* db, long c, long in, long outer) {
  const auto at = [](auto* base, long offset) { return base ? base + offset : base; };
  if (in == 1) {
    // Linear: sum the rows of dz (outer × c) into db, row by row so the inner loop runs
    // along contiguous memory; each db[j] still adds its terms in row order.
    for (long j = 0; j < c; ++j) db[j] = 0;
    for (long o = 0; o < outer; ++o) accumulate_row<T, Masked>(dy + o * c, at(y, o * c), at(dz, o * c), db, c);
    return;
  }
  // Conv2d: each channel's planes are summed image by image in bias_lanes.h's order, which
  // does not depend on the thread count and which the first layer's fused gradient shares.
#pragma omp parallel for schedule(static) if (outer * c * in > cpu::kParallelGrain)
  for (long j = 0; j < c; ++j) {
    T lanes[kBiasLanes] = {}, image_lanes[kBiasLanes];
    T tails = 0, image_tail;
    for (long o = 0; o < outer; ++o) {
      const long row = (o * c + j) * in;
      plane_bias_lanes<T, Masked>(dy + row, at(y, row), at(dz, row), in, image_lanes, image_tail);
      add_image_lanes(image_lanes, image_tail, lanes, tails);
    }
    db[j] = channel_bias(lanes, tails);
  }
}

}  // namespace

// dy: (outer, c, inner)  db: (c)   db[j] = Σ_o Σ_i dy[o, j, i]
void CpuBackend::bias_backward(const Tensor& dy, Tensor& db, int64_t inner) {
  if (bf16::widened(*this, &CpuBackend::bias_backward, dy, db, inner)) return;
  NNLAB_LOG_KERNEL("bias_backward", dy);  // nnlab explain: record the call
  check_reduce_impl(reduce_impl(), Device::cpu());  // --reduce-impl's rungs are CUDA kernels
  cpu::dispatch_float("bias_backward", dy, [&](auto t) {
    using T = decltype(t);
    const long c = static_cast<long>(db.numel()), in = static_cast<long>(inner);
    bias_gradient<T, false>(static_cast<const T*>(dy.raw_data()), nullptr, nullptr, static_cast<T*>(db.raw_data()),
                            c, in, static_cast<long>(dy.numel()) / (c * in));
  });
}

// y, dy, dz: (outer, c, inner)  db: (c)   dz = dy·[y > 0];  db[j] = Σ_o Σ_i dz[o, j, i]
// One pass where ReLU's backward and bias_backward made two (the second read dz back).
void CpuBackend::relu_bias_backward(const Tensor& y, const Tensor& dy, Tensor& dz, Tensor* db, int64_t inner) {
  if (bf16::widened(*this, &CpuBackend::relu_bias_backward, y, dy, dz, db, inner)) return;
  if (!db) return unary_backward(UnaryOp::Relu, y, y, dy, dz);  // no bias: the ReLU's kernel alone
  NNLAB_LOG_KERNEL("relu_bias_backward", dy);  // nnlab explain: record the call
  check_reduce_impl(reduce_impl(), Device::cpu());
  cpu::dispatch_float("relu_bias_backward", dy, [&](auto t) {
    using T = decltype(t);
    const long c = static_cast<long>(db->numel()), in = static_cast<long>(inner);
    bias_gradient<T, true>(static_cast<const T*>(dy.raw_data()), static_cast<const T*>(y.raw_data()),
                           static_cast<T*>(dz.raw_data()), static_cast<T*>(db->raw_data()), c, in,
                           static_cast<long>(dy.numel()) / (c * in));
  });
}

void CpuBackend::sum_all(const Tensor& x, double scale, Tensor& out) {
  if (bf16::widened(*this, &CpuBackend::sum_all, x, scale, out)) return;
  NNLAB_LOG_KERNEL("sum_all", x);  // nnlab explain: record the call
  cpu::dispatch_float("sum_all", x, [&](auto t) {
    using T = decltype(t);
    const double s = chunked_sum(static_cast<const T*>(x.raw_data()), static_cast<long>(x.numel()),
                                 [](T v) { return static_cast<double>(v); });
    out.fill_(scale * s);  // in out's own dtype, which may differ from x's (float32 → float64)
  });
}

void CpuBackend::sum_squares(const Tensor& x, Tensor& out) {
  NNLAB_LOG_KERNEL("sum_squares", x);  // nnlab explain: record the call
  cpu::dispatch_float("sum_squares", x, [&](auto t) {
    using T = decltype(t);
    const double s = chunked_sum(static_cast<const T*>(x.raw_data()), static_cast<long>(x.numel()),
                                 [](T v) { return static_cast<double>(v) * v; });
    out.fill_(s);
  });
}

}  // namespace nnlab
