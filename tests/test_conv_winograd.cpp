// The two Winograd algorithms of the CPU, F(2×2, 3×3) and F(4×4, 3×3), called directly
// (whichever one a layer would get) against the reference kernels' loops, in every direction:
// float64 to its rounding, float32 within the error bound the larger tile's transforms allow.
// Shapes cover what the plane layout has to get right: every padding, odd output sizes (tiles
// hanging over the edge), rows of tiles that fill one vector, part of one, or are paired two
// to a vector (at most 4 tiles across), an odd number of paired rows, chunks of one image
// spread over the threads, a filter gradient with transposed products; under AVX2 and AVX-512.
#include <catch2/catch.hpp>

#include <string>
#include <type_traits>
#include <vector>

#include "devices/cpu/conv2d_plan.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/cpu_backend.h"
#include "devices/cpu/threads.h"
// lane_vectors.h as the AVX2 kernels have it (the header belongs to the kernels compiled once
// per instruction set; the AVX-512 build's masked loads run inside the kernel tests above).
// (Built without AVX, with -Wno-psabi: tests/CMakeLists.txt says why.)
#define NNLAB_ISA avx2
#include "devices/cpu/lane_vectors.h"
#include "cpu_paths_support.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::random_tensor;
using nnlab_test::require_close_to_scale;

namespace {

constexpr uint64_t kWinogradSeed = 91;

Conv2dGeometry geometry(int64_t n, int64_t c, int64_t k, int64_t h, int64_t w, int64_t pad_h, int64_t pad_w) {
  return {n, c, h, w, k, 3, 3, 1, 1, pad_h, pad_w, h + 2 * pad_h - 2, w + 2 * pad_w - 2};
}

// Runs the three directions of `tile` in `dtype` and checks them against the float64
// reference kernels, to `eps` of each result's largest value.
void check_tile(const Conv2dGeometry& g, cpu::WinogradTile tile, DType dtype, double eps) {
  INFO(cpu::winograd_tile_name(tile) << " " << dtype_name(dtype) << " n=" << g.n << " c=" << g.c << " k=" << g.k
                                     << " " << g.h << "×" << g.w << " pad (" << g.pad_h << "," << g.pad_w << ")");
  const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, kWinogradSeed, 1), w = random_tensor({g.k, g.c, 3, 3}, kWinogradSeed, 2);
  const Tensor b = random_tensor({g.k}, kWinogradSeed, 3), dy = random_tensor({g.n, g.k, g.p, g.q}, kWinogradSeed, 4);
  Tensor y_ref = Tensor::empty({g.n, g.k, g.p, g.q}, DType::Float64), dx_ref = Tensor::empty(x.shape(), DType::Float64),
         dw_ref = Tensor::empty(w.shape(), DType::Float64);
  cpu::conv2d_reference_forward(g, x, w, &b, y_ref);
  cpu::conv2d_reference_backward_data(g, dy, w, dx_ref);
  cpu::conv2d_reference_backward_filter(g, dy, x, dw_ref);

  const Tensor xt = x.to(dtype), wt = w.to(dtype), bt = b.to(dtype), dyt = dy.to(dtype);
  Tensor y = Tensor::empty(y_ref.shape(), dtype), dx = Tensor::empty(x.shape(), dtype),
         dw = Tensor::empty(w.shape(), dtype);
  cpu::winograd_forward(g, tile, xt, wt, &bt, y, false);
  cpu::winograd_backward_data(g, tile, dyt, wt, dx);
  cpu::winograd_backward_filter(g, tile, dyt, xt, dw, nullptr);
  require_close_to_scale(y.to_vector<double>(), y_ref.to_vector<double>(), eps, "forward");
  require_close_to_scale(dx.to_vector<double>(), dx_ref.to_vector<double>(), eps, "backward data");
  require_close_to_scale(dw.to_vector<double>(), dw_ref.to_vector<double>(), eps, "backward filter");
}

}  // namespace

