// Element types. float32 trains; float64 exists so gradient checks run the same templated
// CPU kernels in double precision; int32 holds labels and indices; uint8 holds raw pixels
// and dropout masks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nnlab {

enum class DType { Float32, Float64, Int32, UInt8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::UInt8: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::UInt8: return "uint8";
  }
  return "?";
}

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::UInt8; };

}  // namespace nnlab
