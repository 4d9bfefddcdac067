// GEMM on the CPU, row-major, so the shapes read as written:
// C(m×n) = alpha · op(A)(m×k) · op(B)(k×n) + beta · C.
// Float32 products of a layer's size go to libxsmm's generated kernels (gemm_libxsmm.h: over
// twice OpenBLAS's rate on them here), except C = A·Bᵀ with AVX-512 (below); the rest, and
// float64, to OpenBLAS's cblas_?gemm. Under `--math bf16` (gemm_bf16.h) every float32 product
// with alpha 1 and beta 0 or 1 goes to the bf16 kernel instead, the Linear layers' with the
// same fusions: the forward's bias and ReLU in the stores, dx and dW side by side.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>

#include "devices/bf16_widening.h"
#include "devices/cpu/balanced_loops.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/gemm_bf16.h"
#include "devices/cpu/gemm_libxsmm.h"
#include "devices/cpu/small_gemm.h"
#include "devices/cpu/threads.h"
#include "devices/kernel_log.h"

namespace nnlab {

namespace {

// C (m × n) [+]= A (m × k) · B (n × k)ᵀ, float32: a Linear layer's forward pass, B its weight
// stored (out, in). Both operands run along k, which suits small_gemm_nt's blocks of dot
// products (small_gemm.h) and no outer-product kernel: libxsmm's need A and C transposed into
// copies first (gemm_libxsmm.cpp), two more passes over memory and two more parallel regions.
// On the 2 Zen 5 threads (scripts/bench_gemm_linear.cpp, docs/benchmarks-history.md) the dot products ran
// the mlp's first layer (64 × 256 × 784) at 490–500 GFLOP/s against libxsmm's 460–463, its
// second at 428–438 against 348–352, lenet5's at 458–467 against 372–377; cnn's f1 (k = 3136)
// tied, and cifar-cnn's (k = 4096) was libxsmm's (371–401 against 434–449): past kLargestDepth
// the four rows of A a block reads no longer stay in the L1 cache.
// Only with AVX-512: the AVX2 small_gemm_nt is OpenBLAS's, which libxsmm beats.
// Threads take blocks of B's rows, i.e. of C's columns: each reads the half of the weight that
// the optimizer step's static schedule last wrote from the same thread, still in its cache.
// A block larger than kChunkBytes of B runs in chunks that stay in the L2 cache while every row
// of A passes over them.
constexpr int64_t kLargestDepth = 2048;
constexpr int64_t kChunkBytes = 512 * 1024;
constexpr double kParallelFlops = 2e6;  // below this a second thread costs more than it saves

// bias (n, or null): added to every row of C by the blocks' own stores (a Linear layer's bias:
// no pass of its own; a pass after the blocks had read back their scalar stores as vectors,
// which stalls store forwarding: 2% of an mlp step). relu: the stores write max(0, ·), the
// ReLU after the layer (accumulate false only).
bool dot_product_gemm_nt(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool accumulate,
                         float* c, const float* bias = nullptr, bool relu = false) {
  if (cpu_isa() != CpuIsa::avx512 || k > kLargestDepth) return false;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const int64_t threads = flops >= kParallelFlops ? std::min<int64_t>(cpu_threads(), (n + 3) / 4) : 1;
  const int64_t block = ((n + threads - 1) / threads + 3) / 4 * 4;  // columns per thread, whole 4-blocks
  const int64_t chunk = std::max<int64_t>(4, kChunkBytes / (4 * k) / 4 * 4);
  const auto columns_of = [&](int64_t t) {
    const int64_t end = std::min(n, (t + 1) * block);
    for (int64_t j = t * block; j < end; j += chunk)
      cpu::small_gemm_nt(m, std::min(chunk, end - j), k, a, b + j * k, c + j, n, accumulate,
                         bias ? bias + j : nullptr, relu);
  };
  // One thread runs the loop itself: a region with num_threads and a false if clause left
  // LLVM's OpenMP runtime on one thread for OpenBLAS (gemm_libxsmm.cpp).
  if (threads <= 1) {
    columns_of(0);
    return true;
  }
#pragma omp parallel for num_threads(static_cast<int>(threads)) schedule(static)
  for (int64_t t = 0; t < threads; ++t) columns_of(t);
  return true;
}

// C (m × n) = op(A) · op(B), float32, on the calling thread: libxsmm, else OpenBLAS (which runs
// single-threaded inside a parallel region).
void product_on_this_thread(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                            float* c) {
  if (cpu::cpu_bf16_products())
    return cpu::gemm_bf16(trans_a, false, m, n, k, a, trans_a ? m : k, b, n, false, c, n);
  if (cpu::libxsmm_gemm(trans_a, false, m, n, k, 1.0f, a, b, 0.0f, c)) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(trans_a ? m : k), b,
              static_cast<int>(n), 0.0f, c, static_cast<int>(n));
}

}  // namespace

void CpuBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                      const Tensor& b, double beta, Tensor& c) {
  check_gemm_operands(m, n, k, a, b, c);
  if (m == 0 || n == 0) return;
  if (a.dtype() == DType::BFloat16) {  // widened to float32 (exactly), multiplied, C rounded once
    Tensor c32 = c.dtype() == DType::Float32 ? c
                 : beta == 0.0               ? Tensor::empty(c.shape())
                                             : c.to(DType::Float32);
    gemm(trans_a, trans_b, m, n, k, alpha, a.to(DType::Float32), b.to(DType::Float32), beta, c32);
    if (c.dtype() == DType::BFloat16) cast(c32, c);
    return;
  }
  KernelTiming timing;  // for nnlab explain: the record below gets the product's time
  if (k == 0) {  // an empty sum: C = beta·C (BLAS rejects the leading dimension 0 a k of 0 gives)
    cpu::dispatch_float("gemm", c, [&](auto t) {
      using T = decltype(t);
      T* cp = c.data<T>();
      for (int64_t i = 0; i < m * n; ++i) cp[i] = beta == 0.0 ? T(0) : static_cast<T>(beta) * cp[i];
    });
    return;
  }
  // Leading dimension = the stored row length.
  const auto lda = static_cast<int>(trans_a ? m : k), ldb = static_cast<int>(trans_b ? k : n);
  const auto ldc = static_cast<int>(n);
  const std::string shape = std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " " + dims_text({m, n, k});
  if (a.dtype() == DType::Float32 && cpu::cpu_bf16_products() && alpha == 1.0 && (beta == 0.0 || beta == 1.0)) {
    if (kernel_log_enabled()) timing.attach(record_kernel("gemm_bf16", shape));  // nnlab explain: which call ran
    cpu::gemm_bf16(trans_a, trans_b, m, n, k, a.data<float>(), lda, b.data<float>(), ldb, beta == 1.0,
                   c.data<float>(), ldc);
    return;
  }
  if (a.dtype() == DType::Float32 && !trans_a && trans_b && alpha == 1.0 && (beta == 0.0 || beta == 1.0) &&
      dot_product_gemm_nt(m, n, k, a.data<float>(), b.data<float>(), beta == 1.0, c.data<float>())) {
    if (kernel_log_enabled()) timing.attach(record_kernel("small_gemm_nt", shape));  // nnlab explain: which call ran
    return;
  }
  if (a.dtype() == DType::Float32 &&
      cpu::libxsmm_gemm(trans_a, trans_b, m, n, k, static_cast<float>(alpha), a.data<float>(), b.data<float>(),
                        static_cast<float>(beta), c.data<float>())) {
    if (kernel_log_enabled()) timing.attach(record_kernel("libxsmm", shape));  // nnlab explain: which call ran
    return;
  }
  if (kernel_log_enabled())
    timing.attach(record_kernel(a.dtype() == DType::Float64 ? "cblas_dgemm" : "cblas_sgemm", shape));
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if (a.dtype() == DType::Float32) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                static_cast<float>(alpha), a.data<float>(), lda, b.data<float>(), ldb, static_cast<float>(beta),
                c.data<float>(), ldc);
  } else if (a.dtype() == DType::Float64) {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                a.data<double>(), lda, b.data<double>(), ldb, beta, c.data<double>(), ldc);
  } else {
    fail("gemm: the CPU kernel takes float32 or float64, got ", a.describe());
  }
}

void CpuBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu) {
  if (bf16::widened(*this, &CpuBackend::linear_forward, x, w, b, y, relu)) return;
  const bool with_bias = b && b->defined();
  const int64_t n = x.dim(0), out = w.dim(0), in = x.dim(1);
  if (x.dtype() == DType::Float32 && w.dtype() == DType::Float32 && y.dtype() == DType::Float32 &&
      (!with_bias || b->dtype() == DType::Float32) && n > 0 && out > 0) {
    KernelTiming timing;  // nnlab explain: the product, its bias and ReLU as one call
    const std::string epilogue = std::string(with_bias ? " + bias" : "") + (relu ? " + relu" : "");
    if (cpu::cpu_bf16_products()) {
      if (kernel_log_enabled()) timing.attach(record_kernel("gemm_bf16", "NT " + dims_text({n, out, in}) + epilogue));
      cpu::gemm_bf16(false, true, n, out, in, x.data<float>(), in, w.data<float>(), in, false, y.data<float>(), out,
                     with_bias ? b->data<float>() : nullptr, relu);
      return;
    }
    if (dot_product_gemm_nt(n, out, in, x.data<float>(), w.data<float>(), false, y.data<float>(),
                            with_bias ? b->data<float>() : nullptr, relu)) {
      if (kernel_log_enabled()) timing.attach(record_kernel("small_gemm_nt", "NT " + dims_text({n, out, in}) + epilogue));
      return;
    }
  }  // (the timing ends here, so the calls below are timed on their own)
  Backend::linear_forward(x, w, b, y, relu);
}

