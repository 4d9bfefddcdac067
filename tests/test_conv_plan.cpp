// The CPU's convolution router: plan_conv gives every zoo layer the plan that
// docs/cpu-kernels.md lists for it, per direction and dtype, obeys --conv-impl's explicit
// choices, and says why.
#include <catch2/catch.hpp>

#include <string>

#include "devices/cpu/conv2d_plan.h"

using namespace nnlab;
using cpu::ConvAlgorithm;
using cpu::ConvDirection;

namespace {

// A square convolution of size-preserving shape: n images of c×hw×hw, k filters r×r.
Conv2dGeometry layer(int64_t c, int64_t k, int64_t r, int64_t hw, int64_t stride, int64_t pad) {
  const int64_t out = (hw + 2 * pad - r) / stride + 1;
  return {64, c, hw, hw, k, r, r, stride, stride, pad, pad, out, out};
}

// The direct loops' layout the plan gives a direction.
std::string layout_of(const Conv2dGeometry& g, ConvDirection d) {
  return cpu::direct_layout_name(cpu::plan_conv(g, d, DType::Float32, ConvImpl::Auto).layout);
}

// "fwd/bwd data/bwd filter" names of the three choices for float32 under auto.
std::string paths(const Conv2dGeometry& g, DType dtype = DType::Float32, ConvImpl impl = ConvImpl::Auto) {
  std::string out;
  for (ConvDirection d : {ConvDirection::Forward, ConvDirection::BackwardData, ConvDirection::BackwardFilter})
    out +=
        std::string(out.empty() ? "" : " / ") + cpu::conv_algorithm_name(cpu::plan_conv(g, d, dtype, impl).algorithm);
  return out;
}

}  // namespace

TEST_CASE("plan_conv gives each zoo layer the path docs/cpu-kernels.md lists", "[conv2d][router]") {
  // cnn (and cnn-bn): c1 1→32 3×3 p1 on 28×28, c2 32→64 3×3 p1 on 14×14
  CHECK(paths(layer(1, 32, 3, 28, 1, 1)) == "im2col+small_gemm / im2col+blas / im2col+small_gemm");
  CHECK(paths(layer(32, 64, 3, 14, 1, 1)) == "winograd / winograd / winograd");
  // lenet5: c1 1→6 5×5 p2 on 28×28, c2 6→16 5×5 on 14×14
  CHECK(paths(layer(1, 6, 5, 28, 1, 2)) == "direct / direct / direct");
  CHECK(paths(layer(6, 16, 5, 14, 1, 0)) == "direct / direct / direct");
  // cifar-cnn: c1 3→32 on 32×32 (direct forward, im2col filter gradient), c2–c4 Winograd
  CHECK(paths(layer(3, 32, 3, 32, 1, 1)) == "direct / direct / im2col+small_gemm");
  CHECK(paths(layer(32, 32, 3, 32, 1, 1)) == "winograd / winograd / winograd");
  CHECK(paths(layer(32, 64, 3, 16, 1, 1)) == "winograd / winograd / winograd");
  CHECK(paths(layer(64, 64, 3, 16, 1, 1)) == "winograd / winograd / winograd");
  // resnet8: conv1 3→16, stride-1 blocks, stride-2 3×3 and 1×1 shortcuts
  CHECK(paths(layer(3, 16, 3, 32, 1, 1)) == "direct / direct / im2col+small_gemm");
  CHECK(paths(layer(16, 16, 3, 32, 1, 1)) == "winograd / winograd / winograd");
  CHECK(paths(layer(16, 32, 3, 32, 2, 1)) == "im2col+small_gemm / im2col+blas / im2col+blas");
  CHECK(paths(layer(32, 64, 3, 16, 2, 1)) == "im2col+small_gemm / im2col+blas / im2col+blas");
  CHECK(paths(layer(16, 32, 1, 32, 2, 0)) == "im2col+small_gemm / im2col+blas / im2col+small_gemm");
  CHECK(paths(layer(32, 64, 1, 16, 2, 0)) == "im2col+small_gemm / im2col+blas / im2col+small_gemm");
}

TEST_CASE("plan_conv obeys --conv-impl and the dtype", "[conv2d][router]") {
  const Conv2dGeometry c1 = layer(1, 32, 3, 28, 1, 1), c2 = layer(32, 64, 3, 14, 1, 1);
  // small_gemm is float32 only: a float64 gradient check runs OpenBLAS.
  CHECK(paths(c1, DType::Float64) == "im2col+blas / im2col+blas / im2col+blas");
  CHECK(paths(c2, DType::Float64) == "winograd / winograd / winograd");
  CHECK(paths(c2, DType::Float32, ConvImpl::Im2col) == "im2col+small_gemm / im2col+blas / im2col+blas");
  CHECK(paths(layer(64, 64, 3, 8, 1, 1), DType::Float32, ConvImpl::Im2col) ==
        "im2col+blas / im2col+blas / im2col+blas");  // c·r·s 576: past small_gemm's forward depth
  CHECK(paths(c1, DType::Float32, ConvImpl::Im2col) == "im2col+small_gemm / im2col+blas / im2col+small_gemm");
  CHECK(paths(layer(1, 6, 5, 28, 1, 2), DType::Float32, ConvImpl::Im2col) ==
        "im2col+small_gemm / im2col+blas / im2col+small_gemm");
  CHECK(paths(c2, DType::Float32, ConvImpl::Reference) == "reference / reference / reference");
  CHECK_THROWS_WITH(paths(c2, DType::Float32, ConvImpl::Cudnn), Catch::Contains("cudnn runs on CUDA only"));
}

