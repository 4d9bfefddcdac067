// A labelled image data set held in memory, and the loaders for the data sets nnlab knows:
// Fashion-MNIST and MNIST (IDX files, see idx.h) and CIFAR-10 (binary version, see
// cifar10.h). Pixels are scaled to [0, 1] once, at load time; per-channel normalisation and
// augmentation happen per batch in the DataLoader.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace nnlab {

struct Dataset {
  std::string name;                        // "fashion-mnist", "mnist", "cifar10"
  Tensor images;                           // float32 (n, c, h, w), values in [0, 1], on the CPU
  Tensor labels;                           // int32 (n)
  int64_t classes = 10;
  std::vector<std::string> class_names;    // Fashion-MNIST: T-shirt/top, Trouser, ...; CIFAR-10: airplane, ...
  int64_t size() const;
  int64_t channels() const;
  int64_t height() const;
  int64_t width() const;
};

// name: "fashion-mnist" | "mnist" | "cifar10" | "folder" (image_folder.h); split: "train" |
// "test". Throws nnlab::Error saying which file is missing or wrong, what is wrong, and what to do.
Dataset load_dataset(const std::string& name, const std::string& dir, const std::string& split);

// Seeded hold-out: round(val_fraction · n) samples of `train`, chosen by a Philox permutation
// (purpose Split), become the validation set; both parts keep the original sample order.
std::pair<Dataset, Dataset> split_validation(const Dataset& train, double val_fraction, uint64_t seed);

// Default data directory for a data set ("/usr/share/datasets/fashion-mnist" for
// fashion-mnist, where Debian's dataset-fashion-mnist installs it; "" otherwise).
std::string default_data_dir(const std::string& name);

// Raw 8-bit pixels -> float32 tensor of `shape` with values x / 255 in [0, 1].
Tensor bytes_to_unit_float(const uint8_t* bytes, const Shape& shape);

}  // namespace nnlab
