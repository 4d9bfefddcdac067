#include "datasets/cifar10.h"

#include <filesystem>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace nnlab {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> cifar_files(const std::string& split) {
  if (split == "test") return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"};
}

// The archive unpacks into cifar-10-batches-bin/; accept its parent as well.
fs::path resolve_cifar_dir(const std::string& dir) {
  std::error_code ec;
  NNLAB_CHECK(fs::is_directory(dir, ec), "CIFAR-10 data directory ", dir,
              " does not exist; fetch the data set with nnlab data fetch cifar10 (or pass --data-dir pointing at the "
              "folder holding data_batch_1.bin ... test_batch.bin)");
  const fs::path nested = fs::path(dir) / "cifar-10-batches-bin";
  return fs::is_directory(nested, ec) ? nested : fs::path(dir);
}

// Checks a file's size before reading it: a whole, positive number of records.
int64_t record_count(const fs::path& path) {
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(fs::file_size(path, ec));
  NNLAB_CHECK(!ec, "cannot read the size of CIFAR-10 file ", path.string(), ": ", ec.message());
  NNLAB_CHECK(bytes > 0 && bytes % kCifarRecordBytes == 0, "CIFAR-10 file ", path.string(), " has ", bytes,
              " bytes, not a whole number of ", kCifarRecordBytes,
              "-byte records (1 label + 3x32x32 pixels): it is truncated or not the binary version; download "
              "it again");
  return bytes / kCifarRecordBytes;
}

// Reads `count` records of `path` into images/labels starting at sample `first`.
void read_records(const fs::path& path, int64_t count, int64_t first, uint8_t* images, int32_t* labels) {
  std::ifstream in(path, std::ios::binary);
  NNLAB_CHECK(in, "cannot open CIFAR-10 file ", path.string(), ": check that it is readable");
  std::vector<uint8_t> record(static_cast<size_t>(kCifarRecordBytes));
  for (int64_t r = 0; r < count; ++r) {
    in.read(reinterpret_cast<char*>(record.data()), kCifarRecordBytes);
    NNLAB_CHECK(in.gcount() == kCifarRecordBytes, "CIFAR-10 file ", path.string(), " ended inside record ", r,
                " while being read; it changed on disk or is damaged");
    NNLAB_CHECK(record[0] <= 9, "CIFAR-10 file ", path.string(), " record ", r, " has label ", int(record[0]),
                "; labels are 0..9, so the file is corrupt or not CIFAR-10 (CIFAR-100 has 2 label bytes)");
    labels[first + r] = record[0];
    std::memcpy(images + (first + r) * kCifarImageBytes, record.data() + 1, kCifarImageBytes);
  }
}

}  // namespace

Dataset load_cifar10(const std::string& dir, const std::string& split) {
  NNLAB_CHECK(split == "train" || split == "test", "CIFAR-10: unknown split '", split, "'; use train or test");
  const fs::path root = resolve_cifar_dir(dir);
  const std::vector<std::string> names = cifar_files(split);
  std::string missing;
  std::error_code ec;
  for (const std::string& name : names)
    if (!fs::is_regular_file(root / name, ec)) missing += (missing.empty() ? "" : ", ") + name;
  NNLAB_CHECK(missing.empty(), "CIFAR-10 ", split, " files missing in ", root.string(), ": ", missing,
              "; fetch the data set with nnlab data fetch cifar10");

  // Sizes come from the file system, so the allocation matches data that really exists.
  std::vector<int64_t> counts;
  int64_t n = 0;
  for (const std::string& name : names) n += counts.emplace_back(record_count(root / name));

  Dataset d;
  d.name = "cifar10";
  d.images = Tensor::empty({n, 3, 32, 32}, DType::UInt8);
  d.labels = Tensor::empty({n}, DType::Int32);
  d.class_names = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  int64_t first = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    read_records(root / names[i], counts[i], first, d.images.data<uint8_t>(), d.labels.data<int32_t>());
    first += counts[i];
  }
  return d;
}

}  // namespace nnlab