TEST_CASE("the direct input gradient puts images in the lanes only for whole vectors of small planes",
          "[conv2d][router]") {
  Conv2dGeometry c2 = layer(6, 16, 5, 14, 1, 0);  // lenet5's c2, 64 images
  CHECK(layout_of(c2, ConvDirection::BackwardData) == "images in the vector lanes");
  c2.n = 8;  // too few images to fill the lanes
  CHECK(layout_of(c2, ConvDirection::BackwardData) == "vector loops over shifted rows");
  // 16 images of 3 → 16 channels on 128×128: buffers of 16 · (16 · 126 · 124 + 3 · 128 · 128) floats
  const Conv2dGeometry large = layer(3, 16, 5, 128, 1, 0);
  CHECK(layout_of(large, ConvDirection::BackwardData) == "vector loops over shifted rows");
}

TEST_CASE("the direct filter gradient puts images in the lanes for a first layer of few output channels",
          "[conv2d][router]") {
  Conv2dGeometry c1 = layer(1, 6, 5, 28, 1, 2);  // lenet5's c1, 64 images
  CHECK(layout_of(c1, ConvDirection::BackwardFilter) == "images in the vector lanes");
  CHECK(layout_of(c1, ConvDirection::Forward) == "vector loops over shifted rows");
  c1.n = 8;  // too few images to fill the lanes
  CHECK(layout_of(c1, ConvDirection::BackwardFilter) == "vector loops over shifted rows");
  // lenet5's c2: 16 output channels, the channel layout's
  CHECK(layout_of(layer(6, 16, 5, 14, 1, 0), ConvDirection::BackwardFilter) ==
        "output channels in the vector lanes");
  // 3 → 8 channels on 96×96: buffers of 16 · (3 · 100² + 2 · 8 · 96²) floats, past 1 MB
  CHECK(layout_of(layer(3, 8, 5, 96, 1, 2), ConvDirection::BackwardFilter) ==
        "vector loops over shifted rows");
}

TEST_CASE("the plan says whether its kernel pools, and why it was chosen", "[conv2d][router]") {
  using Catch::Contains;
  const DType f32 = DType::Float32;
  // lenet5's c1 and its 2×2 max-pool: the row-layout forward pools each plane as it makes it,
  // the filter gradient (images in the lanes) routes the pool's gradient as it reads dy
  const Conv2dGeometry c1 = layer(1, 6, 5, 28, 1, 2);
  const Pool2dGeometry pool1{64, 6, 28, 28, 2, 2, 2, 2, 0, 0, 14, 14, true};
  const cpu::ConvPlan& forward = cpu::plan_conv(c1, ConvDirection::Forward, f32, ConvImpl::Auto, &pool1);
  CHECK(forward.pools);
  CHECK_THAT(forward.reason, Contains("≤ 7 input channels") && Contains("pools each plane"));
  const cpu::ConvPlan& filter = cpu::plan_conv(c1, ConvDirection::BackwardFilter, f32, ConvImpl::Auto, &pool1);
  CHECK(filter.pools);
  CHECK(filter.layout == cpu::DirectLayout::ImageLanes);
  CHECK_THAT(filter.reason, Contains("16 images fill the lanes"));
  // computed once: the same plan object on every later call
  CHECK(&cpu::plan_conv(c1, ConvDirection::Forward, f32, ConvImpl::Auto, &pool1) == &forward);
  // without the pool, the same algorithm, not pooling
  CHECK_FALSE(cpu::plan_conv(c1, ConvDirection::Forward, f32, ConvImpl::Auto).pools);
  // lenet5's c2: channels in the lanes, which do not pool; the pool stays its own kernel
  const Pool2dGeometry pool2{64, 16, 10, 10, 2, 2, 2, 2, 0, 0, 5, 5, true};
  const cpu::ConvPlan& c2 = cpu::plan_conv(layer(6, 16, 5, 14, 1, 0), ConvDirection::Forward, f32, ConvImpl::Auto, &pool2);
  CHECK_FALSE(c2.pools);
  CHECK_THAT(c2.reason, Contains("max-pool runs as its own kernel"));
  // cifar-cnn's c2: Winograd pools in both gradients; a 3×3 stride-2 pool is never fused
  const Conv2dGeometry w2 = layer(32, 32, 3, 32, 1, 1);
  const Pool2dGeometry pool_2x2{64, 32, 32, 32, 2, 2, 2, 2, 0, 0, 16, 16, true};
  const Pool2dGeometry pool_3x3{64, 32, 32, 32, 3, 3, 2, 2, 1, 1, 16, 16, true};
  CHECK(cpu::plan_conv(w2, ConvDirection::BackwardData, f32, ConvImpl::Auto, &pool_2x2).pools);
  CHECK_FALSE(cpu::plan_conv(w2, ConvDirection::Forward, f32, ConvImpl::Auto, &pool_3x3).pools);
  CHECK_THAT(cpu::plan_conv(w2, ConvDirection::Forward, f32, ConvImpl::Auto).reason, Contains("F(4×4)"));
  CHECK_THAT(cpu::plan_conv(w2, ConvDirection::Forward, f32, ConvImpl::Im2col).reason, Contains("--conv-impl im2col"));
}
