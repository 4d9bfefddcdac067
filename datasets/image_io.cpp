#include "datasets/image_io.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "datasets/image_check.h"

// stb_image's implementation lives in this file only. STB_IMAGE_STATIC keeps its symbols
// private to nnlab (a program linking the static library may carry its own copy), and the
// STBI_ONLY_* switches limit it to the three formats nnlab promises.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_FAILURE_USERMSG
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb_image.h>
#pragma GCC diagnostic pop

namespace nnlab {

namespace {

constexpr int64_t kMaxFileBytes = int64_t{1} << 30;

// The whole file in memory; an Error names it when it cannot be read or is empty.
std::vector<unsigned char> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  NNLAB_CHECK(in.is_open(), "cannot open image '", path, "': ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  NNLAB_CHECK(size >= 0, "cannot read image '", path, "' (is it a directory?)");
  NNLAB_CHECK(size > 0, "image '", path, "' is empty (0 bytes); expected a PNG, JPEG or BMP file");
  NNLAB_CHECK(size <= kMaxFileBytes, "image '", path, "' is ", size, " bytes; nnlab reads images up to 1 GiB");
  std::vector<unsigned char> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  NNLAB_CHECK(in.good(), "reading image '", path, "' failed: ", std::strerror(errno));
  return bytes;
}

ImageInfo info_from_memory(const std::string& path, const std::vector<unsigned char>& bytes) {
  // stb_image 2.27 is not memory-safe on some corrupt JPEGs (its header parse included) and
  // believes PNG chunk lengths: refuse those files before it sees them (image_check.h).
  const std::string jpeg_problem = jpeg_huffman_problem(bytes.data(), bytes.size());
  NNLAB_CHECK(jpeg_problem.empty(), "cannot read image '", path, "': corrupt JPEG: ", jpeg_problem);
  const std::string png_problem = png_chunk_problem(bytes.data(), bytes.size());
  NNLAB_CHECK(png_problem.empty(), "cannot read image '", path, "': corrupt PNG: ", png_problem);
  const std::string bmp_problem = bmp_size_problem(bytes.data(), bytes.size());
  NNLAB_CHECK(bmp_problem.empty(), "cannot read image '", path, "': corrupt BMP: ", bmp_problem);
  int w = 0, h = 0, comp = 0;
  const int ok = stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &comp);
  NNLAB_CHECK(ok, "cannot read image '", path, "': ", stbi_failure_reason(),
              " (nnlab reads PNG, JPEG and BMP files)");
  NNLAB_CHECK(w > 0 && h > 0, "image '", path, "' claims size ", w, "x", h, "; the header is corrupt");
  NNLAB_CHECK(w <= kMaxImageSide && h <= kMaxImageSide &&
                  static_cast<int64_t>(w) * h <= kMaxImagePixels,
              "image '", path, "' claims ", w, "x", h, " pixels; nnlab decodes at most ", kMaxImageSide,
              " per side and ", kMaxImagePixels / 1000000, " megapixels (corrupt header, or scale it down first)");
  const std::string jpeg_size = jpeg_size_problem(bytes.data(), bytes.size(), w, h);
  NNLAB_CHECK(jpeg_size.empty(), "cannot read image '", path, "': corrupt JPEG: ", jpeg_size);
  return ImageInfo{w, h, comp};
}

}  // namespace

ImageInfo read_image_info(const std::string& path) { return info_from_memory(path, read_file_bytes(path)); }

Image decode_image(const std::string& what, const std::vector<unsigned char>& bytes, int channels) {
  NNLAB_CHECK(!bytes.empty(), "image '", what, "' is empty (0 bytes); expected a PNG, JPEG or BMP file");
  NNLAB_CHECK(bytes.size() <= static_cast<size_t>(kMaxFileBytes), "image '", what, "' is ", bytes.size(),
              " bytes; nnlab reads images up to 1 GiB");
  const ImageInfo info = info_from_memory(what, bytes);
  // Ask stb for 1 or 3 channels: it drops the alpha channel for us.
  const int want = channels != 0 ? channels : info.channels >= 3 ? 3 : 1;
  int w = 0, h = 0, comp = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> data(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &comp, want), stbi_image_free);
  NNLAB_CHECK(data != nullptr, "cannot decode image '", what, "': ", stbi_failure_reason(),
              " (the file is truncated or corrupt)");
  Image img;
  img.width = w;
  img.height = h;
  img.channels = want;
  img.pixels.assign(data.get(), data.get() + static_cast<size_t>(w) * h * want);
  return img;
}

