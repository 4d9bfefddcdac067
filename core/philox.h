// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Output = bijection(counter) under a key, so draw i of a stream
// is computed directly from i, with no state to carry between threads or devices. This one
// header compiles for the host and for CUDA; both give bit-identical 32-bit words.
//
// nnlab keys every draw by (seed, purpose, stream, index):
//   key     = seed (64 bits, split in two 32-bit halves)
//   counter = (index/4 low 32 bits, index/4 high 32 bits, purpose, stream)
//   word    = output[index % 4]
// so a draw never depends on how threads are laid out.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace nnlab {

// What a stream of draws is for; part of the counter so streams never overlap.
enum class RandomPurpose : uint32_t { Init = 1, Shuffle = 2, Dropout = 3, Augment = 4, Split = 5 };

// A Dropout mask's stream: the layer in the high 8 bits, its step count mod 2²⁴ in the low 24
// (layers/dropout.h). The count is read where the mask is drawn, on the CPU or the GPU.
constexpr uint32_t kDropoutStepBits = 24;
NNLAB_HOST_DEVICE uint32_t dropout_stream(uint32_t layer_stream, int32_t step_count) {
  return layer_stream | (static_cast<uint32_t>(step_count) & ((1u << kDropoutStepBits) - 1));
}

struct PhiloxBlock {
  uint32_t v[4];
};

NNLAB_HOST_DEVICE void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

// Ten rounds; the key is bumped by the Weyl constants between rounds.
NNLAB_HOST_DEVICE PhiloxBlock philox4x32_10(PhiloxBlock ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMul0, ctr.v[0], hi0, lo0);
    philox_mulhilo(kMul1, ctr.v[2], hi1, lo1);
    ctr = PhiloxBlock{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return ctr;
}

// Draws 4·block … 4·block + 3 of stream (seed, purpose, stream): one Philox call gives four.
NNLAB_HOST_DEVICE PhiloxBlock philox_block(uint64_t seed, uint32_t purpose, uint32_t stream, uint64_t block) {
  return philox4x32_10(
      PhiloxBlock{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), purpose, stream}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The index-th 32-bit draw of stream (seed, purpose, stream). A loop over consecutive draws
// wastes three quarters of each block: it should take philox_block's four words at once.
NNLAB_HOST_DEVICE uint32_t philox_u32(uint64_t seed, uint32_t purpose, uint32_t stream, uint64_t index) {
  return philox_block(seed, purpose, stream, index >> 2).v[index & 3];
}

// Uniform in [0, 1) with 24 random bits: exactly representable in float32.
NNLAB_HOST_DEVICE float u32_to_unit_float(uint32_t u) { return static_cast<float>(u >> 8) * (1.0f / 16777216.0f); }

}  // namespace nnlab
