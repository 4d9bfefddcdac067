// Which convolution implementation the backends run, chosen at run time
// (`--conv-impl reference|im2col|winograd|cudnn` of train, explain and compare):
//   reference  the teaching kernels: a direct 7-loop convolution on the CPU
//              (conv2d_reference_cpu.cpp), one thread per output element on CUDA
//              (conv2d_reference_cuda.cu)
//   im2col     im2col + OpenBLAS sgemm for every shape (conv2d_cpu.cpp)
//   winograd   the CPU's fast path: Winograd F(2×2, 3×3) for 3×3 stride-1 convolutions with
//              enough channels (conv2d_winograd_cpu.cpp), direct vector loops for stride-1
//              convolutions with few input channels (conv2d_direct_cpu.cpp), im2col for the rest
//   cudnn      the CUDA fast path: cuDNN (conv2d_cuda.cu)
// `Fast` (the default) is each device's own fast path. The choice is process-wide; a choice
// a device cannot run (cudnn on the CPU, im2col or winograd on CUDA) is an error, never a fallback.
#pragma once
#include <string>

#include "core/device.h"

namespace nnlab {

enum class ConvImpl { Fast, Reference, Im2col, Winograd, Cudnn };

ConvImpl parse_conv_impl(const std::string& text);  // "reference" | "im2col" | "winograd" | "cudnn" | "fast"
const char* conv_impl_name(ConvImpl impl);
void set_conv_impl(ConvImpl impl);
ConvImpl conv_impl();
// Throws an Error when `impl` cannot run on `device`.
void check_conv_impl(ConvImpl impl, Device device);
// The implementation a device actually runs for `impl` (Fast resolved to winograd or cudnn).
ConvImpl resolved_conv_impl(ConvImpl impl, Device device);

}  // namespace nnlab
