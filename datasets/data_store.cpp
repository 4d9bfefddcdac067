#include "datasets/data_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "datasets/cifar10.h"
#include "datasets/digest.h"
#include "datasets/idx.h"

namespace nnlab {

namespace fs = std::filesystem;

namespace {

const char kSourceFile[] = "SOURCE";

// Writes `n` bytes to `path` and fsyncs them; throws naming the path (disk full, read-only).
void write_synced(const std::string& path, const void* data, size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  NNLAB_CHECK(fd >= 0, "cannot create ", path, ": ", std::strerror(errno));
  const auto* p = static_cast<const char*>(data);
  size_t left = n;
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = errno;
      ::close(fd);
      fail("writing ", path, " failed: ", std::strerror(e), " (is the disk full?)");
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  const bool synced = ::fsync(fd) == 0;
  const int e = errno;
  ::close(fd);
  NNLAB_CHECK(synced, "cannot flush ", path, " to disk: ", std::strerror(e));
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Images per class in an installed copy's split (0 train, 1 test).
std::vector<long long> count_classes(const DataSetSpec& spec, const fs::path& dir, int split) {
  std::vector<long long> counts(10, 0);
  if (spec.format == DataFormat::Cifar10) {
    for (const DataFile& f : spec.files) {
      if ((f.name.rfind("test", 0) == 0) != (split == 1)) continue;
      std::ifstream in(dir / f.name, std::ios::binary);
      std::vector<char> record(static_cast<size_t>(kCifarRecordBytes));
      while (in.read(record.data(), kCifarRecordBytes))
        if (static_cast<uint8_t>(record[0]) < 10) ++counts[static_cast<uint8_t>(record[0])];
    }
  } else {
    const IdxArray labels = read_idx_file((dir / (split == 0 ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte")).string());
    for (uint8_t y : labels.data.to_vector<uint8_t>())
      if (y < 10) ++counts[y];
  }
  return counts;
}

}  // namespace

std::string data_store_root() {
  if (const char* env = std::getenv("NNLAB_DATA_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return (fs::path(xdg) / "nnlab" / "datasets").string();
  const char* home = std::getenv("HOME");
  NNLAB_CHECK(home && *home, "neither NNLAB_DATA_DIR nor HOME is set, so nnlab does not know where data sets live; "
                             "set NNLAB_DATA_DIR or pass --data-dir");
  return (fs::path(home) / ".local" / "share" / "nnlab" / "datasets").string();
}

std::string installed_data_dir(const DataSetSpec& spec, const std::string& root) {
  const DataStatus status = check_installed(spec, root, false);
  return status.present ? status.dir : "";
}

DataStatus check_installed(const DataSetSpec& spec, const std::string& root, bool verify_checksums) {
  DataStatus s;
  s.dir = (fs::path(root) / spec.name).string();
  std::error_code ec;
  if (!fs::is_directory(s.dir, ec)) {
    s.problem = "not installed";
    return s;
  }
  for (const DataFile& f : spec.files) {
    const fs::path p = fs::path(s.dir) / f.name;
    const auto size = fs::file_size(p, ec);
    if (ec) {
      s.problem = f.name + " is missing";
      return s;
    }
    if (f.bytes && static_cast<long long>(size) != f.bytes) {
      s.problem = f.name + " has " + std::to_string(size) + " bytes, expected " + std::to_string(f.bytes);
      return s;
    }
  }
  s.present = true;
  std::ifstream source(fs::path(s.dir) / kSourceFile);
  std::getline(source, s.source);
  if (!verify_checksums) return s;
  for (const DataFile& f : spec.files) {
    const std::string got = file_digest_like((fs::path(s.dir) / f.name).string(), f.digest);
    if (got != f.digest) {
      s.problem = f.name + " has checksum " + got + ", expected " + f.digest;
      return s;
    }
  }
  s.verified = true;
  return s;
}

DataStaging::DataStaging(const DataSetSpec& spec, const std::string& root) : spec_(spec), root_(root) {
  std::error_code ec;
  fs::create_directories(root, ec);
  NNLAB_CHECK(fs::is_directory(root, ec), "cannot create the data folder ", root, ": ", ec.message(),
              "; choose another with --data-dir or NNLAB_DATA_DIR");
  dir_ = (fs::path(root) / (".staging-" + spec.name + "-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir_, ec);
  NNLAB_CHECK(fs::create_directory(dir_, ec), "cannot create ", dir_, ": ", ec.message());
}

DataStaging::~DataStaging() {
  std::error_code ec;
  if (!committed_) fs::remove_all(dir_, ec);
}

const DataFile& DataStaging::file_spec(const std::string& name) const {
  for (const DataFile& f : spec_.files)
    if (f.name == name) return f;
  fail("internal: ", name, " is not a file of data set ", spec_.name);
}

void DataStaging::write(const std::string& name, const void* data, size_t n) {
  const DataFile& f = file_spec(name);
  NNLAB_CHECK(!f.bytes || static_cast<long long>(n) == f.bytes, spec_.name, ": ", name, " came out at ", n,
              " bytes where the published file has ", f.bytes, "; the source is not the expected release");
  const std::string got = bytes_digest_like(data, n, f.digest);
  NNLAB_CHECK(got == f.digest, spec_.name, ": ", name, " has checksum ", got, " where the published one is ",
              f.digest, "; the source is corrupt or a different release, so nothing was installed");
  write_synced((fs::path(dir_) / name).string(), data, n);
  written_.push_back(name);
}

std::string DataStaging::commit(const std::string& source) {
  for (const DataFile& f : spec_.files)
    NNLAB_CHECK(std::find(written_.begin(), written_.end(), f.name) != written_.end(), spec_.name,
                ": the source did not provide ", f.name, "; nothing was installed");
  for (int split = 0; split < 2; ++split) {
    const long long* want = spec_.class_count[split];
    if (std::all_of(want, want + 10, [](long long c) { return c == 0; })) continue;
    const std::vector<long long> got = count_classes(spec_, dir_, split);
    for (int k = 0; k < 10; ++k)
      NNLAB_CHECK(got[k] == want[k], spec_.name, ": the ", split == 0 ? "training" : "test", " set has ", got[k],
                  " images of class ", k, " where the published count is ", want[k], "; nothing was installed");
  }
  const std::string text = source + "\n";
  write_synced((fs::path(dir_) / kSourceFile).string(), text.data(), text.size());
  sync_dir(dir_);

  const std::string target = (fs::path(root_) / spec_.name).string();
  const std::string aside = target + ".old-" + std::to_string(::getpid());
  std::error_code ec;
  const bool had_old = fs::exists(target, ec);
  if (had_old) {
    fs::rename(target, aside, ec);
    NNLAB_CHECK(!ec, "cannot move the old copy ", target, " aside: ", ec.message());
  }
  fs::rename(dir_, target, ec);
  if (ec) {
    std::error_code ignored;
    if (had_old) fs::rename(aside, target, ignored);
    fail("cannot move ", dir_, " to ", target, ": ", ec.message());
  }
  committed_ = true;
  sync_dir(root_);
  if (had_old) fs::remove_all(aside, ec);
  return target;
}

}  // namespace nnlab