// dz: (n, out)  x: (n, in)  w: (out, in)   dx = dz · w  (n, in);  dw = dzᵀ · x  (out, in)
// On two or more threads, the two products in one parallel region:
// - Where libxsmm runs both in fixed column chunks (a wide layer: cifar-cnn's f1, 4096 inputs),
//   the two products' chunks are one list of pieces (balanced_loops.h): each thread starts on
//   its even share (on two threads, one takes dW's chunks and the other dx's), and a thread done
//   early takes the other's last chunks, so a slower core does not hold the step. The chunks
//   are the ones gemm runs on any thread count: the same bits.
// - Otherwise on two threads, one product per thread. A small model's Linear layer has two
//   products of the same size (n · out · in multiply-adds each), each too small to split well
//   over two threads (the mlp's second layer: 64 × 256 × 128), and split, each had cost a
//   parallel region of its own. Each product runs whole on its thread, as gemm runs it on one
//   thread, with those bits (tests/test_linear_backward.cpp); gemm on two threads splits
//   libxsmm's products into row blocks, whose last bits differ.
void CpuBackend::linear_products(const Tensor& dz, const Tensor& x, const Tensor& w, Tensor* dx, Tensor* dw) {
  if (bf16::widened(*this, &CpuBackend::linear_products, dz, x, w, dx, dw)) return;
  const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
  const bool floats = dz.dtype() == DType::Float32 && x.dtype() == DType::Float32 && w.dtype() == DType::Float32;
  if (!dx || !dw || !floats || cpu_threads() < 2 || omp_in_parallel() || n == 0 || in == 0 || out == 0 ||
      2.0 * double(n) * double(in) * double(out) < kParallelFlops / 2)
    return Backend::linear_products(dz, x, w, dx, dw);
  const bool bf16 = cpu::cpu_bf16_products();
  const int64_t dw_chunks = bf16 ? 0 : cpu::libxsmm_column_chunks(true, out, in, n, 0.0f);
  const int64_t dx_chunks = bf16 ? 0 : cpu::libxsmm_column_chunks(false, n, in, out, 0.0f);
  const bool chunked = dw_chunks > 0 && dx_chunks > 0;
  if (!chunked && cpu_threads() != 2) return Backend::linear_products(dz, x, w, dx, dw);
  NNLAB_CHECK(dx->dtype() == DType::Float32 && dw->dtype() == DType::Float32 && dx->numel() == n * in &&
                  dw->numel() == out * in && dz.numel() == n * out,
              "linear_products: gradients ", dx->describe(), ", ", dw->describe(), " do not fit dz ", dz.describe(),
              ", x ", x.describe(), ", w ", w.describe());
  KernelTiming timing;  // nnlab explain: one record for the pair
  if (kernel_log_enabled())
    timing.attach(record_kernel("linear_backward", "NN " + dims_text({n, in, out}) + " beside TN " +
                                                       dims_text({out, in, n}) +
                                                       (chunked ? ", their 128-column chunks shared by the threads"
                                                                : ", one per thread") +
                                                       (bf16 ? ", bf16" : "")));
  const float *dz_data = dz.data<float>(), *x_data = x.data<float>(), *w_data = w.data<float>();
  float *dx_data = dx->data<float>(), *dw_data = dw->data<float>();
  if (chunked) {
    std::atomic<bool> refused{false};  // a chunk libxsmm_column_chunks had accepted
    cpu::NNLAB_ISA::for_each_item(dw_chunks + dx_chunks, true, [&](long piece, int) {
      const bool done = piece < dw_chunks
                            ? cpu::libxsmm_gemm_chunk(true, out, in, n, dz_data, x_data, 0.0f, dw_data, piece)
                            : cpu::libxsmm_gemm_chunk(false, n, in, out, dz_data, w_data, 0.0f, dx_data,
                                                      piece - dw_chunks);
      if (!done) refused = true;
    });
    NNLAB_CHECK(!refused, "libxsmm refused a column chunk of a Linear layer's backward products it had accepted");
    return;
  }
  // A loop of two, not a test of the thread number: a team given one thread still runs both. An
  // error may not leave the region (the program would end without a word): kept, rethrown after.
  std::exception_ptr error;
#pragma omp parallel for num_threads(2) schedule(static)
  for (int which = 0; which < 2; ++which) {
    try {
      if (which == 0) product_on_this_thread(true, out, in, n, dz_data, x_data, dw_data);
      else product_on_this_thread(false, n, in, out, dz_data, w_data, dx_data);
    } catch (...) {
#pragma omp critical(nnlab_linear_backward_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace nnlab
