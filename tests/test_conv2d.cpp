// Conv2d: the im2col + GEMM, Winograd and direct-loop kernels against loops over every index
// (forward, input and weight gradients) on awkward shapes, float32 against float64, errors,
// and the layer. Gradient checks (central differences) are cases of the op table
// (test_op_table.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "core/random.h"
#include "devices/conv_impl.h"
#include "devices/kernel_log.h"
#include "layers/conv2d.h"
#include "cpu_paths_support.h"
#include "devices/cpu/threads.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::random_tensor;
using nnlab_test::require_close_to_scale;

namespace {

// The seed of every random tensor in this file.
constexpr uint64_t kConvSeed = 77;

struct Case {
  int64_t n, c, k, h, w, r, s, stride_h, stride_w, pad_h, pad_w;
  int64_t p() const { return (h + 2 * pad_h - r) / stride_h + 1; }
  int64_t q() const { return (w + 2 * pad_w - s) / stride_w + 1; }
};

// The input pixel read by output (pi, qi) at filter tap (ri, si), or false in the padding.
bool tap(const Case& k, int64_t pi, int64_t qi, int64_t ri, int64_t si, int64_t& hi, int64_t& wi) {
  hi = pi * k.stride_h - k.pad_h + ri;
  wi = qi * k.stride_w - k.pad_w + si;
  return hi >= 0 && hi < k.h && wi >= 0 && wi < k.w;
}

// The direct definition, one loop per index. Returns y, and for a given dy also dx and dw.
struct ConvReference {
  std::vector<double> y, dx, dw, db;
};
ConvReference reference_conv(const Case& k, const std::vector<double>& x, const std::vector<double>& w,
                         const std::vector<double>& b, const std::vector<double>& dy) {
  const int64_t P = k.p(), Q = k.q();
  ConvReference ref{std::vector<double>(k.n * k.k * P * Q), std::vector<double>(x.size()), std::vector<double>(w.size()),
                std::vector<double>(k.k)};
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.k; ++o)
      for (int64_t pi = 0; pi < P; ++pi)
        for (int64_t qi = 0; qi < Q; ++qi) {
          const int64_t yi = ((n * k.k + o) * P + pi) * Q + qi;
          double acc = b.empty() ? 0.0 : b[o];
          for (int64_t c = 0; c < k.c; ++c)
            for (int64_t ri = 0; ri < k.r; ++ri)
              for (int64_t si = 0; si < k.s; ++si) {
                int64_t hi, wi;
                if (!tap(k, pi, qi, ri, si, hi, wi)) continue;
                const int64_t xi = ((n * k.c + c) * k.h + hi) * k.w + wi, wj = ((o * k.c + c) * k.r + ri) * k.s + si;
                acc += w[wj] * x[xi];
                ref.dx[xi] += w[wj] * dy[yi];
                ref.dw[wj] += x[xi] * dy[yi];
              }
          ref.y[yi] = acc;
          ref.db[o] += dy[yi];
        }
  return ref;
}

