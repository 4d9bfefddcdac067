// The pooling ops' window geometry (pool2d.cpp), shared with the convolution that pools its
// own output (conv2d.cpp's max-pool epilogue), whose input to the pool is never a tensor.
#pragma once
#include <string>

#include "devices/backend.h"

namespace nnlab {

// x: (n, c, h, w), `x_text` its description for the messages (Tensor::describe). PyTorch's
// rules for a square window: stride 0 means stride = kernel, floor mode, padding at most half
// the kernel (every window holds at least one real cell), at least one output.
Pool2dGeometry pool2d_geometry(const char* op, int64_t n, int64_t c, int64_t h, int64_t w, const std::string& x_text,
                               int64_t kernel, int64_t stride, int64_t padding);

}  // namespace nnlab
