// DataLoader and split_validation on a synthetic data set whose every pixel encodes
// (sample, channel, row, column), so a batch can be decoded back to where it came from.
#include <catch2/catch.hpp>
#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "core/random.h"
#include "datasets/dataloader.h"
#include "datasets/dataset.h"
#include "devices/backend.h"
#include "devices/registry.h"

using namespace nnlab;

namespace {

constexpr int64_t kC = 2, kH = 3, kW = 4;

// pixel(i, c, y, x) = 1000 i + 100 c + 10 y + x + 1 (never 0, so padding zeros stand out).
float code(int64_t i, int64_t c, int64_t y, int64_t x) { return static_cast<float>(1000 * i + 100 * c + 10 * y + x + 1); }

Dataset synthetic(int64_t n) {
  Dataset d;
  d.name = "synthetic";
  std::vector<float> x;
  std::vector<int32_t> y;
  for (int64_t i = 0; i < n; ++i) {
    y.push_back(static_cast<int32_t>(i % 10));
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t r = 0; r < kH; ++r)
        for (int64_t s = 0; s < kW; ++s) x.push_back(code(i, c, r, s));
  }
  d.images = Tensor::from_vector(x, {n, kC, kH, kW});
  d.labels = Tensor::from_vector(y, {n});
  return d;
}

// Sample index of every image in a batch (from its unaugmented first pixel).
std::vector<int64_t> ids(const Batch& b) {
  std::vector<int64_t> out;
  const auto x = b.images.to_vector<float>();
  for (int64_t i = 0; i < b.images.dim(0); ++i) out.push_back(static_cast<int64_t>(x[i * kC * kH * kW] - 1) / 1000);
  return out;
}

std::vector<Batch> epoch_batches(DataLoader& loader, int64_t epoch, int64_t skip = 0) {
  loader.start_epoch(epoch, skip);
  std::vector<Batch> out;
  Batch b;
  while (loader.next(b)) out.push_back(b);
  return out;
}

std::vector<float> all_values(const std::vector<Batch>& batches) {
  std::vector<float> v;
  for (const Batch& b : batches) {
    const auto x = b.images.to_vector<float>();
    v.insert(v.end(), x.begin(), x.end());
  }
  return v;
}

DataLoaderOptions opts(int64_t batch, uint64_t seed, bool prefetch = true) {
  DataLoaderOptions o;
  o.batch_size = batch;
  o.seed = seed;
  o.prefetch = prefetch;
  return o;
}

}  // namespace

TEST_CASE("dataloader: every sample once per epoch, in the Philox order, last batch partial", "[dataloader]") {
  const Dataset data = synthetic(10);
  DataLoader loader(data, opts(4, 7));
  CHECK(loader.steps_per_epoch() == 3);
  const auto batches = epoch_batches(loader, 2);
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].images.shape() == Shape{4, kC, kH, kW});
  CHECK(batches[2].images.shape() == Shape{2, kC, kH, kW});
  CHECK(batches[2].labels.shape() == Shape{2});
  std::vector<int64_t> seen;
  for (size_t s = 0; s < batches.size(); ++s) {
    CHECK(batches[s].step == static_cast<int64_t>(s));
    const auto id = ids(batches[s]);
    const auto y = batches[s].labels.to_vector<int32_t>();
    for (size_t i = 0; i < id.size(); ++i) CHECK(y[i] == id[i] % 10);
    seen.insert(seen.end(), id.begin(), id.end());
  }
  const auto perm = random_permutation(10, RandomStream{7, RandomPurpose::Shuffle, 2});
  CHECK(seen == std::vector<int64_t>(perm.begin(), perm.end()));
  std::vector<int64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 10; ++i) CHECK(sorted[i] == i);
  // Whole rows travel: every pixel of a sample comes along.
  CHECK(batches[0].images.to_vector<float>()[kC * kH * kW - 1] == code(seen[0], kC - 1, kH - 1, kW - 1));
}