// Runs the op forward and backward in float64 and float32 and checks all of it against
// the reference.
void check_against_reference(const Case& k, bool bias) {
  INFO("n=" << k.n << " c=" << k.c << " k=" << k.k << " " << k.h << "×" << k.w << " kernel " << k.r << "×" << k.s
            << " stride (" << k.stride_h << "," << k.stride_w << ") pad (" << k.pad_h << "," << k.pad_w
            << ") bias " << bias);
  Tensor x = random_tensor({k.n, k.c, k.h, k.w}, kConvSeed, 1).set_requires_grad(true);
  Tensor w = random_tensor({k.k, k.c, k.r, k.s}, kConvSeed, 2).set_requires_grad(true);
  Tensor b = bias ? random_tensor({k.k}, kConvSeed, 3).set_requires_grad(true) : Tensor();
  Tensor dy = random_tensor({k.n, k.k, k.p(), k.q()}, kConvSeed, 4);
  const ConvReference ref = reference_conv(k, x.to_vector<double>(), w.to_vector<double>(),
                                       bias ? b.to_vector<double>() : std::vector<double>{}, dy.to_vector<double>());

  Tensor y = conv2d(x, w, b, k.stride_h, k.stride_w, k.pad_h, k.pad_w);
  REQUIRE(y.shape() == Shape{k.n, k.k, k.p(), k.q()});
  y.backward(dy);
  require_close_to_scale(y.to_vector<double>(), ref.y, 1e-10, "y");
  require_close_to_scale(x.grad().to_vector<double>(), ref.dx, 1e-10, "dx");
  require_close_to_scale(w.grad().to_vector<double>(), ref.dw, 1e-10, "dw");
  if (bias) require_close_to_scale(b.grad().to_vector<double>(), ref.db, 1e-10, "db");

  // float32 runs the same templated kernels: agreement to float32 rounding.
  Tensor x32 = x.detach().to(DType::Float32), w32 = w.detach().to(DType::Float32);
  Tensor b32 = bias ? b.detach().to(DType::Float32) : Tensor();
  x32.set_requires_grad(true), w32.set_requires_grad(true);
  Tensor y32 = conv2d(x32, w32, b32, k.stride_h, k.stride_w, k.pad_h, k.pad_w);
  y32.backward(dy.to(DType::Float32));
  require_close_to_scale(y32.to_vector<double>(), ref.y, 1e-4, "y float32");
  require_close_to_scale(x32.grad().to_vector<double>(), ref.dx, 1e-4, "dx float32");
  require_close_to_scale(w32.grad().to_vector<double>(), ref.dw, 1e-4, "dw float32");
}

// Selects a convolution implementation for one scope, and restores the default after it.
struct ConvImplScope {
  explicit ConvImplScope(ConvImpl impl) { set_conv_impl(impl); }
  ~ConvImplScope() { set_conv_impl(ConvImpl::Auto); }
};

}  // namespace

TEST_CASE("conv2d forward and gradients match direct loops on awkward shapes", "[conv2d]") {
  // Once with im2col + GEMM everywhere, once with the CPU's own choice per shape (which sends
  // the stride-1 cases with few channels to the direct loops).
  const ConvImpl impl = GENERATE(ConvImpl::Im2col, ConvImpl::Auto);
  ConvImplScope scope(impl);
  // kernel 5, stride 2, padding 0/1/2 on a non-square image with odd channel counts
  for (int64_t pad : {0, 1, 2}) check_against_reference({8, 13, 32, 17, 23, 5, 5, 2, 2, pad, pad}, true);
  check_against_reference({1, 3, 4, 17, 23, 3, 5, 1, 1, 1, 2}, true);   // batch 1, 3×5 kernel
  check_against_reference({2, 5, 7, 9, 6, 3, 5, 2, 1, 0, 2}, true);     // mixed strides
  check_against_reference({3, 4, 6, 8, 8, 3, 3, 1, 1, 1, 1}, false);    // no bias
  check_against_reference({2, 2, 3, 5, 5, 5, 5, 3, 3, 0, 0}, true);     // kernel = image: 1×1 output
  check_against_reference({2, 3, 2, 4, 4, 6, 6, 1, 1, 1, 1}, true);     // kernel larger than the image
  check_against_reference({4, 1, 32, 28, 27, 3, 3, 1, 1, 1, 1}, true);   // the cnn's c1: c·r·s = 9 (small_gemm)
}

TEST_CASE("conv2d's input gradient with the images in the vector lanes matches direct loops", "[conv2d]") {
  // Batches of at least 16 images take conv2d_direct_images_cpu.cpp for the direct input
  // gradient: groups of 16 (AVX-512) or 8 (AVX2) images, the last one partial here.
  ConvImplScope scope(ConvImpl::Auto);
  check_against_reference({20, 6, 16, 14, 14, 5, 5, 1, 1, 0, 0}, true);  // lenet5's c2
  check_against_reference({17, 7, 5, 11, 9, 5, 3, 1, 1, 2, 1}, false);   // 7 channels: a block of 8; odd rows
  check_against_reference({16, 2, 4, 7, 6, 5, 5, 1, 1, 4, 3}, true);    // padding up to r − 1
}

