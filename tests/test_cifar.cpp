// CIFAR-10 binary reader: small files in the official record format, nested and flat
// layouts, and every kind of bad file.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "datasets/cifar10.h"
#include "datasets/dataset.h"
#include "test_support.h"

using namespace nnlab;
namespace fs = std::filesystem;

namespace {

using nnlab_test::TempDir;

// Pixel byte k of global record r: distinct enough to catch any misplaced copy.
uint8_t pixel(int64_t r, int64_t k) { return static_cast<uint8_t>((r * 131 + k * 7 + k / 1024) % 256); }

// Writes `count` records numbered first.. with labels r % 10.
void write_batch(const fs::path& path, int64_t first, int64_t count) {
  std::vector<uint8_t> bytes;
  for (int64_t r = first; r < first + count; ++r) {
    bytes.push_back(static_cast<uint8_t>(r % 10));
    for (int64_t k = 0; k < kCifarImageBytes; ++k) bytes.push_back(pixel(r, k));
  }
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Five training batches of 2, 3, 1, 1, 2 records and a test batch of 4.
void write_all(const fs::path& dir) {
  const int64_t counts[5] = {2, 3, 1, 1, 2};
  int64_t first = 0;
  for (int i = 0; i < 5; ++i) {
    write_batch(dir / ("data_batch_" + std::to_string(i + 1) + ".bin"), first, counts[i]);
    first += counts[i];
  }
  write_batch(dir / "test_batch.bin", 100, 4);
}

void check_records(const Dataset& d, int64_t first) {
  // Stored as the file's bytes; read as floats p / 255.
  CHECK(d.images.dtype() == DType::UInt8);
  const auto x = d.images_as_float(0, d.size()).to_vector<float>();
  const auto y = d.labels.to_vector<int32_t>();
  for (int64_t i = 0; i < d.size(); ++i) {
    REQUIRE(y[i] == (first + i) % 10);
    for (int64_t k = 0; k < kCifarImageBytes; ++k)
      REQUIRE(x[i * kCifarImageBytes + k] == static_cast<float>(pixel(first + i, k)) / 255.0f);
  }
}

}  // namespace

TEST_CASE("cifar10: train and test batches load in order with the right values", "[cifar]") {
  TempDir dir;
  write_all(dir.path);
  const Dataset train = load_dataset("cifar10", dir.path.string(), "train");
  REQUIRE(train.images.shape() == Shape{9, 3, 32, 32});
  CHECK(train.labels.dtype() == DType::Int32);
  CHECK(train.name == "cifar10");
  CHECK(train.class_names.front() == "airplane");
  CHECK(train.class_names.back() == "truck");
  check_records(train, 0);
  const Dataset test = load_dataset("cifar10", dir.path.string(), "test");
  REQUIRE(test.images.shape() == Shape{4, 3, 32, 32});
  check_records(test, 100);
  // Channel-major: red plane first, so element (0, 1, 0, 0) is pixel byte 1024.
  CHECK(test.images.data<uint8_t>()[1024] == pixel(100, 1024));
}

TEST_CASE("cifar10: the folder the archive unpacks into is accepted", "[cifar]") {
  TempDir dir;
  fs::create_directories(dir.path / "cifar-10-batches-bin");
  write_all(dir.path / "cifar-10-batches-bin");
  CHECK(load_cifar10(dir.path.string(), "train").size() == 9);
  CHECK(load_cifar10((dir.path / "cifar-10-batches-bin").string(), "test").size() == 4);
}

TEST_CASE("cifar10: missing, truncated and corrupt files are rejected", "[cifar]") {
  TempDir dir;
  write_all(dir.path);
  const std::string d = dir.path.string();
  SECTION("missing directory") {
    CHECK_THROWS_WITH(load_cifar10(d + "/nope", "train"),
                      Catch::Contains("does not exist") && Catch::Contains("nnlab data fetch cifar10"));
  }
  SECTION("missing batches are all named") {
    fs::remove(dir.path / "data_batch_4.bin");
    fs::remove(dir.path / "data_batch_5.bin");
    CHECK_THROWS_WITH(load_cifar10(d, "train"),
                      Catch::Contains("files missing") && Catch::Contains("data_batch_4.bin, data_batch_5.bin"));
    CHECK(load_cifar10(d, "test").size() == 4);
    fs::remove(dir.path / "test_batch.bin");
    CHECK_THROWS_WITH(load_cifar10(d, "test"), Catch::Contains("test_batch.bin"));
  }
  SECTION("truncated file") {
    fs::resize_file(dir.path / "data_batch_2.bin", 3 * kCifarRecordBytes - 5);
    CHECK_THROWS_WITH(load_cifar10(d, "train"), Catch::Contains("data_batch_2.bin") && Catch::Contains("9214 bytes") &&
                                                    Catch::Contains("not a whole number of 3073-byte records"));
  }
  SECTION("empty file") {
    fs::resize_file(dir.path / "test_batch.bin", 0);
    CHECK_THROWS_WITH(load_cifar10(d, "test"), Catch::Contains("has 0 bytes"));
  }
  SECTION("label out of range") {
    std::fstream f(dir.path / "data_batch_3.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.put(static_cast<char>(10));
    f.close();
    CHECK_THROWS_WITH(load_cifar10(d, "train"),
                      Catch::Contains("data_batch_3.bin record 0 has label 10") && Catch::Contains("0..9"));
  }
  SECTION("unknown split") { CHECK_THROWS_WITH(load_cifar10(d, "valid"), Catch::Contains("unknown split")); }
}