TEST_CASE("dataloader: order depends on seed and epoch only, and shuffle off keeps it", "[dataloader]") {
  const Dataset data = synthetic(40);
  DataLoader a(data, opts(8, 1)), b(data, opts(8, 1)), c(data, opts(8, 2));
  const auto a0 = all_values(epoch_batches(a, 0));
  CHECK(a0 == all_values(epoch_batches(b, 0)));
  CHECK(a0 != all_values(epoch_batches(a, 1)));
  CHECK(a0 != all_values(epoch_batches(c, 0)));
  CHECK(a0 == all_values(epoch_batches(a, 0)));  // going back to an epoch repeats it
  DataLoaderOptions o = opts(16, 1);
  o.shuffle = false;
  DataLoader plain(data, o);
  std::vector<int64_t> order;
  for (const Batch& batch : epoch_batches(plain, 5))
    for (int64_t id : ids(batch)) order.push_back(id);
  for (int64_t i = 0; i < 40; ++i) CHECK(order[i] == i);
}

TEST_CASE("dataloader: skip_steps resumes exactly where the epoch was", "[dataloader]") {
  const Dataset data = synthetic(23);
  for (bool prefetch : {true, false}) {
    DataLoaderOptions o = opts(5, 3, prefetch);
    o.augment.crop_padding = 1;
    o.augment.horizontal_flip = true;
    DataLoader loader(data, o);
    const auto full = epoch_batches(loader, 4);
    const auto resumed = epoch_batches(loader, 4, 2);
    REQUIRE(resumed.size() == 3);
    for (size_t i = 0; i < resumed.size(); ++i) {
      CHECK(resumed[i].step == full[i + 2].step);
      CHECK(resumed[i].images.to_vector<float>() == full[i + 2].images.to_vector<float>());
      CHECK(resumed[i].labels.to_vector<int32_t>() == full[i + 2].labels.to_vector<int32_t>());
    }
    CHECK(epoch_batches(loader, 4, 5).empty());
  }
}

TEST_CASE("dataloader: per-channel normalisation", "[dataloader]") {
  const Dataset data = synthetic(3);
  DataLoaderOptions o = opts(3, 0);
  o.shuffle = false;
  o.normalize = {{10.0f, 500.0f}, {2.0f, 0.25f}};
  DataLoader loader(data, o);
  const auto x = all_values(epoch_batches(loader, 0));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t r = 0; r < kH; ++r)
        for (int64_t s = 0; s < kW; ++s)
          CHECK(x[((i * kC + c) * kH + r) * kW + s] == (code(i, c, r, s) - o.normalize.mean[c]) / o.normalize.std[c]);
}

// Finds the crop offset and flip that turn sample `id` into `img`; false if none does.
bool explains(const float* img, int64_t id, int64_t pad, int64_t& dy_out, int64_t& dx_out, bool& flip_out) {
  for (int64_t dy = -pad; dy <= pad; ++dy)
    for (int64_t dx = -pad; dx <= pad; ++dx)
      for (bool flip : {false, true}) {
        bool ok = true;
        for (int64_t c = 0; c < kC && ok; ++c)
          for (int64_t y = 0; y < kH && ok; ++y)
            for (int64_t x = 0; x < kW && ok; ++x) {
              const int64_t sy = y + dy, sx = (flip ? kW - 1 - x : x) + dx;
              const bool inside = sy >= 0 && sy < kH && sx >= 0 && sx < kW;
              ok = img[(c * kH + y) * kW + x] == (inside ? code(id, c, sy, sx) : 0.0f);
            }
        if (ok) {
          dy_out = dy, dx_out = dx, flip_out = flip;
          return true;
        }
      }
  return false;
}

