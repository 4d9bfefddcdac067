// bfloat16: the top 16 bits of a float32 (sign, the same 8 exponent bits, 7 of the 23
// mantissa bits). Same range as float32, about 3 significant digits: half the bytes of an
// activation or a weight copy, which is what a memory-bound step on bf16 tensor cores gains.
// The bits are those of CUDA's __nv_bfloat16 and of safetensors' "BF16", so a tensor of
// BFloat16 goes to cuBLAS, cuDNN or a file as it is.
//
// float → bf16 rounds to nearest, ties to even, as the GPU's __float2bfloat16 does (and
// PyTorch's): add 0x7fff plus the lowest kept bit to the 32 bits, then cut the low 16. Below
// half an ulp that cannot carry into the kept bits, above it always does, and at exactly half
// it carries only when the kept part is odd. Denormals are kept (rounded like any number);
// a NaN stays a quiet NaN (the addition could otherwise carry its payload into an infinity).
// bf16 → float is exact: the 16 bits back on top, zeros below.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace nnlab {

// The same bits read as another type of the same size (C++20's std::bit_cast; memcpy is the
// defined way to do it, also in device code, and compiles to a register move).
template <typename To, typename From>
NNLAB_HOST_DEVICE To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
  To to;
  memcpy(&to, &from, sizeof to);
  return to;
}

NNLAB_HOST_DEVICE uint16_t bf16_bits_from_float(float x) {
  uint32_t u = bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u | 0x00400000u) >> 16);  // NaN: quiet
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

NNLAB_HOST_DEVICE float float_from_bf16_bits(uint16_t bits) {
  return bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// x rounded to bf16 and widened back: the value a bf16 store keeps.
NNLAB_HOST_DEVICE float round_to_bf16(float x) { return float_from_bf16_bits(bf16_bits_from_float(x)); }

// The element type of DType::BFloat16: converts from and to float (an integer or a double
// goes through float first, as PyTorch's does), no arithmetic of its own: kernels widen to
// float, compute, and round once when they store.
// Trivial (no default value), as the other element types: arrays of it cost nothing to make.
struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;
  NNLAB_HOST_DEVICE explicit BFloat16(float x) : bits(bf16_bits_from_float(x)) {}
  NNLAB_HOST_DEVICE operator float() const { return float_from_bf16_bits(bits); }
};
static_assert(sizeof(BFloat16) == 2, "bfloat16 is 16 bits, as __nv_bfloat16 and safetensors' BF16");

}  // namespace nnlab