TEST_CASE("Winograd F(2x2,3x3) and F(4x4,3x3) match the reference in every direction", "[conv2d][winograd]") {
  const std::vector<Conv2dGeometry> shapes = {
      geometry(3, 9, 8, 40, 37, 1, 1),  // wide rows: several vectors of tiles, the last one partial
      geometry(3, 9, 8, 40, 37, 0, 0),  // every padding, and mixed
      geometry(3, 9, 8, 40, 37, 2, 2),
      geometry(2, 8, 8, 3, 4, 0, 2),    // 1×6 output: one row of tiles
      geometry(1, 16, 8, 7, 5, 1, 1),   // one image, odd sizes
      geometry(5, 8, 12, 14, 14, 1, 1), // the cnn's layer, small: F(4×4) pairs its 4 tile rows
      geometry(2, 8, 8, 16, 16, 1, 1),  // cifar-cnn's c3/c4 plane: 4 × 4 tiles of F(4×4)
      geometry(2, 8, 8, 10, 9, 1, 1),   // F(4×4): 3 tiles across, 3 rows: the last pair has one row
      geometry(2, 8, 9, 32, 32, 1, 1),  // cifar-cnn's c2 plane: 8 (16) tiles across fill whole vectors
      geometry(65, 8, 8, 6, 6, 1, 1),   // more images than one chunk holds
      // 64 output channels: the filter gradient's products transpose V first (its 20 channels
      // and 50 tiles: whole 16 × 16 or 8 × 8 register blocks and their edges)
      geometry(2, 20, 64, 9, 9, 1, 1),
      // 16 or 32 channels over rows of 16 or 32: the filter gradient takes its input tiles with
      // the channels in the lanes (conv2d_winograd_channels.h), in each padding
      geometry(2, 16, 8, 16, 16, 1, 1),
      geometry(3, 32, 8, 13, 16, 0, 0),
      geometry(1, 16, 12, 16, 32, 2, 2),
      // 16 or 32 channels in and out over rows of 16 or 32: the forward and the data gradient
      // with the channels in the lanes too; rows of tiles hanging over the bottom (18 rows), the
      // right (no padding: 14 columns out; its data gradient, 14 wide, takes the planes), both
      // (padding 2), more images than one chunk holds
      geometry(2, 16, 16, 16, 16, 1, 1),
      geometry(3, 32, 16, 18, 16, 1, 1),
      geometry(2, 16, 32, 13, 16, 0, 0),
      geometry(1, 16, 16, 14, 32, 2, 2),
      geometry(70, 16, 16, 8, 16, 1, 1),
  };
  nnlab_test::for_each_cpu_isa([&](CpuIsa isa) {
    INFO("kernels: " << cpu_isa_name(isa));
    for (const cpu::WinogradTile tile : {cpu::WinogradTile::F2x2, cpu::WinogradTile::F4x4})
      for (const Conv2dGeometry& g : shapes) {
        check_tile(g, tile, DType::Float64, 1e-12);
        // float32: measured worst errors are about 2e-7 of the scale for F(2×2) and 4e-6 for
        // F(4×4), whose transforms multiply by 4, 5 and 8; a wrong index errs by O(1).
        check_tile(g, tile, DType::Float32, tile == cpu::WinogradTile::F4x4 ? 2e-5 : 1e-6);
      }
  });
}

// The filter gradient sums its chunks of images in runs (balanced_loops.h), each run into a
// partial of its own that its first chunk writes and the others add to: on one thread one run
// of all the chunks, on two at most 8 runs.
TEST_CASE("Winograd's filter gradient sums every chunk of a run on one thread and on two", "[conv2d][winograd]") {
  const Conv2dGeometry g = geometry(10, 16, 16, 32, 32, 1, 1);  // channel lanes; 2 images a chunk
  for (const int threads : {1, 2}) {
    INFO(threads << " thread(s)");
    set_cpu_threads(threads);
    // 10 images' sums in one run on one thread: float32 errs by about 2e-6 of the scale; a
    // chunk dropped, by O(1).
    check_tile(g, cpu::WinogradTile::F2x2, DType::Float32, 1e-5);
  }
  set_cpu_threads(0);
}

