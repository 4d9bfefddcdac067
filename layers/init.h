// PyTorch's default initialisation, drawn from Philox on the host.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace nnlab {

// Linear and Conv2d (torch.nn.Linear.reset_parameters): kaiming_uniform_(w, a=√5) gives
// bound = gain·√(3/fan_in) with gain = √(2/(1+a²)) = √(1/3), i.e. U(±1/√fan_in); the bias
// is U(±1/√fan_in) as well. fan_in = in_features, or in_channels·kh·kw for a convolution.
void init_fan_in_uniform(Tensor& weight, Tensor* bias, int64_t fan_in, uint64_t seed, uint32_t& next_stream);

}  // namespace nnlab
