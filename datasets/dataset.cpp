#include "datasets/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/pixels.h"
#include "core/random.h"
#include "datasets/cifar10.h"
#include "datasets/data_store.h"
#include "datasets/idx.h"
#include "datasets/synthetic.h"
#include "datasets/image_folder.h"

namespace nnlab {

namespace fs = std::filesystem;

int64_t Dataset::size() const { return images.defined() ? images.dim(0) : 0; }
int64_t Dataset::channels() const { return images.dim(1); }
int64_t Dataset::height() const { return images.dim(2); }
int64_t Dataset::width() const { return images.dim(3); }

std::string default_data_dir(const std::string& name) {
  for (const DataSetSpec& spec : data_catalog()) {
    if (spec.name != name) continue;
    const std::string installed = installed_data_dir(spec, data_store_root());
    if (!installed.empty()) return installed;
    std::error_code ec;
    return fs::is_directory(spec.debian_dir, ec) || name == "fashion-mnist" ? spec.debian_dir : "";
  }
  return "";
}

// The formula and why it needs no divide: core/pixels.h.
void bytes_to_unit_float(const uint8_t* bytes, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = unit_from_byte(bytes[i]);
}

void Dataset::sample_as_float(int64_t index, float* dst) const {
  NNLAB_CHECK(index >= 0 && index < size(), "sample ", index, " of ", name, " does not exist (", size(), " samples)");
  const int64_t row = channels() * height() * width();
  if (images.dtype() == DType::UInt8)
    bytes_to_unit_float(images.data<uint8_t>() + index * row, row, dst);
  else
    std::memcpy(dst, images.data<float>() + index * row, sizeof(float) * static_cast<size_t>(row));
}

void Dataset::prefetch_sample(int64_t index) const {
  if (index < 0 || index >= size()) return;
  const int64_t bytes = channels() * height() * width() * static_cast<int64_t>(dtype_size(images.dtype()));
  const char* first = static_cast<const char*>(images.raw_data()) + index * bytes;
  for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(first + at);
}

Tensor Dataset::images_as_float(int64_t first, int64_t count) const {
  Tensor out = Tensor::empty({count, channels(), height(), width()});
  const int64_t row = channels() * height() * width();
  for (int64_t i = 0; i < count; ++i) sample_as_float(first + i, out.data<float>() + i * row);
  return out;
}

namespace {

std::string where_to_get(const std::string& name) {
  return "fetch it with nnlab data fetch " + name + " (then --data-dir is not needed), or pass --data-dir with "
         "the folder holding its files";
}

// Fashion-MNIST and MNIST: <prefix>-images-idx3-ubyte[.gz] and <prefix>-labels-idx1-ubyte[.gz].
Dataset load_idx_dataset(const std::string& name, const std::string& dir, const std::string& split) {
  const std::string prefix = (fs::path(dir) / (split == "train" ? "train" : "t10k")).string();
  const IdxArray images = read_idx(prefix + "-images-idx3-ubyte");
  const IdxArray labels = read_idx(prefix + "-labels-idx1-ubyte");
  NNLAB_CHECK(images.dims.size() == 3, "image file ", images.path, " has dimensions ", shape_str(images.dims),
              "; an image file has 3 (count, rows, columns): is it a label file?");
  NNLAB_CHECK(labels.dims.size() == 1, "label file ", labels.path, " has dimensions ", shape_str(labels.dims),
              "; a label file has 1 (count): is it an image file?");
  NNLAB_CHECK(images.dims[0] == labels.dims[0], "image and label counts disagree: ", images.path, " holds ",
              images.dims[0], " images but ", labels.path, " holds ", labels.dims[0],
              " labels; the two files come from different data sets or splits");
  const uint8_t* label_bytes = labels.data.data<uint8_t>();
  for (int64_t i = 0; i < labels.data.numel(); ++i)
    NNLAB_CHECK(label_bytes[i] < 10, "label file ", labels.path, " has label ", int(label_bytes[i]), " at index ", i,
                "; labels are 0..9, so the file is corrupt or belongs to another data set");

  Dataset d;
  d.name = name;
  d.images = images.data.view({images.dims[0], 1, images.dims[1], images.dims[2]});
  std::vector<int32_t> y(label_bytes, label_bytes + labels.data.numel());
  d.labels = Tensor::from_vector(y, {labels.dims[0]});
  if (name == "fashion-mnist")
    d.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                     "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  else
    d.class_names = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  return d;
}

// Rows `index` (ascending) of `src`, as a new data set with the same names.
Dataset subset(const Dataset& src, const std::vector<int32_t>& index) {
  Dataset d;
  d.name = src.name;
  d.classes = src.classes;
  d.class_names = src.class_names;
  const auto m = static_cast<int64_t>(index.size());
  d.images = Tensor::empty({m, src.channels(), src.height(), src.width()}, src.images.dtype());
  d.labels = Tensor::empty({m}, DType::Int32);
  const auto row = static_cast<size_t>(src.channels() * src.height() * src.width()) * dtype_size(src.images.dtype());
  const auto* x = static_cast<const uint8_t*>(src.images.raw_data());
  auto* dst = static_cast<uint8_t*>(d.images.raw_data());
  const int32_t* y = src.labels.data<int32_t>();
  for (int64_t i = 0; i < m; ++i) {
    std::memcpy(dst + i * row, x + index[i] * row, row);
    d.labels.data<int32_t>()[i] = y[index[i]];
  }
  return d;
}

}  // namespace

Dataset load_dataset(const std::string& name, const std::string& dir, const std::string& split) {
  if (name == "folder") return load_image_folder(dir, split);
  if (name == "synthetic-cifar10") return synthetic_dataset(name, split);
  NNLAB_CHECK(name == "fashion-mnist" || name == "mnist" || name == "cifar10", "unknown data set '", name,
              "'; choose fashion-mnist, mnist, cifar10 or folder");
  NNLAB_CHECK(split == "train" || split == "test", "unknown split '", split, "' for ", name, "; use train or test");
  NNLAB_CHECK(!dir.empty(), "data set ", name, " needs a data directory: ", where_to_get(name));
  std::error_code ec;
  NNLAB_CHECK(fs::is_directory(dir, ec), "data directory ", dir, " for ", name, " does not exist: ",
              where_to_get(name));
  if (name == "cifar10") return load_cifar10(dir, split);
  return load_idx_dataset(name, dir, split);
}

Dataset first_samples(const Dataset& d, int64_t n) {
  if (n <= 0 || n >= d.size()) return d;
  Dataset first = d;
  first.images = d.images.rows(0, n);
  first.labels = d.labels.rows(0, n);
  return first;
}

std::pair<Dataset, Dataset> split_validation(const Dataset& train, double val_fraction, uint64_t seed) {
  const int64_t n = train.size();
  NNLAB_CHECK(val_fraction > 0.0 && val_fraction < 1.0, "validation fraction ", val_fraction,
              " is out of range; use a value between 0 and 1, e.g. 0.1");
  const auto n_val = static_cast<int64_t>(std::llround(val_fraction * static_cast<double>(n)));
  NNLAB_CHECK(n_val >= 1 && n_val < n, "validation fraction ", val_fraction, " of ", n,
              " samples leaves an empty training or validation set; choose another fraction");
  std::vector<int32_t> perm = random_permutation(n, RandomStream{seed, RandomPurpose::Split, 0});
  std::vector<int32_t> val(perm.begin(), perm.begin() + n_val), rest(perm.begin() + n_val, perm.end());
  std::sort(val.begin(), val.end());
  std::sort(rest.begin(), rest.end());
  return {subset(train, rest), subset(train, val)};
}

}  // namespace nnlab
