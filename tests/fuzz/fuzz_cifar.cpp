// libFuzzer target: the CIFAR-10 reader (datasets/cifar10.h) on a one-file test split.
#include "datasets/cifar10.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = nnlab_fuzz::scratch_dir();
  nnlab_fuzz::write_file(dir + "/test_batch.bin", data, size);
  nnlab_fuzz::expect_value_or_error([&] {
    const nnlab::Dataset d = nnlab::load_cifar10(dir, "test");
    if (d.size() * nnlab::kCifarRecordBytes != static_cast<int64_t>(size)) std::abort();
  });
  return 0;
}