Image read_image(const std::string& path) { return decode_image(path, read_file_bytes(path), 0); }

void resize_bilinear(const float* src, int64_t in_h, int64_t in_w, float* dst, int64_t out_h, int64_t out_w) {
  // Source coordinate of destination pixel d: s = (d + ½)·in/out − ½, clamped to [0, in−1];
  // the value mixes the two neighbours floor(s), floor(s)+1 by the fraction s − floor(s).
  auto source = [](int64_t d, int64_t in, int64_t out, int64_t& i0, int64_t& i1, float& frac) {
    const double s = std::clamp((static_cast<double>(d) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5,
                                0.0, static_cast<double>(in - 1));
    i0 = static_cast<int64_t>(std::floor(s));
    i1 = std::min(i0 + 1, in - 1);
    frac = static_cast<float>(s - static_cast<double>(i0));
  };
  for (int64_t y = 0; y < out_h; ++y) {
    int64_t y0, y1;
    float fy;
    source(y, in_h, out_h, y0, y1, fy);
    for (int64_t x = 0; x < out_w; ++x) {
      int64_t x0, x1;
      float fx;
      source(x, in_w, out_w, x0, x1, fx);
      const float top = src[y0 * in_w + x0] * (1 - fx) + src[y0 * in_w + x1] * fx;
      const float bottom = src[y1 * in_w + x0] * (1 - fx) + src[y1 * in_w + x1] * fx;
      dst[y * out_w + x] = top * (1 - fy) + bottom * fy;
    }
  }
}

Tensor image_to_tensor(const Image& image, int64_t channels, int64_t height, int64_t width) {
  NNLAB_CHECK(channels == 1 || channels == 3, "image_to_tensor: the model wants ", channels,
              " channels; images convert to 1 (gray) or 3 (RGB)");
  NNLAB_CHECK(height > 0 && width > 0, "image_to_tensor: target size ", height, "x", width, " is empty");
  NNLAB_CHECK(image.channels == 1 || image.channels == 3, "image_to_tensor: image has ", image.channels,
              " channels; expected 1 or 3");
  const int64_t plane = image.height * image.width;
  const uint8_t* px = image.pixels.data();
  // Planes (channels, in_h, in_w) in [0, 1] with the channel conversion applied.
  std::vector<float> planes(static_cast<size_t>(channels * plane));
  for (int64_t i = 0; i < plane; ++i) {
    const uint8_t* p = px + i * image.channels;
    if (channels == image.channels) {
      for (int64_t c = 0; c < channels; ++c) planes[c * plane + i] = p[c] / 255.0f;
    } else if (channels == 1) {  // RGB → luminance
      planes[i] = (0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]) / 255.0f;
    } else {  // gray → RGB
      for (int64_t c = 0; c < 3; ++c) planes[c * plane + i] = p[0] / 255.0f;
    }
  }
  Tensor out = Tensor::empty({channels, height, width});
  float* dst = out.data<float>();
  for (int64_t c = 0; c < channels; ++c) {
    if (height == image.height && width == image.width)
      std::copy(planes.begin() + c * plane, planes.begin() + (c + 1) * plane, dst + c * plane);
    else
      resize_bilinear(planes.data() + c * plane, image.height, image.width, dst + c * height * width, height, width);
  }
  return out;
}

void normalize_image(Tensor& x, const Normalization& norm) {
  if (norm.mean.empty()) return;
  NNLAB_CHECK(x.ndim() == 3 || x.ndim() == 4, "normalize_image: expected (c, h, w) or (n, c, h, w), got ",
              x.describe());
  const int64_t c = x.dim(-3), plane = x.dim(-2) * x.dim(-1), n = x.numel() / (c * plane);
  NNLAB_CHECK(static_cast<int64_t>(norm.mean.size()) == c && static_cast<int64_t>(norm.std.size()) == c,
              "normalize_image: the normalisation has ", norm.mean.size(), " channels but the image ", c);
  float* p = x.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      float* q = p + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) q[j] = (q[j] - norm.mean[ch]) / norm.std[ch];
    }
}

bool has_image_extension(const std::string& path) {
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos) return false;
  std::string ext = path.substr(dot + 1);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == "png" || ext == "jpg" || ext == "jpeg" || ext == "bmp";
}

}  // namespace nnlab
