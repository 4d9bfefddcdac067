#include "layers/init.h"

#include <cmath>

#include "core/random.h"

namespace nnlab {

void init_fan_in_uniform(Tensor& weight, Tensor* bias, int64_t fan_in, uint64_t seed, uint32_t& next_stream) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  uniform_fill(weight, -bound, bound, RandomStream{seed, RandomPurpose::Init, next_stream++});
  if (bias && bias->defined()) uniform_fill(*bias, -bound, bound, RandomStream{seed, RandomPurpose::Init, next_stream++});
}

}  // namespace nnlab
