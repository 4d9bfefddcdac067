// Element types. float32 trains; float64 exists so gradient checks run the same templated
// CPU kernels in double precision; int32 holds labels and indices; uint8 holds raw pixels
// and dropout masks; bfloat16 (core/bfloat16.h) holds values in half the bytes: stored,
// cast and saved on every device, and multiplied by Backend::gemm; no layer uses it yet (bf16
// activations on the GPU are issue 35's work; the products' bf16 rounding is `--math bf16`,
// docs/gpu.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/bfloat16.h"

namespace nnlab {

enum class DType { Float32, Float64, Int32, UInt8, BFloat16 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::UInt8: return 1;
    case DType::BFloat16: return 2;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::UInt8: return "uint8";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BFloat16; };

}  // namespace nnlab
