#include "devices/registry.h"

#include <atomic>

#include <memory>
#include <mutex>
#include <vector>

#include "devices/cpu/cpu_backend.h"
#include "devices/cuda_loader.h"

namespace nnlab {

namespace {
DeviceMemory& backend_memory(Device device) { return backend_for(device); }

// Core's Tensor reaches a non-CPU device's memory through this provider (core/device_memory.h).
// It is installed while this file's statics are initialised, which happens in every program
// that links it (any program that calls backend_for, cuda_status or resolve_device), and again
// by cuda_status and resolve_device, the calls a program makes to get a CUDA device, so that
// no order of static initialisation can leave a CUDA tensor without it.
void install_memory_provider() { set_device_memory_provider(&backend_memory); }
[[maybe_unused]] const bool g_memory_provider_installed = (install_memory_provider(), true);
}  // namespace

bool built_with_cuda() {
#ifdef NNLAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_simulated() {
#ifdef NNLAB_CUDA_SIMULATOR
  return true;
#else
  return false;
#endif
}

std::string device_label(Device device) {
  return device.is_cuda() && cuda_simulated() ? device.str() + kSimulatedMark : device.str();
}

// Setting or reading the options never loads the backend: a CPU run that records them
// must not map the CUDA libraries. Options set before it is loaded are handed over when it is.
namespace {
CudaOptions g_cuda_options;
bool g_cuda_options_set = false;  // by set_cuda_options, not just the defaults
const CudaPlugin* cuda_plugin(std::string* why) {
  // Atomic: ranks of one process (threads, each on its device) ask at the same time.
  static std::atomic<const CudaPlugin*> handed_over{nullptr};
  const CudaPlugin* cuda = load_cuda_plugin(why);
  if (cuda && !handed_over.load() && g_cuda_options_set) {
    cuda->set_math_mode(static_cast<int>(g_cuda_options.math));
    cuda->set_deterministic(g_cuda_options.deterministic);
  }
  if (cuda) handed_over.store(cuda);
  return cuda;
}
}  // namespace

CudaStatus cuda_status() {
  install_memory_provider();
  CudaStatus s;
  if (const CudaPlugin* cuda = cuda_plugin(&s.reason)) return cuda->probe();
  return s;
}

std::string cuda_report() {
  const CudaStatus s = cuda_status();
  if (!s.usable) return "no usable CUDA GPU: " + s.reason;
  return cuda_plugin(nullptr)->device_report();
}

bool cuda_loaded() { return loaded_cuda_plugin() != nullptr; }

void set_cuda_options(const CudaOptions& options) {
  g_cuda_options = options;
  g_cuda_options_set = true;
  if (const CudaPlugin* cuda = loaded_cuda_plugin()) {
    cuda->set_math_mode(static_cast<int>(options.math));
    cuda->set_deterministic(options.deterministic);
  }
}

CudaOptions cuda_options() {
  if (const CudaPlugin* cuda = loaded_cuda_plugin())
    return {static_cast<CudaMath>(cuda->math_mode()), cuda->deterministic()};
  return g_cuda_options;
}

CudaMath parse_cuda_math(const std::string& text, const std::string& option) {
  for (CudaMath m : {CudaMath::Fp32, CudaMath::Tf32, CudaMath::Bf16})
    if (text == cuda_math_name(m)) return m;
  fail(option, " '", text, "' is not known; choose fp32, tf32 or bf16");
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) {
    static CpuBackend cpu;  // never destroyed before the tensors that use it: see cpu_backend.h
    return cpu;
  }
  std::string why;
  const CudaPlugin* cuda = cuda_plugin(&why);
  if (!cuda) fail("cannot use ", device.str(), ": ", why);
  return cuda->backend(device.index);
}

Device resolve_device(const std::string& text, std::string* why) {
  install_memory_provider();
  if (text == "auto") {
    const CudaStatus s = cuda_status();
    if (s.usable && cuda_simulated()) {
      if (why)
        *why = "auto: chose cpu: the only CUDA device is the CUDA simulator, which runs the CUDA kernels on this "
               "CPU far slower than the CPU backend; ask for it with --device cuda";
      return Device::cpu();
    }
    if (s.usable) {
      if (why) *why = "auto: chose cuda:0 (" + std::to_string(s.device_count) + " usable CUDA device(s))";
      return Device::cuda(0);
    }
    if (why) *why = "auto: chose cpu because no CUDA device is usable: " + s.reason;
    return Device::cpu();
  }
  const Device d = parse_device(text);
  if (d.is_cuda()) {
    const CudaStatus s = cuda_status();
    NNLAB_CHECK(s.usable, "--device ", text, " cannot be used: ", s.reason, ". Use --device cpu or auto.");
    NNLAB_CHECK(d.index < s.device_count, "--device ", text, ": only ", s.device_count,
                " CUDA device(s) are present (cuda:0 .. cuda:", s.device_count - 1, ")");
  }
  if (why) *why = "device " + d.str() + " as asked";
  return d;
}

}  // namespace nnlab