TEST_CASE("conv2d's filter gradient with the images in the vector lanes matches direct loops, both ISAs",
          "[conv2d]") {
  // Batches of at least 16 images and at most 8 output channels outside the channel layout:
  // lenet5's c1 (a partial second group), 8 output channels (a whole block of 8 accumulators),
  // 7 input channels over odd rows, and 1, 2 and 4 threads (the groups' sums are added in group
  // order whatever the count: test_conv_pool_fusion.cpp compares the bits).
  ConvImplScope scope(ConvImpl::Auto);
  nnlab_test::for_each_cpu_isa([&](CpuIsa isa) {
    INFO(cpu_isa_name(isa));
    for (int threads : {1, 2, 4}) {
      set_cpu_threads(threads);
      check_against_reference({20, 1, 6, 28, 28, 5, 5, 1, 1, 2, 2}, true);
      check_against_reference({16, 3, 8, 12, 12, 5, 5, 1, 1, 2, 2}, false);
      check_against_reference({33, 7, 5, 11, 9, 5, 3, 1, 1, 2, 1}, true);
    }
  });
  set_cpu_threads(0);
}

TEST_CASE("conv2d is right whether images or loops are spread over the threads", "[conv2d]") {
  // A batch of one runs its im2col, GEMM and col2im threaded; a batch of at least as many
  // images as threads gives each thread whole images and sums per-thread weight gradients.
  ConvImplScope im2col(ConvImpl::Im2col);
  check_against_reference({1, 6, 5, 40, 40, 3, 3, 1, 1, 1, 1}, true);
  check_against_reference({5, 6, 5, 40, 40, 3, 3, 1, 1, 1, 1}, true);
}

namespace {

// Which kernel families ran for the three directions of one r×r convolution of size-preserving
// padding on hw×hw images.
std::vector<std::string> families_run(int64_t c, int64_t k, int64_t r = 3, int64_t hw = 6) {
  Tensor x = random_tensor({2, c, hw, hw}, kConvSeed, 31).set_requires_grad(true);
  Tensor w = random_tensor({k, c, r, r}, kConvSeed, 32).set_requires_grad(true);
  set_kernel_log_enabled(true);
  const int64_t pad = r / 2;
  conv2d(x, w, Tensor(), 1, 1, pad, pad).backward(Tensor::full({2, k, hw, hw}, 1.0, DType::Float64));
  set_kernel_log_enabled(false);
  std::vector<std::string> families;
  for (const KernelCall& call : take_kernel_calls()) families.push_back(call.family);
  return families;
}

}  // namespace

TEST_CASE("conv2d Winograd F(2x2,3x3) matches direct loops on awkward shapes", "[conv2d][winograd]") {
  // The CPU's default for 3×3 stride-1 convolutions with enough channels: forward, backward
  // data (the rotated filter, padding 2 − pad) and backward filter, with odd output sizes
  // (tiles hanging over the edge), every padding it takes, one image, and images big enough
  // that each chunk holds one image, so chunks are spread over the threads.
  ConvImplScope automatic(ConvImpl::Auto);
  for (int64_t pad : {0, 1, 2}) check_against_reference({3, 9, 8, 40, 37, 3, 3, 1, 1, pad, pad}, true);
  check_against_reference({1, 16, 8, 7, 5, 3, 3, 1, 1, 1, 1}, true);     // one image, odd sizes
  check_against_reference({5, 8, 12, 14, 14, 3, 3, 1, 1, 1, 1}, false);  // the cnn's layer, small
  check_against_reference({2, 8, 8, 3, 4, 3, 3, 1, 1, 0, 2}, true);      // 1×6 output, mixed padding
}

