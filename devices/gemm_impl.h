// Which GEMM the CUDA backend runs, chosen at run time (`--gemm-impl cublas|naive|tiled|registers`
// of train, explain, compare and sweep; `cuda:gemm=tiled` in a run variant). The four rungs of
// a ladder, each computing C = alpha · op(A) · op(B) + beta · C (Backend::gemm, and so every
// Linear layer and matmul):
//   cublas     NVIDIA's cuBLAS (gemm_cuda.cu): the default, and the yardstick of the others
//   naive      one thread per element of C, every operand read from global memory
//   tiled      tiles of A and B staged in shared memory, each element read once per tile
//   registers  shared-memory tiles, and each thread a 4×4 block of C held in registers
// The three own kernels are in devices/cuda/gemm_ladder_cuda.cu; they compute in strict
// float32 whatever --math says (no tensor cores).
//
// The choice is process-wide. The CPU has its own products (OpenBLAS and nnlab's small
// kernels), so a run on the CPU with another rung than cublas is refused by the options'
// check (check_gemm_impl), never silently run on something else; the CPU's kernels ignore
// the setting, so a test can run the CPU twin beside a CUDA rung in one process.
#pragma once
#include <string>

#include "core/device.h"

namespace nnlab {

enum class GemmImpl { Cublas, Naive, Tiled, Registers };

GemmImpl parse_gemm_impl(const std::string& text);  // "cublas" | "naive" | "tiled" | "registers"
const char* gemm_impl_name(GemmImpl impl);
void set_gemm_impl(GemmImpl impl);
GemmImpl gemm_impl();
// Throws an Error when `impl` cannot run on `device` (an own kernel on the CPU).
void check_gemm_impl(GemmImpl impl, Device device);

}  // namespace nnlab
