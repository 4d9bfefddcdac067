// The CPU's convolution router: choose_conv_algorithm gives every zoo layer the path that
// devices/cpu/conv2d_cpu.cpp's header lists for it, per direction and dtype, and obeys
// --conv-impl's explicit choices.
#include <catch2/catch.hpp>

#include <string>

#include "devices/cpu/conv2d_algorithm.h"
#include "devices/cpu/conv2d_direct.h"

using namespace nnlab;
using cpu::ConvAlgorithm;
using cpu::ConvDirection;

namespace {

// A square convolution of size-preserving shape: n images of c×hw×hw, k filters r×r.
Conv2dGeometry layer(int64_t c, int64_t k, int64_t r, int64_t hw, int64_t stride, int64_t pad) {
  const int64_t out = (hw + 2 * pad - r) / stride + 1;
  return {64, c, hw, hw, k, r, r, stride, stride, pad, pad, out, out};
}

// "fwd/bwd data/bwd filter" names of the three choices for float32 under auto.
std::string paths(const Conv2dGeometry& g, DType dtype = DType::Float32, ConvImpl impl = ConvImpl::Auto) {
  std::string out;
  for (ConvDirection d : {ConvDirection::Forward, ConvDirection::BackwardData, ConvDirection::BackwardFilter})
    out +=
        std::string(out.empty() ? "" : " / ") + cpu::conv_algorithm_name(cpu::choose_conv_algorithm(g, d, dtype, impl));
  return out;
}

}  // namespace

TEST_CASE("choose_conv_algorithm gives each zoo layer the path the router's header lists", "[conv2d][router]") {
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
  CHECK(paths(layer(16, 32, 3, 32, 2, 1)) == "im2col+blas / im2col+blas / im2col+blas");
  CHECK(paths(layer(16, 32, 1, 32, 2, 0)) == "im2col+small_gemm / im2col+blas / im2col+small_gemm");
  CHECK(paths(layer(32, 64, 1, 16, 2, 0)) == "im2col+small_gemm / im2col+blas / im2col+small_gemm");
}

TEST_CASE("choose_conv_algorithm obeys --conv-impl and the dtype", "[conv2d][router]") {
  const Conv2dGeometry c1 = layer(1, 32, 3, 28, 1, 1), c2 = layer(32, 64, 3, 14, 1, 1);
  // small_gemm is float32 only: a float64 gradient check runs OpenBLAS.
  CHECK(paths(c1, DType::Float64) == "im2col+blas / im2col+blas / im2col+blas");
  CHECK(paths(c2, DType::Float64) == "winograd / winograd / winograd");
  CHECK(paths(c2, DType::Float32, ConvImpl::Im2col) == "im2col+blas / im2col+blas / im2col+blas");
  CHECK(paths(c1, DType::Float32, ConvImpl::Im2col) == "im2col+small_gemm / im2col+blas / im2col+small_gemm");
  CHECK(paths(layer(1, 6, 5, 28, 1, 2), DType::Float32, ConvImpl::Im2col) ==
        "im2col+small_gemm / im2col+blas / im2col+small_gemm");
  CHECK(paths(c2, DType::Float32, ConvImpl::Reference) == "reference / reference / reference");
  CHECK_THROWS_WITH(paths(c2, DType::Float32, ConvImpl::Cudnn), Catch::Contains("cudnn runs on CUDA only"));
}

TEST_CASE("the direct input gradient puts images in the lanes only for whole vectors of small planes",
          "[conv2d][router]") {
  Conv2dGeometry c2 = layer(6, 16, 5, 14, 1, 0);  // lenet5's c2, 64 images
  CHECK(std::string(cpu::direct_method(c2, ConvDirection::BackwardData)) == "images in the vector lanes");
  c2.n = 8;  // too few images to fill the lanes
  CHECK(std::string(cpu::direct_method(c2, ConvDirection::BackwardData)) == "vector loops over shifted rows");
  // 16 images of 3 → 16 channels on 128×128: buffers of 16 · (16 · 126 · 124 + 3 · 128 · 128) floats
  const Conv2dGeometry large = layer(3, 16, 5, 128, 1, 0);
  CHECK(std::string(cpu::direct_method(large, ConvDirection::BackwardData)) == "vector loops over shifted rows");
}

TEST_CASE("the direct filter gradient puts images in the lanes for a first layer of few output channels",
          "[conv2d][router]") {
  Conv2dGeometry c1 = layer(1, 6, 5, 28, 1, 2);  // lenet5's c1, 64 images
  CHECK(std::string(cpu::direct_method(c1, ConvDirection::BackwardFilter)) == "images in the vector lanes");
  CHECK(std::string(cpu::direct_method(c1, ConvDirection::Forward)) == "vector loops over shifted rows");
  c1.n = 8;  // too few images to fill the lanes
  CHECK(std::string(cpu::direct_method(c1, ConvDirection::BackwardFilter)) == "vector loops over shifted rows");
  // lenet5's c2: 16 output channels, the channel layout's
  CHECK(std::string(cpu::direct_method(layer(6, 16, 5, 14, 1, 0), ConvDirection::BackwardFilter)) ==
        "output channels in the vector lanes");
  // 3 → 8 channels on 96×96: buffers of 16 · (3 · 100² + 2 · 8 · 96²) floats, past 1 MB
  CHECK(std::string(cpu::direct_method(layer(3, 8, 5, 96, 1, 2), ConvDirection::BackwardFilter)) ==
        "vector loops over shifted rows");
}