TEST_CASE("conv2d direct loops for few input channels match the reference on awkward shapes", "[conv2d][direct]") {
  // The CPU's own choice for stride-1 layers with at most 7 input channels and at least 25
  // taps: lenet5's two layers; output channels that do not fill the last block of 8, rows
  // wider than one 16-column chunk with a tail, every padding below the filter size, a
  // filter larger than the image, one image (run serially) and several (spread over threads).
  ConvImplScope automatic(ConvImpl::Auto);
  check_against_reference({3, 1, 6, 28, 28, 5, 5, 1, 1, 2, 2}, true);    // lenet5 c1
  check_against_reference({3, 6, 16, 14, 14, 5, 5, 1, 1, 0, 0}, true);   // lenet5 c2
  check_against_reference({2, 3, 32, 20, 21, 3, 3, 1, 1, 1, 1}, false);  // cifar-cnn's c1 (smaller), no bias
  check_against_reference({1, 3, 13, 17, 23, 3, 5, 1, 1, 1, 2}, true);   // one image, 13 channels
  check_against_reference({5, 7, 9, 9, 37, 3, 3, 1, 1, 2, 0}, true);     // 37 columns: 3 chunks
  check_against_reference({2, 2, 3, 4, 4, 6, 6, 1, 1, 1, 1}, true);      // filter larger than the image
  check_against_reference({3, 1, 4, 11, 40, 5, 5, 1, 1, 2, 2}, true);    // one channel, 5×5, wide
  // Forward and filter gradient with the output channels in the lanes (k a multiple of 16,
  // rows not a multiple of 16): filter gradient 3×3 in passes of 3 filter rows, 3×5 in one
  // pass of 2 rows and one of 1; forward tiles of 12 columns (11 wide: one, overlapping),
  // 7 (13: two, overlapping by one), 10 (20: two), an odd number of rows (the last tile of
  // rows overlaps), and 3 columns (tiles narrower than 5).
  check_against_reference({3, 3, 32, 9, 11, 3, 3, 1, 1, 1, 1}, true);    // 32 channels: 2 lane blocks
  check_against_reference({2, 5, 16, 8, 13, 3, 5, 1, 1, 1, 2}, false);   // 3×5 filter, 13 columns
  check_against_reference({2, 2, 16, 7, 20, 5, 5, 1, 1, 2, 2}, true);    // 20 columns, 7 rows
  check_against_reference({2, 4, 16, 5, 3, 3, 3, 1, 1, 1, 1}, true);     // 3 columns
}

TEST_CASE("nnlab explain names the direct loops' layout: channels in the lanes for lenet5's forward and filter gradient", "[conv2d][direct]") {
  ConvImplScope automatic(ConvImpl::Auto);
  Tensor x = random_tensor({2, 6, 14, 14}, kConvSeed, 41).set_requires_grad(true);
  Tensor w = random_tensor({16, 6, 5, 5}, kConvSeed, 42).set_requires_grad(true);
  set_kernel_log_enabled(true);
  conv2d(x, w, Tensor(), 1, 1, 0, 0).backward(Tensor::full({2, 16, 10, 10}, 1.0, DType::Float64));
  set_kernel_log_enabled(false);
  std::vector<std::string> details;
  for (const KernelCall& call : take_kernel_calls())
    if (call.family == "direct") details.push_back(call.detail);
  REQUIRE(details.size() == 3);
  for (const std::string& detail : details) {
    const bool data = detail.find("bwd data") != std::string::npos;  // 6 output channels: rows
    INFO(detail);
    CHECK((detail.find("output channels in the vector lanes") != std::string::npos) == !data);
    CHECK((detail.find("vector loops over shifted rows") != std::string::npos) == data);
  }
}

TEST_CASE("conv2d picks Winograd and direct loops only where they apply, im2col on request", "[conv2d][winograd][direct]") {
  auto ran = [](const std::vector<std::string>& families, const std::string& family) {
    return std::count(families.begin(), families.end(), family);
  };
  {  // float64 tensors: the im2col products go to OpenBLAS (small_gemm is float32 only)
    ConvImplScope automatic(ConvImpl::Auto);
    CHECK(ran(families_run(8, 8), "winograd") == 3);      // forward, backward data, backward filter
    CHECK(ran(families_run(8, 8), "direct") == 0);
    CHECK(ran(families_run(1, 32), "winograd") == 0);     // one input channel: too few for Winograd,
    CHECK(ran(families_run(1, 32), "direct") == 0);       // 9 taps: too few for the direct loops
    CHECK(ran(families_run(1, 32), "im2col+blas") == 3);
    CHECK(ran(families_run(6, 8, 5), "direct") == 3);     // lenet5-like: 150 taps, 8 output channels
    CHECK(ran(families_run(3, 16, 5), "direct") == 3);    // 16 channels of 6×6: small planes
    CHECK(ran(families_run(3, 16, 5, 20), "direct") == 2);  // of 20×20: the filter gradient
    CHECK(ran(families_run(3, 16, 5, 20), "im2col+blas") == 1);  // goes to im2col
  }
  ConvImplScope im2col(ConvImpl::Im2col);
  CHECK(ran(families_run(8, 8), "winograd") == 0);
  CHECK(ran(families_run(6, 8, 5), "direct") == 0);
  CHECK(ran(families_run(1, 32), "im2col+blas") == 3);
}