TEST_CASE("dataloader: crop with zero padding and flip are valid, varied and seeded", "[dataloader]") {
  const Dataset data = synthetic(64);
  DataLoaderOptions o = opts(64, 11);
  o.shuffle = false;
  o.augment.crop_padding = 1;
  o.augment.horizontal_flip = true;
  DataLoader loader(data, o);
  const auto batches = epoch_batches(loader, 0);
  const auto x = batches[0].images.to_vector<float>();
  std::set<std::pair<int64_t, int64_t>> offsets;
  int flips = 0;
  for (int64_t i = 0; i < 64; ++i) {
    int64_t dy = 0, dx = 0;
    bool flip = false;
    REQUIRE(explains(x.data() + i * kC * kH * kW, i, 1, dy, dx, flip));
    offsets.insert({dy, dx});
    flips += flip;
  }
  CHECK(offsets.size() >= 6);  // of 9 possible offsets
  CHECK(flips > 10);
  CHECK(flips < 54);

  DataLoader same(data, o);
  CHECK(all_values(epoch_batches(same, 0)) == x);
  CHECK(all_values(epoch_batches(same, 1)) != x);
  o.seed = 12;
  DataLoader other(data, o);
  CHECK(all_values(epoch_batches(other, 0)) != x);
}

TEST_CASE("dataloader: prefetch on and off give identical batches", "[dataloader]") {
  const Dataset data = synthetic(29);
  DataLoaderOptions o = opts(6, 5, true);
  o.augment.crop_padding = 2;
  o.augment.horizontal_flip = true;
  o.normalize = {{0.5f, 0.25f}, {3.0f, 7.0f}};
  DataLoader with(data, o);
  o.prefetch = false;
  DataLoader without(data, o);
  for (int64_t epoch : {0, 3}) {
    const auto a = epoch_batches(with, epoch), b = epoch_batches(without, epoch);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].images.to_vector<float>() == b[i].images.to_vector<float>());
      CHECK(a[i].labels.to_vector<int32_t>() == b[i].labels.to_vector<int32_t>());
    }
  }
  // Switched off between epochs (the trainer's choice per epoch), as if never on.
  with.set_prefetch(false);
  const auto a = epoch_batches(with, 5), b = epoch_batches(without, 5);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].images.to_vector<float>() == b[i].images.to_vector<float>());
}

TEST_CASE("dataloader: destroying or restarting mid-epoch is clean", "[dataloader]") {
  const Dataset data = synthetic(500);
  for (int round = 0; round < 20; ++round) {
    auto loader = std::make_unique<DataLoader>(data, opts(1, round));
    loader->start_epoch(0);
    Batch b;
    if (round % 2) REQUIRE(loader->next(b));
    loader->start_epoch(1);  // abandons epoch 0 while its worker may be waiting
    REQUIRE(loader->next(b));
    CHECK(b.step == 0);
    loader.reset();  // joins a worker blocked on a full queue
  }
  DataLoader idle(data, opts(8, 0));  // never started: nothing to join
  CHECK(idle.steps_per_epoch() == 63);
}

TEST_CASE("dataloader: a failure while building a batch reaches next()", "[dataloader]") {
  for (bool prefetch : {true, false}) {
    Dataset data = synthetic(10);
    DataLoader loader(data, opts(4, 0, prefetch));
    data.labels.convert_to_(DType::Float32);  // the loader shares this tensor
    loader.start_epoch(0);
    Batch b;
    CHECK_THROWS_WITH(loader.next(b), Catch::Contains("read as int32"));
    if (prefetch) CHECK_THROWS_WITH(loader.next(b), Catch::Contains("read as int32"));
  }
  // A failure inside a sample's copy: without prefetch the copies run on the OpenMP pool.
  for (bool prefetch : {true, false}) {
    Dataset data = synthetic(10);
    DataLoader loader(data, opts(4, 0, prefetch));
    data.images.convert_to_(DType::Int32);
    loader.start_epoch(0);
    Batch b;
    CHECK_THROWS_WITH(loader.next(b), Catch::Contains("read as float32"));
  }
}

