// A convolution's backward one gradient at a time, through the one backward entry
// (Backend::conv2d_backward, no epilogue): what the tests compare between paths and devices.
#pragma once
#include "devices/backend.h"

namespace nnlab_test {

// dx = col2im(Wᵀ · dy)
inline void conv_backward_data(nnlab::Backend& be, const nnlab::Conv2dGeometry& g, const nnlab::Tensor& dy,
                               const nnlab::Tensor& w, nnlab::Tensor& dx) {
  nnlab::Tensor none;
  be.conv2d_backward(g, nnlab::ConvEpilogue{}, dy, none, none, w, dx, none, none);
}

// dw = Σ_n dy · im2col(x)ᵀ, and db = Σ_{n,p,q} dy with db
inline void conv_backward_filter(nnlab::Backend& be, const nnlab::Conv2dGeometry& g, const nnlab::Tensor& dy,
                                 const nnlab::Tensor& x, nnlab::Tensor& dw, nnlab::Tensor* db = nullptr) {
  nnlab::Tensor none, no_db;
  be.conv2d_backward(g, nnlab::ConvEpilogue{}, dy, none, x, none, none, dw, db ? *db : no_db);
}

// y = W ⋆ x + b
inline void conv_forward(nnlab::Backend& be, const nnlab::Conv2dGeometry& g, const nnlab::Tensor& x,
                         const nnlab::Tensor& w, const nnlab::Tensor* b, nnlab::Tensor& y) {
  be.conv2d_forward(g, nnlab::ConvEpilogue{}, x, w, b, y, nullptr);
}

}  // namespace nnlab_test
