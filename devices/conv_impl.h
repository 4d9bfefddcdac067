// Which convolution implementation the backends run, chosen at run time
// (`--conv-impl auto|reference|im2col|cudnn` of train, explain, compare and sweep):
//   auto       the device's own choice per layer (the default). On the CPU one function,
//              cpu::plan_conv (devices/cpu/conv2d_plan.cpp), picks Winograd, direct
//              loops or im2col + GEMM for each geometry and direction; on CUDA it is cuDNN,
//              except nnlab's direct kernels for a shallow layer pooled by its epilogue
//              (conv2d_direct_cuda.cu: the zoo's first layers)
//   reference  the teaching kernels: a direct 7-loop convolution on the CPU
//              (conv2d_reference_cpu.cpp), one thread per output element on CUDA
//              (conv2d_reference_cuda.cu)
//   im2col     the CPU's im2col + GEMM for every shape (conv2d_im2col_cpu.cpp)
//   cudnn      cuDNN for every layer (CUDA only)
// The choice is process-wide; a choice a device cannot run (cudnn on the CPU, im2col on
// CUDA) is an error, never a fallback. The old spellings `winograd` and `fast` meant what
// `auto` means; they are refused with a message naming `auto` rather than kept as aliases,
// so one name stays for one behaviour.
#pragma once
#include <string>

#include "core/device.h"

namespace nnlab {

enum class ConvImpl { Auto, Reference, Im2col, Cudnn };

ConvImpl parse_conv_impl(const std::string& text);  // "auto" | "reference" | "im2col" | "cudnn"
const char* conv_impl_name(ConvImpl impl);
void set_conv_impl(ConvImpl impl);
ConvImpl conv_impl();
// Throws an Error when `impl` cannot run on `device`.
void check_conv_impl(ConvImpl impl, Device device);

}  // namespace nnlab
