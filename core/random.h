// Host-side draws built on Philox: uniform and normal fills (weights are initialised on the
// host and copied, so every device starts from the same bits), and seeded permutations
// (shuffles are drawn on the host).
#pragma once
#include <cstdint>
#include <vector>

#include "core/philox.h"
#include "core/tensor.h"

namespace nnlab {

struct RandomStream {
  uint64_t seed = 0;
  RandomPurpose purpose = RandomPurpose::Init;
  uint32_t stream = 0;
  uint32_t u32(uint64_t index) const { return philox_u32(seed, static_cast<uint32_t>(purpose), stream, index); }
  // Draws 4b … 4b + 3 at once: u32(4b + w) is block(b).v[w].
  PhiloxBlock block(uint64_t b) const { return philox_block(seed, static_cast<uint32_t>(purpose), stream, b); }
  // Uniform in [0, 1) with 53 bits, from draws 2i and 2i+1.
  double unit_double(uint64_t i) const;
  // Uniform integer in [0, n) by 64-bit multiply-shift (bias below n / 2^64).
  uint64_t below(uint64_t i, uint64_t n) const;
};

// Fills a float tensor (any device) with U(lo, hi) / N(mean, std) drawn from the stream.
void uniform_fill(Tensor& t, double lo, double hi, const RandomStream& rs);
void normal_fill(Tensor& t, double mean, double std, const RandomStream& rs);

// A uniformly random permutation of 0..n-1 (Fisher–Yates; swap i uses draws 2i, 2i+1).
std::vector<int32_t> random_permutation(int64_t n, const RandomStream& rs);

}  // namespace nnlab