TEST_CASE("Winograd takes the larger tile only where it measured faster", "[conv2d][winograd]") {
  // the plan's rule (conv2d_plan.cpp): F(4×4, 3×3) in every direction from 28×28 outputs, or
  // from 16×16 in whole 4×4 tiles; the cnn's 14×14 planes and smaller ones keep F(2×2, 3×3).
  using cpu::ConvDirection;
  using cpu::WinogradTile;
  const Conv2dGeometry c2 = geometry(64, 32, 32, 32, 32, 1, 1), c4 = geometry(64, 64, 64, 16, 16, 1, 1);
  const Conv2dGeometry cnn = geometry(64, 32, 64, 14, 14, 1, 1), odd = geometry(8, 16, 16, 29, 29, 1, 1);
  const Conv2dGeometry narrow = geometry(8, 16, 16, 18, 18, 1, 1), small = geometry(8, 64, 64, 8, 8, 1, 1);
  for (const Conv2dGeometry& wide : {c2, c4, odd}) {
    for (ConvDirection d : {ConvDirection::Forward, ConvDirection::BackwardData, ConvDirection::BackwardFilter})
      CHECK(cpu::plan_conv(wide, d, DType::Float32, ConvImpl::Auto).tile == WinogradTile::F4x4);
  }
  for (ConvDirection d : {ConvDirection::Forward, ConvDirection::BackwardData, ConvDirection::BackwardFilter})
    for (const Conv2dGeometry& g : {cnn, narrow, small})
      CHECK(cpu::plan_conv(g, d, DType::Float32, ConvImpl::Auto).tile == WinogradTile::F2x2);
  CHECK(std::string(cpu::winograd_tile_name(WinogradTile::F4x4)) == "F(4×4,3×3)");
}

TEST_CASE("Lane vectors split and merge columns mod 2 and mod 4, and touch only the lanes asked for",
          "[conv2d][winograd]") {
  using cpu::avx2::Vector;
  constexpr long L = cpu::avx2::kVectorLanes<float>;
  // load_first / store_first: every count from below zero to past a vector, against sentinels.
  for (long count = -1; count <= L + 1; ++count) {
    INFO("count " << count);
    std::vector<float> src(L), dst(L + 2, -1.0f);
    for (long l = 0; l < L; ++l) src[l] = float(l + 1);
    const Vector<float> v = cpu::avx2::load_first(src.data(), count);
    for (long l = 0; l < L; ++l) CHECK(v[l] == (l < count ? src[l] : 0.0f));
    cpu::avx2::store_first(dst.data(), v, count);
    for (long l = 0; l < L + 2; ++l) CHECK(dst[l] == (l < std::min(count, L) ? src[l] : -1.0f));
  }
  // m·L consecutive values: phase j holds the values ≡ j mod m, and merging gives them back.
  const auto check_phases = [&](auto phases_tag) {
    constexpr int m = decltype(phases_tag)::value;
    Vector<float> block[m], phase[m], back[m];
    for (int b = 0; b < m; ++b)
      for (long l = 0; l < L; ++l) block[b][l] = float(b * L + l);
    cpu::avx2::split_phases<m>(block, phase);
    for (int j = 0; j < m; ++j)
      for (long l = 0; l < L; ++l) CHECK(phase[j][l] == float(l * m + j));
    cpu::avx2::merge_phases<m>(phase, back);
    for (int b = 0; b < m; ++b)
      for (long l = 0; l < L; ++l) CHECK(back[b][l] == block[b][l]);
  };
  check_phases(std::integral_constant<int, 2>{});
  check_phases(std::integral_constant<int, 4>{});
  // load_halves / store_halves: lanes [0, L/2) from one place, the rest from another.
  std::vector<float> lower = {1, 2, 3, 4}, upper = {5, 6, 7, 8}, out_lower(4, -1.0f), out_upper(4, -1.0f);
  const Vector<float> joined = cpu::avx2::load_halves(lower.data(), upper.data());
  for (long l = 0; l < L; ++l) CHECK(joined[l] == float(l + 1));
  cpu::avx2::store_halves(out_lower.data(), static_cast<float*>(nullptr), joined);
  CHECK(out_lower == lower);
  CHECK(out_upper == std::vector<float>(4, -1.0f));
  cpu::avx2::store_halves(out_lower.data(), out_upper.data(), joined);
  CHECK(out_upper == upper);
}
