#include "devices/cuda_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace nnlab {

namespace {

struct Loaded {
  const CudaPlugin* plugin = nullptr;
  std::string why;  // set when plugin is nullptr
};

[[maybe_unused]] std::string program_folder() {
  std::vector<char> path(4096);
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) return ".";
  std::string exe(path.data(), static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

[[maybe_unused]] bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The table of an opened library, or nullptr with *why set.
const CudaPlugin* table_of(void* handle, const std::string& path, std::string* why) {
  using Entry = const CudaPlugin* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "nnlab_cuda_plugin"));
  if (!entry) {
    *why = path + " is not nnlab's CUDA backend library (it has no nnlab_cuda_plugin)";
    return nullptr;
  }
  const CudaPlugin* plugin = entry();
  if (plugin->version != kCudaPluginVersion) {
    *why = path + " is the CUDA backend of another nnlab version (its interface is version " +
           std::to_string(plugin->version) + ", this program needs " + std::to_string(kCudaPluginVersion) +
           "); rebuild or reinstall nnlab";
    return nullptr;
  }
  return plugin;
}

[[maybe_unused]] const CudaPlugin* open_library(const std::string& path, std::string* why) {
  // RTLD_NOW: every symbol resolved here, so a missing one is a message now, not a crash
  // in the middle of a training run. RTLD_LOCAL: its symbols stay its own.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = dlerror();
    *why = "the CUDA backend " + path + " could not be loaded: " + (error ? error : "unknown error");
    return nullptr;
  }
  return table_of(handle, path, why);
}

Loaded load() {
  Loaded result;
#if !defined(NNLAB_CUDA_LIBRARY_NAME)
  result.why = "this nnlab was built without CUDA (nvcc was not found at configure time, or NNLAB_WITH_CUDA=OFF)";
  return result;
#else
  if (const char* explicit_path = std::getenv("NNLAB_CUDA_LIBRARY"); explicit_path && *explicit_path) {
    result.plugin = open_library(explicit_path, &result.why);
    if (!result.plugin) result.why += " (NNLAB_CUDA_LIBRARY)";
    return result;
  }
  if (dlsym(RTLD_DEFAULT, "nnlab_cuda_plugin")) {
    result.plugin = table_of(RTLD_DEFAULT, "the linked CUDA backend", &result.why);
    return result;
  }
#if !defined(NNLAB_CUDA_SIMULATOR)
  // Without a driver there is no GPU to use, and loading the backend would only map the CUDA
  // libraries for nothing; the simulator needs no driver.
  if (!dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    result.why = "no NVIDIA driver is installed (libcuda.so.1 could not be loaded); install the driver or use --device cpu";
    return result;
  }
#endif
  const std::string here = program_folder(), name = NNLAB_CUDA_LIBRARY_NAME;
  const std::vector<std::string> candidates = {here + "/" + name, here + "/../" + name, here + "/../lib/nnlab/" + name,
                                               std::string(NNLAB_CUDA_INSTALL_DIR) + "/" + name};
  for (const std::string& path : candidates) {
    if (!file_exists(path)) continue;
    result.plugin = open_library(path, &result.why);
    return result;
  }
  result.why = "nnlab's CUDA backend (" + name + ") was not found next to the program (" + here + ") or in " +
               NNLAB_CUDA_INSTALL_DIR + "; reinstall nnlab or set NNLAB_CUDA_LIBRARY to its path";
  return result;
#endif
}

}  // namespace

namespace {
std::once_flag g_once;
Loaded g_loaded;
std::atomic<bool> g_done{false};
}  // namespace

const CudaPlugin* load_cuda_plugin(std::string* why) {
  std::call_once(g_once, [] {
    g_loaded = load();
    g_done = true;
  });
  if (!g_loaded.plugin && why) *why = g_loaded.why;
  return g_loaded.plugin;
}

const CudaPlugin* loaded_cuda_plugin() { return g_done ? g_loaded.plugin : nullptr; }

}  // namespace nnlab
