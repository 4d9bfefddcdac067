// A labelled image data set held in memory, and the loaders for the data sets nnlab knows:
// Fashion-MNIST and MNIST (IDX files, see idx.h) and CIFAR-10 (binary version, see
// cifar10.h). Pixels stay in the type they were stored in: the 8-bit pixels of IDX and CIFAR
// files stay bytes (Fashion-MNIST's training set is 47 MB so, 188 MB as float32), converted to
// x / 255 in [0, 1] per batch by the DataLoader, with per-channel normalisation and
// augmentation.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace nnlab {

struct Dataset {
  std::string name;                        // "fashion-mnist", "mnist", "cifar10"
  // (n, c, h, w) on the CPU: uint8 pixels p standing for p / 255 (IDX, CIFAR-10), or float32
  // values in [0, 1] (image folders, synthetic data). Read them as floats with the two below.
  Tensor images;
  Tensor labels;                           // int32 (n)
  int64_t classes = 10;
  std::vector<std::string> class_names;    // Fashion-MNIST: T-shirt/top, Trouser, ...; CIFAR-10: airplane, ...
  int64_t size() const;
  int64_t channels() const;
  int64_t height() const;
  int64_t width() const;
  // Sample `index` as float32 values in [0, 1] into dst (channels · height · width floats).
  void sample_as_float(int64_t index, float* dst) const;
  // Asks the CPU to start loading sample `index` into its caches (a hint; no effect on results).
  void prefetch_sample(int64_t index) const;
  // Samples first .. first + count − 1 as a float32 (count, c, h, w) tensor.
  Tensor images_as_float(int64_t first, int64_t count) const;
};

// name: "fashion-mnist" | "mnist" | "cifar10" | "folder" (image_folder.h); split: "train" |
// "test". Throws nnlab::Error saying which file is missing or wrong, what is wrong, and what to do.
Dataset load_dataset(const std::string& name, const std::string& dir, const std::string& split);

// Seeded hold-out: round(val_fraction · n) samples of `train`, chosen by a Philox permutation
// (purpose Split), become the validation set; both parts keep the original sample order.
std::pair<Dataset, Dataset> split_validation(const Dataset& train, double val_fraction, uint64_t seed);

// The first n samples of `d` (views of its tensors, no copy): what --test-images keeps. n = 0
// or at least d.size(): all of them.
Dataset first_samples(const Dataset& d, int64_t n);

// Default data directory for a data set: its copy installed by `nnlab data fetch` in the data
// store (data_store.h), else the folder a Debian package fills (fashion-mnist:
// /usr/share/datasets/fashion-mnist, named even when absent so the error says so), else "".
std::string default_data_dir(const std::string& name);

// Raw 8-bit pixels -> float32 values p / 255 in [0, 1].
void bytes_to_unit_float(const uint8_t* bytes, int64_t n, float* dst);

}  // namespace nnlab
