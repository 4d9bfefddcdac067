// im2col + GEMM convolution kernels of the CPU backend (conv2d_im2col_cpu.cpp), run where the
// plan (conv2d_plan.h) says Im2colSmallGemm or Im2colBlas (and for every layer under
// --conv-impl im2col).
#pragma once
#include <string>

#include "devices/cpu/conv2d_plan.h"

namespace nnlab::cpu {

// Float32 products whose inner dimension c·r·s is at most this (the first layers: 9 or 27)
// go to small_gemm.h's register-blocked loops, which need no packing: OpenBLAS's kernels
// spend more on packing than on multiplying there (cnn c1 0.87–0.90 → 0.61–0.62 ms a step).
constexpr int64_t kSmallGemmMaxDepth = 64;
// The forward's W · columns keeps small_gemm deeper, to c·r·s = 512: each image's columns
// (c·r·s × p·q) stay in the core's cache, and resnet8's stride-2 3×3 layers (c·r·s 144 and
// 288) ran 1.19–1.23 → 0.88–0.95 ms and 0.82–0.91 → 0.68–0.71 ms a step (2 Zen 5 threads,
// alternated explain runs). Their filter gradients (NT) did not gain: 1.72–1.78 against
// 1.88–1.95 ms for one, 2.30–2.63 against 2.11–2.21 for the other, so they keep OpenBLAS.
constexpr int64_t kSmallGemmMaxForwardDepth = 512;

// "NN 32×784×9": the row-major product op(A) · op(B), m × n with inner dimension k, that one
// image of a direction runs, for the kernel log.
std::string im2col_product_text(const Conv2dGeometry& g, ConvDirection direction);

// `product` is Im2colSmallGemm or Im2colBlas, as the plan says; backward
// data is always OpenBLAS (its Wᵀ · dy has no small_gemm form).
void im2col_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                    ConvAlgorithm product);
void im2col_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx);
// db (k) or null: the bias gradient too, summed as bias_backward sums (the same bits).
void im2col_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw, Tensor* db,
                            ConvAlgorithm product);
// The weight and bias gradients (db may be null) of a convolution with its ReLU fused, y its
// output, for a layer whose input needs no gradient: dz = dy·[y > 0] is made image by image and
// used at once, never stored whole. The bits of relu_bias_backward, then im2col_backward_filter.
void im2col_relu_backward_params(const Conv2dGeometry& g, const Tensor& y, const Tensor& dy, const Tensor& x,
                                 Tensor& dw, Tensor* db, ConvAlgorithm product);

}  // namespace nnlab::cpu