TEST_CASE("dataloader: bad options are refused with the reason", "[dataloader]") {
  const Dataset data = synthetic(10);
  CHECK_THROWS_WITH(DataLoader(data, opts(0, 0)), Catch::Contains("batch size 0"));
  DataLoaderOptions o = opts(4, 0);
  o.normalize = {{0.5f}, {0.5f}};
  CHECK_THROWS_WITH(DataLoader(data, o), Catch::Contains("one mean and one std per channel (2 channels)"));
  o.normalize = {{0.5f, 0.5f}, {0.5f, 0.0f}};
  CHECK_THROWS_WITH(DataLoader(data, o), Catch::Contains("std 0 must be positive"));
  DataLoader loader(data, opts(4, 0));
  Batch b;
  CHECK_THROWS_WITH(loader.next(b), Catch::Contains("call start_epoch"));
  CHECK_THROWS_WITH(loader.start_epoch(0, 4), Catch::Contains("cannot skip 4 steps of an epoch of 3"));
  CHECK_THROWS_WITH(DataLoader(Dataset{}, opts(4, 0)), Catch::Contains("is empty"));
}

TEST_CASE("split_validation: seeded, disjoint, complete", "[dataloader][split]") {
  const Dataset data = synthetic(50);
  const auto [train, val] = split_validation(data, 0.2, 9);
  CHECK(train.size() == 40);
  CHECK(val.size() == 10);
  CHECK(val.name == "synthetic");
  auto first_ids = [](const Dataset& d) {
    std::vector<int64_t> out;
    const float* x = d.images.data<float>();
    for (int64_t i = 0; i < d.size(); ++i) out.push_back(static_cast<int64_t>(x[i * kC * kH * kW] - 1) / 1000);
    return out;
  };
  const auto t = first_ids(train), v = first_ids(val);
  std::set<int64_t> all(t.begin(), t.end());
  all.insert(v.begin(), v.end());
  CHECK(all.size() == 50);
  CHECK(std::is_sorted(t.begin(), t.end()));
  const auto perm = random_permutation(50, RandomStream{9, RandomPurpose::Split, 0});
  std::vector<int64_t> expected(perm.begin(), perm.begin() + 10);
  std::sort(expected.begin(), expected.end());
  CHECK(v == expected);
  const auto yv = val.labels.to_vector<int32_t>();
  for (size_t i = 0; i < v.size(); ++i) CHECK(yv[i] == v[i] % 10);
  CHECK(first_ids(split_validation(data, 0.2, 9).second) == v);
  CHECK(first_ids(split_validation(data, 0.2, 10).second) != v);
  CHECK_THROWS_WITH(split_validation(data, 0.0, 1), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(split_validation(data, 0.001, 1), Catch::Contains("empty training or validation set"));
}

TEST_CASE("a data set of bytes gives the same batches as its float32 values", "[dataloader][bytes]") {
  // The loaders keep IDX and CIFAR pixels as bytes and convert per batch; the batches must be
  // exactly those of the same data held as floats p / 255, augmented and normalised alike.
  constexpr int64_t n = 37;
  Dataset bytes, floats;
  bytes.name = floats.name = "bytes";
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < n * kC * kH * kW; ++i) pixels.push_back(static_cast<uint8_t>((i * 97 + 13) % 256));
  for (int64_t i = 0; i < n; ++i) labels.push_back(static_cast<int32_t>(i % 10));
  bytes.images = Tensor::empty({n, kC, kH, kW}, DType::UInt8);
  std::copy(pixels.begin(), pixels.end(), bytes.images.data<uint8_t>());
  std::vector<float> values;
  for (uint8_t p : pixels) values.push_back(static_cast<float>(p) / 255.0f);
  floats.images = Tensor::from_vector(values, {n, kC, kH, kW});
  bytes.labels = floats.labels = Tensor::from_vector(labels, {n});
  CHECK(bytes.images_as_float(0, n).to_vector<float>() == values);

  DataLoaderOptions o;
  o.batch_size = 8;
  o.seed = 5;
  o.augment.crop_padding = 1;
  o.augment.horizontal_flip = true;
  o.normalize.mean = {0.5f, 0.25f};
  o.normalize.std = {0.2f, 0.3f};
  DataLoader a(bytes, o), b(floats, o);
  a.start_epoch(1);
  b.start_epoch(1);
  Batch x, y;
  int batches = 0;
  while (a.next(x)) {
    REQUIRE(b.next(y));
    CHECK(x.images.to_vector<float>() == y.images.to_vector<float>());
    CHECK(x.labels.to_vector<int32_t>() == y.labels.to_vector<int32_t>());
    ++batches;
  }
  CHECK_FALSE(b.next(y));
  CHECK(batches == 5);
  // A validation split keeps the bytes.
  const auto [train, val] = split_validation(bytes, 0.25, 3);
  CHECK(train.images.dtype() == DType::UInt8);
  CHECK(val.images.dtype() == DType::UInt8);
  CHECK(train.size() + val.size() == n);
}

