// libFuzzer target: the image loader (datasets/image_io.h): header check, decode, and the
// conversion to a model's 1×28×28 and 3×32×32 inputs.
#include "datasets/image_io.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = nnlab_fuzz::scratch_dir() + "/input.png";
  nnlab_fuzz::write_file(path, data, size);
  nnlab_fuzz::expect_value_or_error([&] {
    const nnlab::Image im = nnlab::read_image(path);
    if (static_cast<int64_t>(im.pixels.size()) != im.width * im.height * im.channels) std::abort();
    nnlab::image_to_tensor(im, 1, 28, 28);
    nnlab::image_to_tensor(im, 3, 32, 32);
  });
  return 0;
}
