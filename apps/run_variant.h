// A "run variant": one device with its settings, as compare, sweep and explain name them.
//
//   VARIANT  = DEVICE[:KEY=VALUE]...        DEVICE = cpu | cuda | cuda:N
//   KEY      = threads (CPU threads, 0 = all cores) | conv (reference | im2col | cudnn)
//            | math (fp32 | tf32 | bf16; tf32 and bf16 on CUDA only) | gemm (cublas | naive | tiled | registers; CUDA)
//            | reduce (uncoalesced | coalesced | tree | shuffle; CUDA only, devices/reduce_impl.h)
//            | precision (fp32 | bf16: the activations' storage, docs/precision.md)
//   e.g.  cpu:threads=1,cpu:threads=2     cpu:conv=reference,cpu:conv=im2col     cpu,cuda:math=tf32
//         cuda,cuda:gemm=tiled     cuda:reduce=uncoalesced,cuda:reduce=shuffle     cuda,cuda:precision=bf16
//
// A list is comma-separated. Settings a variant does not name come from the command's own
// --threads, --conv-impl, --gemm-impl, --reduce-impl and --precision.
#pragma once
#include <string>
#include <vector>

#include "core/device.h"
#include "devices/backend.h"
#include "devices/conv_impl.h"
#include "devices/gemm_impl.h"
#include "devices/reduce_impl.h"

namespace nnlab {

struct RunVariant {
  std::string label;        // the text as the user wrote it: "cpu:threads=1"
  std::string device_text;  // "cpu", "cuda", "cuda:1"
  int threads = 0;          // 0 = all cores
  ConvImpl conv = ConvImpl::Auto;
  GemmImpl gemm = GemmImpl::Cublas;
  ReduceImpl reduce = ReduceImpl::Auto;
  CudaMath math = CudaMath::Fp32;
  std::string precision;  // "fp32" or "bf16"; empty: the command's own --precision
};

// The precision v runs in: its own, else the command's.
inline std::string precision_of(const RunVariant& v, const std::string& command_precision = "fp32") {
  return v.precision.empty() ? command_precision : v.precision;
}

// Parses a comma-separated list; throws an Error naming the bad item and the syntax.
std::vector<RunVariant> parse_variants(const std::string& list, int default_threads, ConvImpl default_conv,
                                       GemmImpl default_gemm, ReduceImpl default_reduce);

// The help of --gemm-impl, which train, explain and sweep take (compare's says "for every variant").
inline constexpr const char* kGemmImplHelp =
    "GEMM kernels on CUDA (every Linear layer and matmul): cublas (the default), or nnlab's own: naive (one thread "
    "per output), tiled (shared-memory tiles) or registers (each thread a 4×4 block of C)";

// The help of --reduce-impl, which train, explain, compare and sweep take.
inline constexpr const char* kReduceImplHelp =
    "CUDA's Linear bias gradient, a rung of the reduction ladder (docs/backprop-to-kernels.md): auto (the backend's "
    "own kernel), uncoalesced, coalesced, tree or shuffle; the rungs run on CUDA only";

// Makes the variant current: CPU threads, convolution, GEMM and reduction implementations, math
// mode. Returns its device; throws (before anything runs) when the device cannot be used or the
// settings do not fit it (cudnn, an own GEMM kernel or a reduction rung on the CPU, tf32 on the
// CPU, CUDA absent).
Device apply_variant(const RunVariant& v);

// Checks every variant of a list can run here, without running anything.
void check_variants(const std::vector<RunVariant>& variants);

}  // namespace nnlab