// Bytes become floats in [0, 1] as x / 255 (torchvision's ToTensor), computed without a divide:
// every one of the 256 values must equal the division's correctly rounded result.
TEST_CASE("bytes become x / 255 exactly, for every byte", "[dataloader]") {
  std::vector<uint8_t> bytes(256 + 7);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i % 256);
  std::vector<float> floats(bytes.size(), -1.0f);
  bytes_to_unit_float(bytes.data(), static_cast<int64_t>(bytes.size()), floats.data());
  for (size_t i = 0; i < bytes.size(); ++i) {
    INFO("byte " << int(bytes[i]));
    CHECK(floats[i] == static_cast<float>(bytes[i]) / 255.0f);
  }
}

// A batch built on a device from the stored bytes (Backend::gather_images; here its CPU twin,
// which the CUDA kernel is tested against) gives the host loader's values: x / 255, then
// (x − mean) / std, for every byte in both channels; padding is a zero pixel, normalised.
TEST_CASE("gather_images turns bytes into the host loader's normalised floats", "[dataloader]") {
  std::vector<uint8_t> bytes(256 * 2);
  std::vector<int32_t> index(256);
  for (int32_t i = 0; i < 256; ++i) {
    bytes[static_cast<size_t>(2 * i)] = static_cast<uint8_t>(i);
    bytes[static_cast<size_t>(2 * i + 1)] = static_cast<uint8_t>(255 - i);
    index[static_cast<size_t>(i)] = 255 - i;
  }
  const std::vector<float> mean{0.1307f, 0.5f}, std{0.3081f, 0.25f};
  const Tensor mean_std = Tensor::from_vector(std::vector<float>{mean[0], mean[1], std[0], std[1]}, {2, 2});
  Tensor out = Tensor::empty({256, 2, 1, 1});
  Backend& cpu = backend_for(Device::cpu());
  cpu.gather_images(Tensor::from_vector(bytes, {256, 2, 1, 1}), Tensor::from_vector(index, {256}), Tensor(), mean_std,
                    out);
  const std::vector<float> got = out.to_vector<float>();
  for (size_t i = 0; i < 256; ++i)
    for (size_t ch = 0; ch < 2; ++ch) {
      const uint8_t p = bytes[2 * static_cast<size_t>(index[i]) + ch];
      INFO("byte " << int(p) << ", channel " << ch);
      CHECK(got[2 * i + ch] == (static_cast<float>(p) / 255.0f - mean[ch]) / std[ch]);
    }
  // Shifted one column right on images one pixel wide: nothing but padding.
  std::vector<int32_t> shift(3 * 256, 0);
  for (size_t i = 0; i < 256; ++i) shift[3 * i + 1] = 1;
  cpu.gather_images(Tensor::from_vector(bytes, {256, 2, 1, 1}), Tensor::from_vector(index, {256}),
                    Tensor::from_vector(shift, {256, 3}), mean_std, out);
  const std::vector<float> padded = out.to_vector<float>();
  CHECK(padded[0] == (0.0f - mean[0]) / std[0]);
  CHECK(padded[511] == (0.0f - mean[1]) / std[1]);
  CHECK_THROWS_WITH(cpu.gather_images(Tensor::from_vector(bytes, {256, 2, 1, 1}), Tensor::from_vector(index, {256}),
                                      Tensor(), Tensor::from_vector(std::vector<float>{0.5f, 0.5f}, {2}), out),
                    Catch::Contains("the normalisation must be float32 (2, 2)"));
}