TEST_CASE("conv2d gradients flow only where asked", "[conv2d]") {
  Tensor x = random_tensor({2, 1, 6, 6}, kConvSeed, 21);
  Tensor w = random_tensor({4, 1, 3, 3}, kConvSeed, 22).set_requires_grad(true);
  Tensor b = random_tensor({4}, kConvSeed, 23).set_requires_grad(true);
  conv2d(x, w, b, 1, 1).backward(Tensor::full({2, 4, 6, 6}, 1.0, DType::Float64));
  CHECK_FALSE(x.grad().defined());
  REQUIRE(w.grad().defined());
  // db = Σ dy = n·p·q per channel when dy is all ones
  for (double v : b.grad().to_vector<double>()) CHECK(v == Approx(2 * 36));
}

TEST_CASE("conv2d rejects bad shapes with clear messages", "[conv2d]") {
  Tensor x = Tensor::zeros({2, 3, 8, 8}), w = Tensor::zeros({4, 3, 3, 3}), b = Tensor::zeros({4});
  CHECK_THROWS_WITH(conv2d(Tensor::zeros({3, 8, 8}), w, b), Catch::Contains("must be 4-D (n, c, h, w)"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 3, 3}), b), Catch::Contains("weight") && Catch::Contains("4-D"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 2, 3, 3}), b),
                    Catch::Contains("has 3 channels but weight") && Catch::Contains("expects 2"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 3, 9, 3}), b),
                    Catch::Contains("kernel 9×3 is larger than the padded input 8×8"));
  CHECK_NOTHROW(conv2d(x, Tensor::zeros({4, 3, 9, 3}), b, 1, 1));  // padding makes it fit
  CHECK_THROWS_WITH(conv2d(x, w, Tensor::zeros({5})), Catch::Contains("bias") && Catch::Contains("does not match"));
  CHECK_THROWS_WITH(conv2d(x, w, b, 0, 1), Catch::Contains("stride must be at least 1"));
  CHECK_THROWS_WITH(conv2d(x, w, b, 1, -1), Catch::Contains("padding must not be negative"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({4, 3, 3, 3}, DType::Float64), b), Catch::Contains("different dtypes"));
  CHECK_THROWS_WITH(conv2d(Tensor::zeros({2, 3, 8, 8}, DType::Int32), w, b), Catch::Contains("conv2d"));
}

TEST_CASE("Conv2d layer: parameters, initialisation, description", "[conv2d][layers]") {
  Conv2d conv(Conv2dOptions{1, 32, 3, 3, 1, 1});
  const auto params = conv.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[0].second.shape() == Shape{32, 1, 3, 3});
  CHECK(params[1].first == "bias");
  CHECK(params[1].second.shape() == Shape{32});
  CHECK(conv.parameter_count() == 320);
  CHECK(Conv2d(32, 64, 3, 1, 1).parameter_count() == 18496);
  CHECK(conv.describe() == "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");

  Conv2d plain(Conv2dOptions{3, 8, 3, 5, 2, 0, false});
  CHECK(plain.named_parameters().size() == 1);
  CHECK(plain.parameter_count() == 8 * 3 * 3 * 5);
  CHECK(plain.describe() == "Conv2d(3, 8, kernel_size=(3, 5), stride=(2, 2), bias=False)");
  CHECK_THROWS_WITH(Conv2d(0, 8, 3), Catch::Contains("channels must be positive"));

  // PyTorch's default: U(±1/√fan_in), fan_in = 1·3·3 = 9, so |w| ≤ 1/3 and not all equal.
  conv.initialize(5);
  const auto wv = conv.weight().to_vector<double>();
  const auto [lo, hi] = std::minmax_element(wv.begin(), wv.end());
  CHECK(*lo >= -1.0 / 3);
  CHECK(*hi <= 1.0 / 3);
  CHECK(*hi - *lo > 0.3);

  // The layer computes the op: a 28×28 batch keeps its size with padding 1.
  Tensor x = Tensor::full({2, 1, 28, 28}, 0.5);
  Tensor y = conv(x);
  CHECK(y.shape() == Shape{2, 32, 28, 28});
  CHECK(y.to_vector<double>() == conv2d(x, conv.weight(), conv.bias(), 1, 1).to_vector<double>());
}
