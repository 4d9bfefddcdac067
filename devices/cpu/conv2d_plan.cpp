// The CPU's convolution router: plan_conv decides what runs for a call, one rule per line.
// The measurements behind each rule are in docs/cpu-kernels.md ("How the CPU picks a
// convolution"); tests/test_conv_plan.cpp pins the plan of every zoo layer.
#include "devices/cpu/conv2d_plan.h"

#include <array>
#include <map>
#include <mutex>

#include "devices/cpu/conv2d_direct.h"
#include "devices/cpu/conv2d_im2col.h"
#include "devices/cpu/conv2d_winograd.h"

namespace nnlab::cpu {

namespace {

// ---- the rules ---------------------------------------------------------------------------

bool winograd_applies(const Conv2dGeometry& g) {
  return g.r == 3 && g.s == 3 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h <= 2 && g.pad_w <= 2 &&
         g.c >= kWinogradMinChannels && g.k >= kWinogradMinChannels && g.p >= 1 && g.q >= 1;
}

// F(4×4) does 2.25 products per output against F(2×2)'s 4, but costs more per transform and
// pads a plane whose side is not a multiple of 4 with outputs nobody wants. Measured alternated
// (scripts/bench_conv.cpp 31 2, AMD EPYC Zen 5 on 2 threads, 4 runs, 2026-12-02; median F(4×4)
// / median F(2×2)): the forward and data gradient took 0.77–0.96 on cifar-cnn's 32×32 and 16×16
// planes (once 1.11) and 0.81–0.99 on resnet8's; on the cnn's 14×14 (31% padding) 0.99–1.23.
// The filter gradient alone came and went with the host's state (0.85–1.41 on cifar-cnn, its
// partial sums 2.25 times F(2×2)'s); in the whole step, once its last transform ran a vector of
// filters at a time, cifar-cnn's step took 0.90–0.94 of F(2×2)'s (ratios of medians, 8–10
// alternated pairs of `nnlab explain`, one and two threads, 2026-12-02), so it takes F(4×4) too.
WinogradTile winograd_tile(const Conv2dGeometry& g) {
  const bool whole_tiles = g.p % 4 == 0 && g.q % 4 == 0;
  const bool wide = (g.p >= 28 && g.q >= 28) || (g.p >= 16 && g.q >= 16 && whole_tiles);
  return wide ? WinogradTile::F4x4 : WinogradTile::F2x2;
}

bool direct_applies(const Conv2dGeometry& g, ConvDirection direction) {
  const bool shape = g.stride_h == 1 && g.stride_w == 1 && g.pad_h < g.r && g.pad_w < g.s &&
                     g.c <= kDirectMaxChannels && g.c * g.r * g.s >= kDirectMinTaps;
  if (direction != ConvDirection::BackwardFilter) return shape;
  return shape && (g.k <= kDirectBlock || g.p * g.q <= 256);
}

// Output channels fill whole vectors, rows would leave lanes idle, and the filter width has
// an instance (conv2d_direct_channels_cpu.cpp). The forward needs at least two rows.
bool channel_lanes_pay(const Conv2dGeometry& g, ConvDirection direction) {
  const bool shape = g.k % kDirectLanes == 0 && g.q % kDirectLanes != 0 && (g.s == 3 || g.s == 5);
  if (direction == ConvDirection::Forward) return shape && g.p >= 2;
  return shape && direction == ConvDirection::BackwardFilter;
}

// A batch fills whole vectors of images and a thread's two buffers stay within 1 MB, so a
// large plane keeps the row layout rather than hundreds of megabytes of buffers.
bool image_lanes_pay(const Conv2dGeometry& g, ConvDirection direction) {
  constexpr int64_t kMostFloats = int64_t(1) << 18;
  if (g.n < kDirectLanes) return false;
  if (direction == ConvDirection::BackwardData)  // 16 images' dy and dx
    return kDirectLanes * (g.k * (g.p + 2) * g.q + g.c * g.h * g.w) <= kMostFloats;
  if (direction != ConvDirection::BackwardFilter) return false;
  // 16 images' bordered x, and their dy twice; only for a few output channels (a first layer)
  const int64_t floats =
      kDirectLanes * (g.c * (g.h + 2 * g.pad_h) * (g.w + 2 * g.pad_w) + 2 * kDirectBlock * g.p * g.q);
  return g.k <= kDirectBlock && floats <= kMostFloats;
}

DirectLayout direct_layout(const Conv2dGeometry& g, ConvDirection direction) {
  if (channel_lanes_pay(g, direction)) return DirectLayout::ChannelLanes;
  if (image_lanes_pay(g, direction)) return DirectLayout::ImageLanes;
  return DirectLayout::Rows;
}

// The pool the Winograd and direct kernels fuse: the 2×2, stride 2, unpadded one of the whole output.
bool pool_is_2x2_of_output(const Conv2dGeometry& g, const Pool2dGeometry& pg) {
  return pg.kernel_h == 2 && pg.kernel_w == 2 && pg.stride_h == 2 && pg.stride_w == 2 && pg.pad_h == 0 &&
         pg.pad_w == 0 && pg.h == g.p && pg.w == g.q;
}

ConvPlan decide(const Conv2dGeometry& g, ConvDirection direction, DType dtype, ConvImpl requested,
                const Pool2dGeometry* pool) {
  ConvPlan plan;
  const bool fusable_pool = pool && pool_is_2x2_of_output(g, *pool);
  if (requested == ConvImpl::Reference) {
    plan.reason = "--conv-impl reference: the definition as loops";
  } else if (requested == ConvImpl::Auto && winograd_applies(g)) {
    plan.algorithm = ConvAlgorithm::Winograd;
    plan.tile = winograd_tile(g);
    plan.pools = fusable_pool;
    plan.reason = "3×3, stride 1, ≥ 8 channels in and out: fewer multiplies outweigh the transforms";
    plan.reason += plan.tile == WinogradTile::F4x4 ? "; F(4×4) for planes of ≥ 28×28, or ≥ 16×16 in whole tiles"
                                                   : "; F(2×2) for smaller planes";
  } else if (requested == ConvImpl::Auto && direct_applies(g, direction)) {
    plan.algorithm = ConvAlgorithm::Direct;
    plan.layout = direct_layout(g, direction);
    // Forward pools only in the row layout; backward routes in rows or image lanes, never for dx.
    plan.pools =
        fusable_pool && direction != ConvDirection::BackwardData && plan.layout != DirectLayout::ChannelLanes;
    plan.reason = "stride 1, ≤ 7 input channels, ≥ 25 taps: too shallow for im2col + GEMM to pay";
    if (plan.layout == DirectLayout::ChannelLanes) plan.reason += "; output channels fill whole vectors";
    if (plan.layout == DirectLayout::ImageLanes) plan.reason += "; 16 images fill the lanes within 1 MB";
  } else {
    // small_gemm has float32 NN and NT loops; backward data's Wᵀ · dy is TN.
    const int64_t depth = direction == ConvDirection::Forward ? kSmallGemmMaxForwardDepth : kSmallGemmMaxDepth;
    const bool small = dtype == DType::Float32 && direction != ConvDirection::BackwardData && g.c * g.r * g.s <= depth;
    plan.algorithm = small ? ConvAlgorithm::Im2colSmallGemm : ConvAlgorithm::Im2colBlas;
    plan.reason = requested == ConvImpl::Im2col ? "--conv-impl im2col" : "no Winograd or direct shape";
    plan.reason += small ? "; c·r·s ≤ " + std::to_string(depth) + " in float32: small_gemm needs no packing"
                         : "; OpenBLAS: deep fields, the data gradient (TN) or float64";
  }
  if (pool && !plan.pools) plan.reason += "; the max-pool runs as its own kernel";
  if (plan.pools)
    plan.reason += direction == ConvDirection::Forward ? "; pools each plane in the cache"
                                                       : "; unpools the gradient plane by plane";
  return plan;
}

// ---- the cache ---------------------------------------------------------------------------

using PlanKey = std::array<int64_t, 23>;

PlanKey key_of(const Conv2dGeometry& g, ConvDirection direction, DType dtype, ConvImpl requested,
               const Pool2dGeometry* pool) {
  const Pool2dGeometry p = pool ? *pool : Pool2dGeometry{};
  return {g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.p, g.q,
          int64_t(direction), int64_t(dtype), int64_t(requested), pool != nullptr,
          p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w};
}

}  // namespace

const ConvPlan& plan_conv(const Conv2dGeometry& g, ConvDirection direction, DType dtype, ConvImpl requested,
                          const Pool2dGeometry* pool) {
  check_conv_impl(requested, Device::cpu());  // cudnn is refused here
  static std::mutex mutex;
  static std::map<PlanKey, ConvPlan> plans;  // a node's address never changes: the reference stays valid
  const PlanKey key = key_of(g, direction, dtype, requested, pool);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = plans.find(key);
  if (found == plans.end()) found = plans.emplace(key, decide(g, direction, dtype, requested, pool)).first;
  return found->second;
}

const char* conv_algorithm_name(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::Reference: return "reference";
    case ConvAlgorithm::Direct: return "direct";
    case ConvAlgorithm::Winograd: return "winograd";
    case ConvAlgorithm::Im2colSmallGemm: return "im2col+small_gemm";
    case ConvAlgorithm::Im2colBlas: return "im2col+blas";
  }
  return "?";
}

const char* conv_direction_name(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::Forward: return "fwd";
    case ConvDirection::BackwardData: return "bwd data";
    case ConvDirection::BackwardFilter: return "bwd filter";
  }
  return "?";
}

const char* winograd_tile_name(WinogradTile tile) {
  return tile == WinogradTile::F4x4 ? "F(4×4,3×3)" : "F(2×2,3×3)";
}

const char* direct_layout_name(DirectLayout layout) {
  switch (layout) {
    case DirectLayout::Rows: return "vector loops over shifted rows";
    case DirectLayout::ChannelLanes: return "output channels in the vector lanes";
    case DirectLayout::ImageLanes: return "images in the vector lanes";
  }
  return "?";
}

}  // namespace nnlab::cpu
