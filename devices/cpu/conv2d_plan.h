// The CPU's convolution plan: what runs for one convolution call, decided once.
//
// plan_conv (conv2d_plan.cpp, the router) looks at a call's geometry, direction, dtype, the
// --conv-impl request and the max-pool fused after it, and returns a ConvPlan: the algorithm,
// its variant (Winograd's tile, the direct loops' layout), whether the kernel pools as it
// writes, and the rule that decided, in words. The kernels take the plan and decide nothing;
// the kernel log (`nnlab explain`) prints it with its reason. Plans are cached per call shape,
// so the rules run once per layer and direction, not once per step.
#pragma once
#include <string>

#include "devices/backend.h"
#include "devices/conv_impl.h"

namespace nnlab::cpu {

enum class ConvDirection { Forward, BackwardData, BackwardFilter };

enum class ConvAlgorithm {
  Reference,        // the definition as plain loops (conv2d_reference_cpu.cpp)
  Direct,           // vector loops over shifted rows, for few input channels (conv2d_direct_cpu.cpp)
  Winograd,         // F(2×2, 3×3) or F(4×4, 3×3) (conv2d_winograd_cpu.cpp)
  Im2colSmallGemm,  // im2col + small_gemm.h's loops per image (conv2d_im2col_cpu.cpp)
  Im2colBlas,       // im2col + OpenBLAS per image (conv2d_im2col_cpu.cpp)
};

// Winograd's two algorithms (conv2d_winograd_tiles.h), by outputs per tile side.
enum class WinogradTile { F2x2 = 2, F4x4 = 4 };

// What the direct loops put in a vector's lanes (conv2d_direct_cpu.cpp and its two siblings).
enum class DirectLayout {
  Rows,          // neighbouring output columns of one row (conv2d_direct_cpu.cpp)
  ChannelLanes,  // neighbouring output channels (conv2d_direct_channels_cpu.cpp)
  ImageLanes,    // the same position in neighbouring images (conv2d_direct_images_cpu.cpp)
};

struct ConvPlan {
  ConvAlgorithm algorithm = ConvAlgorithm::Reference;
  WinogradTile tile = WinogradTile::F2x2;     // Winograd only
  DirectLayout layout = DirectLayout::Rows;  // Direct only
  // With a max-pool (+ ReLU) fused after the convolution: whether this kernel pools each plane
  // as it writes it (forward) or routes the pool's gradient to the winners as it reads it
  // (backward), so the convolution's own output or gradient is never stored.
  bool pools = false;
  std::string reason;  // the rules that decided, in words: what `nnlab explain` prints after "why:"
};

// The plan of one call. pool: the max-pool fused after the convolution, or null. Throws when
// `requested` is not a CPU choice (cudnn).
const ConvPlan& plan_conv(const Conv2dGeometry& g, ConvDirection direction, DType dtype, ConvImpl requested,
                          const Pool2dGeometry* pool = nullptr);

// "winograd", "direct", "im2col+small_gemm", ...: the kernel log's first word.
const char* conv_algorithm_name(ConvAlgorithm algorithm);
// "fwd", "bwd data", "bwd filter".
const char* conv_direction_name(ConvDirection direction);
// "F(4×4,3×3)".
const char* winograd_tile_name(WinogradTile tile);
// "output channels in the vector lanes".
const char* direct_layout_name(DirectLayout layout);

}  // namespace nnlab::cpu
