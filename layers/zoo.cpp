#include "layers/zoo.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"

#ifndef NNLAB_SOURCE_ZOO_DIR
#define NNLAB_SOURCE_ZOO_DIR ""
#endif
#ifndef NNLAB_INSTALL_ZOO_DIR
#define NNLAB_INSTALL_ZOO_DIR ""
#endif

namespace nnlab {

namespace {

namespace fs = std::filesystem;

// The zoo, in listing order; each name is a file <name>.json in the zoo's folder.
const char* const kZooNames[] = {"mlp", "cnn", "lenet5", "cifar-cnn", "cnn-bn", "resnet8"};

// The folder of the running program (from /proc/self/exe), or "" when it cannot be read.
std::string program_folder() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

}  // namespace

std::string zoo_directory() {
  if (const char* env = std::getenv("NNLAB_ZOO_DIR"); env && *env) {
    NNLAB_CHECK(fs::exists(fs::path(env) / "mlp.json"), "NNLAB_ZOO_DIR=", env,
                " does not hold nnlab's model zoo (mlp.json and the others); unset it or point it at "
                "<prefix>/share/nnlab/zoo");
    return env;
  }
  std::vector<std::string> places;
  if (const std::string exe = program_folder(); !exe.empty()) places.push_back(exe + "/../share/nnlab/zoo");
  places.push_back(NNLAB_SOURCE_ZOO_DIR);
  places.push_back(NNLAB_INSTALL_ZOO_DIR);
  std::string looked;
  for (const std::string& p : places) {
    if (p.empty()) continue;
    std::error_code ec;
    if (fs::exists(fs::path(p) / "mlp.json", ec)) return fs::path(p).lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + p;
  }
  fail("nnlab's model zoo (mlp.json and the other model files) is not installed: looked in ", looked,
       "; reinstall nnlab, or set NNLAB_ZOO_DIR to the folder holding the files");
}

const std::vector<ModelFile>& model_zoo() {
  static const std::vector<ModelFile> zoo = [] {
    const std::string dir = zoo_directory();
    std::vector<ModelFile> files;
    for (const char* name : kZooNames) {
      files.push_back(read_model_file(dir + "/" + name + ".json"));
      files.back().origin = std::string("zoo model ") + name;  // messages name the model, not the path
    }
    return files;
  }();
  return zoo;
}

std::string model_names() {
  std::string out;
  for (const char* name : kZooNames) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

const ModelFile& model_info(const std::string& name) {
  for (const ModelFile& m : model_zoo())
    if (m.name == name) return m;
  fail("unknown model '", name, "'; choose one of: ", model_names(), ", or describe your own in a file and give "
       "--model-file FILE (docs/models.md)");
}

std::shared_ptr<Sequential> make_model(const std::string& name, const InputSpec& input, uint64_t seed) {
  return make_model(model_info(name), input, seed);
}

}  // namespace nnlab
