#include "datasets/cifar10_png.h"

#include <cstring>

#include "core/error.h"
#include "datasets/cifar10.h"
#include "datasets/image_io.h"

namespace nnlab {

std::vector<uint8_t> parse_label_array(const std::string& what, const std::vector<uint8_t>& json) {
  auto space = [](uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  size_t i = 0;
  const size_t n = json.size();
  auto skip_space = [&] {
    while (i < n && space(json[i])) ++i;
  };
  std::vector<uint8_t> labels;
  skip_space();
  NNLAB_CHECK(i < n && json[i] == '[', "label file ", what, " does not start with '[': it is not a JSON array");
  ++i;
  skip_space();
  if (i < n && json[i] == ']') ++i;
  else
    for (;;) {
      skip_space();
      size_t digits = 0;
      int value = 0;
      while (i < n && json[i] >= '0' && json[i] <= '9' && digits < 3) value = value * 10 + (json[i++] - '0'), ++digits;
      NNLAB_CHECK(digits > 0 && value <= 9, "label file ", what, " has something other than a label 0..9 at byte ",
                  i, ": it is corrupt or not CIFAR-10's");
      labels.push_back(static_cast<uint8_t>(value));
      skip_space();
      NNLAB_CHECK(i < n && (json[i] == ',' || json[i] == ']'), "label file ", what, " is not a list of numbers at byte ",
                  i, " (truncated?)");
      if (json[i++] == ']') break;
    }
  skip_space();
  NNLAB_CHECK(i == n, "label file ", what, " has text after its array (byte ", i, ")");
  return labels;
}

std::vector<uint8_t> cifar_batch_from_png(const std::string& what, const std::vector<uint8_t>& png,
                                          const uint8_t* labels, int64_t count) {
  constexpr int64_t kPlane = 32 * 32;
  const Image image = decode_image(what, png, 3);
  NNLAB_CHECK(image.width == kPlane && image.height == count, "CIFAR-10 image ", what, " is ", image.width, "x",
              image.height, "; expected ", kPlane, "x", count, " (one 32x32 image a row, one row a label)");
  std::vector<uint8_t> batch(static_cast<size_t>(count * kCifarRecordBytes));
  for (int64_t i = 0; i < count; ++i) {
    uint8_t* record = batch.data() + i * kCifarRecordBytes;
    const uint8_t* row = image.pixels.data() + i * kPlane * 3;
    record[0] = labels[i];
    // Interleaved (R, G, B) per position → three planes.
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t j = 0; j < kPlane; ++j) record[1 + c * kPlane + j] = row[j * 3 + c];
  }
  return batch;
}

}  // namespace nnlab
