// scripts/download-data.sh against a local file:// mirror (tests never use the network):
// good files are accepted, a file with a bad checksum is refused, removed and reported.
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "datasets/cifar10.h"
#include "datasets/dataset.h"
#include "test_support.h"

using namespace nnlab;
namespace fs = std::filesystem;

namespace {

// A scratch folder holding the download mirror ("mirror") and the output folder ("out").
struct DownloadDir : nnlab_test::TempDir {
  DownloadDir() : TempDir("nnlab_download") { fs::create_directories(path / "mirror"); }
  std::string mirror() const { return (path / "mirror").string(); }
  std::string out() const { return (path / "out").string(); }
};

struct Result {
  int code;
  std::string output;
};

int run_shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs the script with `args`, capturing its exit code and combined output.
Result download(const DownloadDir& dir, const std::string& args) {
  const std::string script = std::string(NNLAB_TEST_DIR) + "/../scripts/download-data.sh";
  const std::string log = (dir.path / "log.txt").string();
  Result r;
  r.code = run_shell("bash '" + script + "' " + args + " >'" + log + "' 2>&1");
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  return r;
}

// A tiny valid MNIST-format file (n items of the given extents), gzip-compressed.
void write_idx_gz(const std::string& path, const std::vector<uint32_t>& dims, uint8_t fill) {
  std::vector<uint8_t> b = {0, 0, 8, static_cast<uint8_t>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
    n *= d;
  }
  b.insert(b.end(), n, fill);
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzwrite(f, b.data(), static_cast<unsigned>(b.size()));
  gzclose(f);
}

void make_mnist_mirror(const DownloadDir& dir) {
  write_idx_gz(dir.mirror() + "/train-images-idx3-ubyte.gz", {3, 2, 2}, 200);
  write_idx_gz(dir.mirror() + "/train-labels-idx1-ubyte.gz", {3}, 4);
  write_idx_gz(dir.mirror() + "/t10k-images-idx3-ubyte.gz", {2, 2, 2}, 100);
  write_idx_gz(dir.mirror() + "/t10k-labels-idx1-ubyte.gz", {2}, 7);
}

// Writes "<digest>  <name>" lines for every file of the mirror with md5sum or sha256sum.
std::string write_sums(const DownloadDir& dir, const std::string& tool) {
  const std::string sums = (dir.path / (tool + ".txt")).string();
  REQUIRE(run_shell("cd '" + dir.mirror() + "' && " + tool + " * >'" + sums + "'") == 0);
  return sums;
}

// Replaces the digest of `name` in a checksum file by a wrong one of the same length.
void spoil(const std::string& sums, const std::string& name) {
  std::ifstream in(sums);
  std::string line, text;
  while (std::getline(in, line)) {
    if (line.find(name) != std::string::npos) line = std::string(line.find(' '), '0') + line.substr(line.find(' '));
    text += line + "\n";
  }
  in.close();
  std::ofstream(sums) << text;
}

}  // namespace

TEST_CASE("download: verified MNIST files from a file:// mirror are accepted", "[download]") {
  DownloadDir dir;
  make_mnist_mirror(dir);
  for (const std::string tool : {"sha256sum", "md5sum"}) {
    fs::remove_all(dir.out());
    const Result r = download(dir, "--mirror file://" + dir.mirror() + " --checksums " + write_sums(dir, tool) +
                                       " mnist " + dir.out());
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(r.output.find("t10k-labels-idx1-ubyte.gz: verified") != std::string::npos);
    CHECK_FALSE(fs::exists(dir.out() + "/.partial"));
    const Dataset train = load_dataset("mnist", dir.out(), "train");
    CHECK(train.images.shape() == Shape{3, 1, 2, 2});
    CHECK(train.images_as_float(0, 1).to_vector<float>()[0] == 200.0f / 255.0f);
    CHECK(load_dataset("mnist", dir.out(), "test").labels.to_vector<int32_t>() == std::vector<int32_t>{7, 7});
  }
  // A second run finds the files in place and verified.
  const Result again = download(dir, "--mirror file://" + dir.mirror() + " --checksums " +
                                         write_sums(dir, "md5sum") + " mnist " + dir.out());
  CHECK(again.code == 0);
  CHECK(again.output.find("already present and verified") != std::string::npos);
}

TEST_CASE("download: a file with a bad checksum is refused and removed", "[download]") {
  DownloadDir dir;
  make_mnist_mirror(dir);
  const std::string sums = write_sums(dir, "md5sum");
  spoil(sums, "train-labels-idx1-ubyte.gz");
  const Result r = download(dir, "--mirror file://" + dir.mirror() + " --checksums " + sums + " mnist " + dir.out());
  INFO(r.output);
  CHECK(r.code != 0);
  CHECK(r.output.find("checksum mismatch for train-labels-idx1-ubyte.gz: expected 00000000000000000000000000000000") !=
        std::string::npos);
  CHECK(r.output.find("the file was removed") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.out() + "/train-labels-idx1-ubyte.gz"));
  CHECK_FALSE(fs::exists(dir.out() + "/.partial"));
  CHECK(fs::exists(dir.out() + "/train-images-idx3-ubyte.gz"));     // verified before the bad one
  CHECK_FALSE(fs::exists(dir.out() + "/t10k-images-idx3-ubyte.gz"));  // never reached

  // The built-in checksums are the published ones: the fake mirror's files fail them.
  const Result builtin = download(dir, "--mirror file://" + dir.mirror() + " mnist " + dir.out());
  CHECK(builtin.code != 0);
  CHECK(builtin.output.find("expected f68b3c2dcbeaaa9fbdd348bbdeb94873") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.out() + "/train-images-idx3-ubyte.gz"));  // a stale unverified file goes too
}

TEST_CASE("download: CIFAR-10 archive is verified and unpacked for the loader", "[download]") {
  DownloadDir dir;
  const fs::path src = dir.path / "src" / "cifar-10-batches-bin";
  fs::create_directories(src);
  std::vector<char> record(kCifarRecordBytes, 9);
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"})
    std::ofstream(src / name, std::ios::binary).write(record.data(), record.size());
  REQUIRE(run_shell("tar -czf '" + dir.mirror() + "/cifar-10-binary.tar.gz' -C '" + (dir.path / "src").string() +
                    "' cifar-10-batches-bin") == 0);
  const Result r = download(dir, "--mirror file://" + dir.mirror() + " --checksums " + write_sums(dir, "sha256sum") +
                                     " cifar10 " + dir.out());
  INFO(r.output);
  REQUIRE(r.code == 0);
  const Dataset train = load_dataset("cifar10", dir.out(), "train");
  CHECK(train.size() == 5);
  CHECK(train.labels.to_vector<int32_t>() == std::vector<int32_t>(5, 9));
}

TEST_CASE("download: usage errors", "[download]") {
  DownloadDir dir;
  const Result r = download(dir, "imagenet " + dir.out());
  CHECK(r.code == 2);
  CHECK(r.output.find("unknown data set 'imagenet'") != std::string::npos);
  CHECK(download(dir, "--bogus mnist " + dir.out()).output.find("unknown option --bogus") != std::string::npos);
  CHECK(download(dir, "mnist").code == 2);
}
