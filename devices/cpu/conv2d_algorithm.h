// The CPU's convolution algorithms, and the one function that picks one for a layer's geometry,
// direction and dtype. It is defined in conv2d_cpu.cpp, whose header lists which zoo layer takes
// which path and the measurements behind each rule.
#pragma once
#include "devices/backend.h"
#include "devices/conv_impl.h"
#include "devices/cpu/conv2d_winograd.h"

namespace nnlab::cpu {

enum class ConvDirection { Forward, BackwardData, BackwardFilter };

enum class ConvAlgorithm {
  Reference,        // the definition as plain loops (conv2d_reference_cpu.cpp)
  Direct,           // vector loops over shifted rows, for few input channels (conv2d_direct_cpu.cpp)
  Winograd,         // F(2×2, 3×3) or F(4×4, 3×3) (conv2d_winograd_cpu.cpp, winograd_tile below)
  Im2colSmallGemm,  // im2col + small_gemm.h's loops per image (conv2d_im2col_cpu.cpp)
  Im2colBlas,       // im2col + OpenBLAS per image (conv2d_im2col_cpu.cpp)
};

// The algorithm the CPU runs for one convolution call under `requested` (--conv-impl).
// Throws when `requested` is not a CPU choice (cudnn).
ConvAlgorithm choose_conv_algorithm(const Conv2dGeometry& g, ConvDirection direction, DType dtype,
                                    ConvImpl requested);
// The Winograd algorithm for one direction of a layer Winograd serves (conv2d_cpu.cpp).
WinogradTile winograd_tile(const Conv2dGeometry& g, ConvDirection direction);
// "winograd", "direct", "im2col+small_gemm", ...: what the kernel log and `nnlab explain` show.
const char* conv_algorithm_name(ConvAlgorithm algorithm);
// "fwd", "bwd data", "bwd filter".
const char* conv_direction_name(ConvDirection direction);

}  // namespace nnlab::cpu
