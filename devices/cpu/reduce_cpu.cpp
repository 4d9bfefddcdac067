// Bias add and reductions on the CPU. Sums run over fixed-size chunks whose partial sums are
// combined in chunk order, so a result never depends on the thread count.
#include <vector>

#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/dispatch.h"
#include "devices/kernel_log.h"

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
void CpuBackend::bias_forward(Tensor& yt, const Tensor& bt, int64_t inner) {
  NNLAB_LOG_KERNEL("bias_forward", yt);  // nnlab explain: record the call
  cpu::dispatch_float("bias_forward", yt, [&](auto t) {
    using T = decltype(t);
    T* y = static_cast<T*>(yt.raw_data());
    const T* b = static_cast<const T*>(bt.raw_data());
    const long c = static_cast<long>(bt.numel()), in = static_cast<long>(inner);
    const long outer = static_cast<long>(yt.numel()) / (c * in);
    // Loops in storage order (o, j, i) so the innermost loop vectorises, whether inner is 1
    // (Linear: each row gets the bias vector) or a whole feature-map plane (Conv2d).
#pragma omp parallel for schedule(static) if (yt.numel() > cpu::kParallelGrain)
    for (long o = 0; o < outer; ++o) {
      T* yo = y + o * c * in;
      if (in == 1) {
        for (long j = 0; j < c; ++j) yo[j] += b[j];
      } else {
        for (long j = 0; j < c; ++j) {
          const T bj = b[j];
          for (long i = 0; i < in; ++i) yo[j * in + i] += bj;
        }
      }
    }
  });
}

// dy: (outer, c, inner)  db: (c)   db[j] = Σ_o Σ_i dy[o, j, i]
void CpuBackend::bias_backward(const Tensor& dyt, Tensor& dbt, int64_t inner) {
  NNLAB_LOG_KERNEL("bias_backward", dyt);  // nnlab explain: record the call
  cpu::dispatch_float("bias_backward", dyt, [&](auto t) {
    using T = decltype(t);
    const T* dy = static_cast<const T*>(dyt.raw_data());
    T* db = static_cast<T*>(dbt.raw_data());
    const long c = static_cast<long>(dbt.numel()), in = static_cast<long>(inner);
    const long outer = static_cast<long>(dyt.numel()) / (c * in);
    if (in == 1) {
      // Linear: sum the rows of dy (outer × c) into db, row by row so the inner loop runs
      // along contiguous memory; each db[j] still adds its terms in row order.
      for (long j = 0; j < c; ++j) db[j] = 0;
      for (long o = 0; o < outer; ++o) {
        const T* row = dy + o * c;
        for (long j = 0; j < c; ++j) db[j] += row[j];
      }
      return;
    }
    // Conv2d: each channel's plane is summed in 8 interleaved lanes (element i goes to lane
    // i % 8), so the loop vectorises; the lanes and the images are then added in a fixed
    // order, so the result does not depend on the thread count.
    constexpr long kLanes = 8;
#pragma omp parallel for schedule(static) if (dyt.numel() > cpu::kParallelGrain)
    for (long j = 0; j < c; ++j) {
      T lane[kLanes] = {};
      for (long o = 0; o < outer; ++o) {
        const T* row = dy + (o * c + j) * in;
        long i = 0;
        for (; i + kLanes <= in; i += kLanes)
          for (long l = 0; l < kLanes; ++l) lane[l] += row[i + l];
        for (; i < in; ++i) lane[i % kLanes] += row[i];
      }
      T s = 0;
      for (long l = 0; l < kLanes; ++l) s += lane[l];
      db[j] = s;
    }
  });
}

void CpuBackend::sum_all(const Tensor& xt, double scale, Tensor& out) {
  NNLAB_LOG_KERNEL("sum_all", xt);  // nnlab explain: record the call
  cpu::dispatch_float("sum_all", xt, [&](auto t) {
    using T = decltype(t);
    const double s = chunked_sum(static_cast<const T*>(xt.raw_data()), static_cast<long>(xt.numel()),
                                 [](T v) { return static_cast<double>(v); });
    *static_cast<T*>(out.raw_data()) = static_cast<T>(scale * s);
  });
}

void CpuBackend::sum_squares(const Tensor& xt, Tensor& out) {
  NNLAB_LOG_KERNEL("sum_squares", xt);  // nnlab explain: record the call
  cpu::dispatch_float("sum_squares", xt, [&](auto t) {
    using T = decltype(t);
    const double s = chunked_sum(static_cast<const T*>(xt.raw_data()), static_cast<long>(xt.numel()),
                                 [](T v) { return static_cast<double>(v) * v; });
    out.fill_(s);
  });
}

}  // namespace nnlab
