// CIFAR-10, binary version (https://www.cs.toronto.edu/~kriz/cifar.html):
//   train: data_batch_1.bin .. data_batch_5.bin   test: test_batch.bin
// Each file is a run of records  <1 label byte><3072 pixel bytes>, the pixels a 3 × 32 × 32
// image stored channel-major (all red, then green, then blue; rows top to bottom), which is
// already NCHW. Official files hold 10000 records; any positive whole number of records is
// accepted so tests can use small files.
#pragma once
#include <string>

#include "datasets/dataset.h"

namespace nnlab {

constexpr int64_t kCifarImageBytes = 3 * 32 * 32;
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;

// dir holds the .bin files, or is the folder the archive was unpacked into (holding
// cifar-10-batches-bin/). split: "train" | "test".
Dataset load_cifar10(const std::string& dir, const std::string& split);

}  // namespace nnlab
