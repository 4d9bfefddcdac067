#include "datasets/image_folder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/random.h"
#include "datasets/image_io.h"

namespace nnlab {

namespace fs = std::filesystem;

namespace {

struct LabelledFile {
  std::string path;
  int32_t label = 0;
};

bool hidden(const fs::path& p) { return p.filename().string().rfind('.', 0) == 0; }

std::vector<std::string> sorted_entries(const fs::path& dir, bool directories) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (hidden(entry.path())) continue;
    const bool is_dir = entry.is_directory(ec);
    if (directories ? is_dir : (!is_dir && has_image_extension(entry.path().string())))
      names.push_back(entry.path().filename().string());
  }
  NNLAB_CHECK(!ec, "cannot list the folder '", dir.string(), "': ", ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

// The image files of dir/<class>/ for every class folder in dir; a class folder unknown to
// `classes` is an error (a test split may only hold classes the training split has).
std::vector<LabelledFile> list_images(const fs::path& dir, const std::vector<std::string>& classes) {
  std::vector<LabelledFile> files;
  for (const std::string& folder : sorted_entries(dir, true)) {
    const auto it = std::find(classes.begin(), classes.end(), folder);
    NNLAB_CHECK(it != classes.end(), "image folder '", (dir / folder).string(),
                "' is a class the training folder does not have; every test class needs a training folder");
    const auto label = static_cast<int32_t>(it - classes.begin());
    for (const std::string& name : sorted_entries(dir / folder, false))
      files.push_back({(dir / folder / name).string(), label});
  }
  return files;
}

// Throws one Error listing the first few problems when there are any.
void report_bad_files(const std::vector<std::string>& problems, const std::string& root) {
  if (problems.empty()) return;
  std::string list;
  for (size_t i = 0; i < std::min<size_t>(problems.size(), 5); ++i) list += "\n  " + problems[i];
  if (problems.size() > 5) list += "\n  ... and " + std::to_string(problems.size() - 5) + " more";
  fail("image folder '", root, "': ", problems.size(), " file(s) cannot be read as images:", list,
       "\nRemove or repair them (nnlab reads PNG, JPEG and BMP).");
}

}  // namespace

Dataset load_image_folder(const std::string& root, const std::string& split) {
  NNLAB_CHECK(split == "train" || split == "test", "unknown split '", split, "' for an image folder; use train or test");
  std::error_code ec;
  NNLAB_CHECK(fs::is_directory(root, ec), "image folder '", root,
              "' does not exist; pass --data-dir ROOT with ROOT/<class>/*.png (or ROOT/train and ROOT/test)");
  const bool presplit = fs::is_directory(fs::path(root) / "train", ec) && fs::is_directory(fs::path(root) / "test", ec);
  const fs::path train_dir = presplit ? fs::path(root) / "train" : fs::path(root);
  const std::vector<std::string> classes = sorted_entries(train_dir, true);
  NNLAB_CHECK(classes.size() >= 2, "image folder '", train_dir.string(), "' has ", classes.size(),
              " class folder(s); a classifier needs at least 2 (ROOT/<class>/*.png)");

  // Every file of the data set (both splits): its header fixes the common shape.
  std::vector<LabelledFile> all = list_images(train_dir, classes);
  NNLAB_CHECK(!all.empty(), "image folder '", train_dir.string(),
              "' holds no .png, .jpg, .jpeg or .bmp files in its class folders");
  std::vector<LabelledFile> chosen;
  if (presplit) {
    const std::vector<LabelledFile> test = list_images(fs::path(root) / "test", classes);
    NNLAB_CHECK(!test.empty(), "image folder '", (fs::path(root) / "test").string(), "' holds no images");
    chosen = split == "train" ? all : test;
    all.insert(all.end(), test.begin(), test.end());
  } else {
    const auto n = static_cast<int64_t>(all.size());
    NNLAB_CHECK(n >= 2, "image folder '", root, "' holds only one image; a train/test split needs at least 2");
    const int64_t n_test = std::clamp<int64_t>(std::llround(kFolderTestFraction * static_cast<double>(n)), 1, n - 1);
    std::vector<int32_t> perm = random_permutation(n, RandomStream{kFolderSplitSeed, RandomPurpose::Split, 1});
    std::vector<int32_t> index = split == "test" ? std::vector<int32_t>(perm.begin(), perm.begin() + n_test)
                                                 : std::vector<int32_t>(perm.begin() + n_test, perm.end());
    std::sort(index.begin(), index.end());
    for (int32_t i : index) chosen.push_back(all[static_cast<size_t>(i)]);
  }

  std::vector<std::string> problems;
  ImageInfo first;
  bool colour = false;
  for (const LabelledFile& f : all) {
    try {
      const ImageInfo info = read_image_info(f.path);
      if (first.width == 0) first = info;
      colour = colour || info.channels >= 3;
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  report_bad_files(problems, root);

  Dataset d;
  d.name = "folder";
  d.class_names = classes;
  d.classes = static_cast<int64_t>(classes.size());
  const int64_t c = colour ? 3 : 1, h = first.height, w = first.width, m = static_cast<int64_t>(chosen.size());
  d.images = Tensor::empty({m, c, h, w});
  d.labels = Tensor::empty({m}, DType::Int32);
  for (int64_t i = 0; i < m; ++i) {
    try {
      const Tensor x = image_to_tensor(read_image(chosen[i].path), c, h, w);
      std::memcpy(d.images.data<float>() + i * c * h * w, x.data<float>(), sizeof(float) * c * h * w);
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
    d.labels.data<int32_t>()[i] = chosen[i].label;
  }
  report_bad_files(problems, root);
  return d;
}

}  // namespace nnlab
