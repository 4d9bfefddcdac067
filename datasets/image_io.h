// Single images from disk (PNG, JPEG, BMP through stb_image) and their conversion to a
// model's input:
//
//   read_image      header checked first (stbi_info): empty, truncated, unknown format or
//                   absurd dimensions are refused before any pixel is decoded
//   channels        RGB → gray: Y = 0.299 R + 0.587 G + 0.114 B (ITU-R BT.601, as PIL's "L");
//                   gray → RGB: the gray value in all three channels; alpha is dropped
//   resize          bilinear with half-pixel centres (PyTorch's align_corners=False, no
//                   antialiasing): source coordinate s = (d + ½)·in/out − ½, clamped
//   scale           x / 255 into [0, 1]
//   normalise       y = (x − mean[c]) / std[c] when a Normalization is given
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "datasets/dataloader.h"

namespace nnlab {

// Largest image nnlab decodes: per side, and in total pixels.
constexpr int64_t kMaxImageSide = 16384;
constexpr int64_t kMaxImagePixels = 64LL * 1000 * 1000;

struct ImageInfo {
  int64_t width = 0, height = 0, channels = 0;  // channels as stored: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
};

// 8-bit pixels, interleaved row-major (height, width, channels), channels 1 or 3.
struct Image {
  int64_t width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// Header only; throws an Error naming the file and saying what is wrong with it.
ImageInfo read_image_info(const std::string& path);
// Decodes the file; alpha is dropped (gray+alpha → gray, RGBA → RGB).
Image read_image(const std::string& path);
// Decodes an image held in memory (`what` names it in errors), with the same checks; channels
// 1 or 3 converts to that many, 0 keeps gray as gray and colour as RGB.
Image decode_image(const std::string& what, const std::vector<unsigned char>& bytes, int channels);

// float32 (channels, height, width) in [0, 1]: channel conversion, then bilinear resize.
Tensor image_to_tensor(const Image& image, int64_t channels, int64_t height, int64_t width);

// In place on a float32 (c, h, w) or (n, c, h, w) tensor on the CPU; empty = nothing to do.
void normalize_image(Tensor& x, const Normalization& norm);

// Bilinear resize of one float plane (in_h, in_w) → (out_h, out_w); half-pixel centres.
void resize_bilinear(const float* src, int64_t in_h, int64_t in_w, float* dst, int64_t out_h, int64_t out_w);

// Whether the file name ends in .png, .jpg, .jpeg or .bmp (any case).
bool has_image_extension(const std::string& path);

}  // namespace nnlab
